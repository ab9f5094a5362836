#!/usr/bin/env python3
"""ptrec's command line, end to end, without qemu, java or PT hardware.

usage: cli_test.py PTREC CASE FAKE_JAVA

Error cases run the real ptrec and check exit codes and messages. The recording
cases put fake_qemu.py in place of qemu-x86_64 + libptemu.so and fake_agent.py
in place of the JVM agent, run by FAKE_JAVA (fake_java.c, a launcher by name),
so the handshake, the plugin's control socket,
signals, exit statuses and info.json are checked deterministically.
"""
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PTREC = os.path.abspath(sys.argv[1])
PY = sys.executable          # an ELF binary, not a script: ptrec refuses scripts under --emulate
FAKE_JAVA = os.path.abspath(sys.argv[3])
TMP = tempfile.mkdtemp(prefix="ptrec-cli-")
SUMMARY = re.compile(r"^ptrec: (\d+) threads?, [0-9.]+ MB of PT, [0-9.]+ MB lost "
                     r"\(([0-9.]+)%\), trace in (.+)$", re.M)
CC = "jpt 1 codecache 0x7f0000000000 0x7f0010000000 pid 4242"
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL: " + what, file=sys.stderr)


def run(args, env=None, timeout=60, **kw):
    e = dict(os.environ)
    for k in ("JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "_JAVA_OPTIONS", "JPT_AGENT", "JPT_PTEMU"):
        e.pop(k, None)
    e.update(env or {})
    p = subprocess.run([PTREC] + args, env=e, capture_output=True, text=True, timeout=timeout,
                       cwd=TMP, **kw)
    print(f"$ ptrec {' '.join(args)}\n-> {p.returncode}\n{p.stdout}{p.stderr}")
    return p


def expect_error(args, code, message, env=None):
    p = run(args, env)
    check(p.returncode == code, f"exit {p.returncode}, wanted {code}")
    check(message in p.stderr, f"stderr lacks {message!r}")
    check(len(p.stderr.strip().splitlines()) == 1, "error is not exactly one line")
    return p


# stand-ins ------------------------------------------------------------------

def fakes():
    """A qemu wrapper that runs fake_qemu.py with this Python, and a plugin file."""
    qemu = os.path.join(TMP, "qemu-x86_64")
    with open(qemu, "w") as f:
        f.write(f'#!/bin/sh\nexec "{PY}" "{HERE}/fake_qemu.py" "$@"\n')
    os.chmod(qemu, 0o755)
    plugin = os.path.join(TMP, "libptemu.so")
    open(plugin, "w").close()
    agent = os.path.join(TMP, "libjpt.so")
    open(agent, "w").close()
    return ["--emulate", "--qemu", qemu, "--plugin", plugin, "--agent", agent]


def agent_cmd(*lines):
    """The fake agent run by the fake java launcher."""
    return [FAKE_JAVA, PY, os.path.join(HERE, "fake_agent.py")] + list(lines)


def info(d):
    with open(os.path.join(TMP, d, "info.json")) as f:
        return json.load(f)


def plugin_log(d):
    with open(os.path.join(TMP, d, "eval", "fake-plugin.log")) as f:
        return f.read().splitlines()


# error cases -------------------------------------------------------------------

def case_no_command():
    expect_error([], 2, "ptrec: no command given (usage: ptrec [OPTIONS] -- COMMAND...)")
    expect_error(["--emulate", "-o", "x", "--"], 2, "ptrec: no command given")
    check(not os.path.exists(os.path.join(TMP, "x")), "a trace dir was created")


def case_exists():
    d = os.path.join(TMP, "ex")
    os.makedirs(d)
    with open(os.path.join(d, "keep.txt"), "w") as f:
        f.write("precious")
    expect_error(["--emulate", "-o", "ex", "--", "true"], 2,
                 "ptrec: ex exists (use --force to replace it)")
    # --force still refuses a directory that is not a trace
    expect_error(["--emulate", "--force", "-o", "ex", "--", "true"], 2,
                 "does not look like a trace directory")
    check(open(os.path.join(d, "keep.txt")).read() == "precious", "existing file was touched")
    # nor one that holds a trace's names next to anything else (a user's directory that
    # happens to hold a pt/ or an info.json), nor the current directory by an empty name
    os.makedirs(os.path.join(d, "pt"))
    open(os.path.join(d, "info.json"), "w").write("{}")
    expect_error(["--emulate", "--force", "-o", "ex", "--", "true"], 2,
                 "does not look like a trace directory (it holds keep.txt)")
    check(open(os.path.join(d, "keep.txt")).read() == "precious", "existing file was touched")
    expect_error(["--emulate", "--force", "-o", "", "--", "true"], 2,
                 "ptrec: -o: the trace directory's name is empty")
    expect_error(["--emulate", "--force", "-o", ".", "--", "true"], 2,
                 "does not look like a trace directory")
    check(os.path.exists(os.path.join(d, "keep.txt")), "the current directory was touched")
    # a parent that does not exist is not made: a mistyped -o leaves nothing
    expect_error(["--emulate", "-o", "no/such/dir/t", "--", "true"], 2,
                 "ptrec: cannot create no/such/dir/t: %s/no/such/dir is not a directory "
                 "(create it first)" % os.path.realpath(TMP))
    check(not os.path.exists(os.path.join(TMP, "no")), "parents were created")
    # a plain file in the way
    open(os.path.join(TMP, "afile"), "w").close()
    expect_error(["--emulate", "-o", "afile", "--", "true"], 2, "exists and is not a directory")
    # an empty directory is fine to record into: reaches the qemu check
    os.makedirs(os.path.join(TMP, "empty"))
    expect_error(["--emulate", "--qemu", "/nonexistent", "-o", "empty", "--", "true"], 2,
                 "qemu-x86_64 not found")


def case_unknown_option():
    expect_error(["--bogus", "--", "true"], 2, "ptrec: unknown option '--bogus' (see ptrec --help)")
    expect_error(["-Z", "--", "true"], 2, "ptrec: unknown option '-Z'")
    expect_error(["--emulate", "-o"], 2, "ptrec: option '-o' needs a value")
    expect_error(["--filter", "sometimes", "--", "true"], 2, "bad --filter 'sometimes'")
    expect_error(["--psb-period", "0", "--", "true"], 2, "bad --psb-period '0'")
    expect_error(["--drain-rate", "x1", "--", "true"], 2, "bad --drain-rate 'x1'")
    expect_error(["--emulate", "--drain-rate", "64", "--", "true"], 2,
                 "--drain-rate needs --aux-size")
    expect_error(["--emulate", "--aux-size", "1M", "--", "true"], 2,
                 "--aux-size needs --drain-rate under --emulate")


def case_qemu_missing():
    p = expect_error(["--emulate", "--qemu", "/nonexistent", "-o", "q", "--", "true"], 2,
                     "qemu-x86_64 not found at /nonexistent")
    check("qemu-user" in p.stderr, "message does not name the Debian package qemu-user")
    check(not os.path.exists(os.path.join(TMP, "q")), "trace dir created despite the error")
    # not on PATH either
    p = expect_error(["--emulate", "-o", "q", "--", "/bin/true"], 2, "qemu-user",
                     env={"PATH": "/nonexistent-dir"})


def case_bad_aux_size():
    for bad in ["12Q", "0", "-1M", "4.5M", "", "1K"]:
        p = expect_error(["--emulate", "--aux-size", bad, "--", "true"], 2,
                         f"ptrec: bad --aux-size '{bad}'")
    p = run(["--help"])
    check(p.returncode == 0, "--help failed")


def case_help_version():
    p = run(["--help"])
    check(p.returncode == 0, "--help exit")
    for want in ["usage: ptrec", "Examples:", "--emulate", "--filter", "ptdecode info",
                 "bash -c 'java"]:
        check(want in p.stdout, f"--help lacks {want!r}")
    p = run(["--version"])
    check(p.returncode == 0 and re.match(r"^ptrec \d+\.\d+", p.stdout), "--version")


NO_PT = ("ptrec: this machine has no Intel PT (no /sys/bus/event_source/devices/intel_pt: not "
         "an Intel CPU with PT, or a virtual machine that does not expose it); use --emulate to "
         "record under emulation")


def case_no_pt_hardware():
    if os.path.exists("/sys/bus/event_source/devices/intel_pt/type"):
        print("this machine has Intel PT: the refusal is tested with JPT_SYSFS_ROOT (perf_sysfs)")
        return
    cmds = [["true"]]
    java = shutil.which("java")
    if java:
        cmds.append([java, "-version"])   # the java command of the issue: refused before it runs
    for cmd in cmds:
        p = run(["-o", "hw", "--"] + cmd)
        check(p.returncode == 2, "exit code without --emulate")
        check(p.stderr.strip() == NO_PT, "no-PT message")
        check(p.stdout == "", "the command ran")
        check(not os.path.exists(os.path.join(TMP, "hw")), "trace dir created")
    # a different sysfs root names its own path
    root = os.path.join(TMP, "nosys")
    os.makedirs(root)
    p = expect_error(["-o", "hw", "--", "true"], 2, f"no {root}/sys/bus/event_source/devices/"
                     "intel_pt", env={"JPT_SYSFS_ROOT": root})
    check("--emulate" in p.stderr, "no --emulate suggestion")


def sysfs_tree(name):
    return os.path.join(HERE, "..", "perf", "data", name)


def case_perf_sysfs():
    """The hardware backend's refusals, each one line naming the cause, the
    fix and --emulate, with sample sysfs trees (JPT_SYSFS_ROOT)."""
    for tree, msg in [
        ("hostile-garbage", "format/tsc: 'config:banana': expected a bit number"),
        ("hostile-range", "format/mtc_period: 'config:60-70': bit number beyond 63"),
        ("hostile-nopt", "format/pt: missing"),
        ("hostile-overlap", "overlap"),
        ("hostile-caps", "caps/psb_periods: 'zz'"),
    ]:
        p = expect_error(["-o", "hs", "--", "true"], 2, msg,
                         env={"JPT_SYSFS_ROOT": sysfs_tree(tree)})
        check("--emulate" in p.stderr, f"{tree}: no --emulate suggestion")
        check(not os.path.exists(os.path.join(TMP, "hs")), "trace dir created")
    # A complete Skylake description: everything parses, then the kernel
    # (which has no PMU of that type here) refuses the event: still one line.
    if not os.path.exists("/sys/bus/event_source/devices/intel_pt/type"):
        p = expect_error(["-o", "hs", "--", "true"], 2, "the kernel refused an intel_pt event "
                         "(PMU type 8, config 0x1002c01)", env={"JPT_SYSFS_ROOT": sysfs_tree("skylake")})
        check("--emulate" in p.stderr, "no --emulate suggestion")
    expect_error(["--aux-size", "3M", "-o", "hs", "--", "true"], 2, "not a power of two",
                 env={"JPT_SYSFS_ROOT": sysfs_tree("skylake")})
    expect_error(["--emulate", "--sideband-only", "--", "true"], 2,
                 "--sideband-only is for the hardware backend")
    check(not os.path.exists(os.path.join(TMP, "hs")), "trace dir created")


def case_command_problems():
    expect_error(["--emulate", "-o", "c1", "--", "no-such-command-xyz"], 127,
                 "ptrec: no-such-command-xyz: command not found")
    script = os.path.join(TMP, "run.sh")
    with open(script, "w") as f:
        f.write("#!/bin/sh\nexec java \"$@\"\n")
    os.chmod(script, 0o755)
    # A script is followed to its JVMs; only a command traced itself cannot be one.
    expect_error(fakes() + ["--filter", "all", "-o", "c2", "--", script], 2, "is a script")


def case_plugin_missing():
    qemu = fakes()[2]
    expect_error(["--emulate", "--qemu", qemu, "--plugin", "/nonexistent/libptemu.so", "-o", "p",
                  "--", "true"], 2, "/nonexistent/libptemu.so does not exist")
    expect_error(["--emulate", "--qemu", qemu, "-o", "p", "--", "true"], 2,
                 "JPT_PTEMU", env={"JPT_PTEMU": "/nonexistent/x.so"})
    check(not os.path.exists(os.path.join(TMP, "p")), "trace dir created")


def case_plugin_refused():
    p = expect_error(fakes() + ["-o", "r", "--", "true"], 2,
                     "qemu refused the plugin", env={"FAKE_PLUGIN_REFUSE": "1"})
    check("Could not load plugin" in p.stderr, "qemu's own message not reported")
    check(not os.path.exists(os.path.join(TMP, "r")), "trace dir created")


def case_plugin_refused_real():
    """The real qemu-x86_64 on a file that is no plugin: its message comes through."""
    if not shutil.which("qemu-x86_64"):
        print("SKIP: no qemu-x86_64")
        sys.exit(77)
    bogus = os.path.join(TMP, "libbogus.so")
    with open(bogus, "w") as f:
        f.write("not a plugin\n")
    p = expect_error(["--emulate", "--plugin", bogus, "-o", "rr", "--", "/bin/true"], 2,
                     f"ptrec: qemu refused the plugin {bogus}: ")
    check("Could not load plugin" in p.stderr, "qemu's own message not reported")
    check(not os.path.exists(os.path.join(TMP, "rr")), "trace dir created")


# recording cases (stand-ins) -----------------------------------------------------

def case_handshake():
    p = run(fakes() + ["-o", "h", "--"] +
            agent_cmd(CC, CC.replace("4242", "4243"), "jpt 1 codecache 0x2000 0x1000 pid 1"))
    check(p.returncode == 0, "exit status")
    replies = [l for l in p.stdout.splitlines() if l.startswith("reply: ")]
    check(replies == ["reply: ok", "reply: no only-one-jvm", "reply: no bad-handshake"],
          f"replies {replies}")
    # the JVM is told its directory on its command line, nothing through the environment
    check(f"jvm-option -agentpath:{fakes()[-1]}=out={os.path.join(TMP, 'h')}"
          in p.stdout.splitlines(), "agent option")
    check("env JPT_TRACE_DIR=" in p.stdout.splitlines(), "JPT_TRACE_DIR set")
    log = plugin_log("h")
    check("ctl filter 0x7f0000000000 0x7f0010000000" in log, f"plugin not told the filter: {log}")
    check(",filter=none," in log[0] and ",ctl=" in log[0] and ",psb_period=4096" in log[0],
          f"plugin args {log[0]}")
    check(f",out={os.path.join(TMP, 'h')}," in log[0], "plugin out=")
    check("second JVM (pid 4243)" in p.stderr, "no warning about the second JVM")
    check("bad handshake" in p.stderr, "no warning about the bad line")
    m = SUMMARY.search(p.stderr)
    check(m is not None, "no summary line")
    if m:
        check(m.group(1) == "1" and m.group(3) == "h", f"summary {m.group(0)}")
        check(abs(float(m.group(2)) - 33.3) < 0.05, "lost percentage (500 of 1500 bytes)")
    j = info("h")
    check(j["version"] == 1 and j["complete"] is True, "version/complete")
    check(j["backend"] == "emulated", "backend")
    check(j["command"] == agent_cmd(CC, CC.replace("4242", "4243"),
                                    "jpt 1 codecache 0x2000 0x1000 pid 1"), "command")
    check(j["exit"] == {"status": 0}, "exit")
    check(j["pt"]["filter"] == {"mode": "codecache",
                                "ranges": [[0x7f0000000000, 0x7f0010000000]]}, "filter")
    check(j["pt"]["tsc"] is True and j["pt"]["noretcomp"] is True and j["pt"]["mtc"] is False,
          "pt config")
    check({k: j["time"].get(k) for k in ("time_zero", "time_mult", "time_shift")} ==
          {"time_zero": 0, "time_mult": 1, "time_shift": 0}, "time conversion")
    check(j["time"].get("tsc_hz_source") == "measured" and 1e8 < j["time"].get("tsc_hz", 0) < 1e11,
          f"TSC frequency measured over the recording: {j['time']}")
    check(j["jvm"]["handshake"] == "ok" and j["jvm"]["pid"] == 4242, "jvm handshake")
    check(isinstance(j["cpu"]["family"], int), "cpu family")
    st = j["streams"]
    check(len(st) == 1 and re.match(r"^tid-\d+$", st[0]["name"]), f"streams {st}")
    check(st[0]["pt_bytes"] == 1000 and st[0]["lost_bytes"] == 500 and st[0]["truncated"] == 1,
          f"stream sizes {st}")
    check(j["totals"]["pt_bytes"] == 1000 and j["totals"]["lost_bytes"] == 500, "totals")
    for sub in ("pt", "sideband", "jvm"):
        check(os.path.isdir(os.path.join(TMP, "h", sub)), f"{sub}/ missing")


def case_handshake_hostile():
    bad = ["", "jpt 1 codecache 0x1000 0x2000 pid 1 \\x00", "x" * 300,
           "jpt 1 codecache 0x1000 0xffffffffffffffff pid 7"] + ["junk"] * 10
    p = run(fakes() + ["--filter", "all", "-o", "hh", "--"] + agent_cmd(*bad[:5]))
    check(p.returncode == 0, "exit status")
    replies = [l for l in p.stdout.splitlines() if l.startswith("reply: ")]
    check(replies == ["reply: no bad-handshake"] * 4 + ["reply: no bad-handshake"],
          f"replies {replies}")
    check(info("hh")["jvm"]["handshake"] == "none", "handshake state")
    # a peer that keeps sending garbage is cut off, and ptrec still finishes
    p = run(fakes() + ["--filter", "all", "-o", "hh2", "--", PY, "-c",
                       "import os,socket,time\n"
                       "s=socket.socket(fileno=int(os.environ['JPT_HANDSHAKE_FD']))\n"
                       "s.sendall(b'junk\\n'*100)\n"
                       "time.sleep(0.5)\n"
                       "print(len(s.recv(4096)))\n"])
    check(p.returncode == 0, "exit status after a flood")
    check("ignoring the handshake socket after 8 bad lines" in p.stderr, "flood not cut off")
    check(p.stdout.strip() == str(8 * len("no bad-handshake\n")), "replies to a flood")


def case_filter_all():
    p = run(fakes() + ["--filter", "all", "--psb-period", "8K", "--aux-size", "1M",
                       "--drain-rate", "64", "--keep-lossless", "--test-log", "-o", "fa", "--"]
            + agent_cmd(CC))
    check(p.returncode == 0, "exit status")
    check("reply: ok" in p.stdout, "agent not answered ok")
    log = plugin_log("fa")
    check(not any(l.startswith("ctl ") for l in log), "filter sent although --filter all")
    for want in [",filter=all,", ",psb_period=8192", ",aux_size=1048576", ",drain_rate=64",
                 ",keep_lossless=on", ",testlog=on"]:
        check(want in log[0], f"plugin args lack {want}: {log[0]}")
    j = info("fa")
    check(j["pt"]["filter"] == {"mode": "all", "ranges": []}, "filter")
    check(j["aux_size"] == 1048576 and j["drain_rate"] == 64 and j["pt"]["psb_period"] == 8192,
          "sizes in info.json")
    p = run(fakes() + ["--filter", "0x1000-0x2000", "-o", "fr", "--", "true"])
    check(",filter=0x1000-0x2000," in plugin_log("fr")[0], "range filter")
    check(info("fr")["pt"]["filter"] == {"mode": "range", "ranges": [[4096, 8192]]}, "range info")


def case_plugin_silent():
    t = time.time()
    p = run(fakes() + ["-o", "ps", "--"] + agent_cmd(CC), env={"FAKE_PLUGIN_REPLY": "silent"})
    silent = time.time() - t
    check("reply: no filter-failed" in p.stdout, "agent not told the filter failed")
    check("did not acknowledge the filter" in p.stderr, "no warning")
    check(info("ps")["jvm"]["handshake"] == "failed", "handshake state")
    check(info("ps")["pt"]["filter"]["ranges"] == [], "ranges recorded though not set")
    t = time.time()
    p = run(fakes() + ["-o", "pn", "--"] + agent_cmd(CC), env={"FAKE_PLUGIN_REPLY": "no busy"})
    # the same run with a plugin that answers at once is the baseline: on a
    # loaded machine starting the fakes alone can take seconds
    check(silent - (time.time() - t) < 5, "waited for the plugin longer than the agent does "
          "(5 s): %.1f s against %.1f s" % (silent, time.time() - t))
    check("reply: no filter-failed" in p.stdout, "agent not told the filter failed")
    check("the plugin refused the filter: no busy" in p.stderr, "plugin's refusal not reported")


def case_java_agent():
    agent = os.path.join(TMP, "lib dir", "libjpt.so")
    os.makedirs(os.path.dirname(agent))
    open(agent, "w").close()
    fa = os.path.join(HERE, "fake_agent.py")
    p = run(fakes() + ["--agent", agent, "-o", "j1", "--", FAKE_JAVA, PY, fa, CC],
            env={"JAVA_TOOL_OPTIONS": "-Xmx64m"})
    out = p.stdout.splitlines()
    opts = [l for l in out if l.startswith("jvm-option ")]
    check(opts == [f"jvm-option -agentpath:{agent}=out={os.path.join(TMP, 'j1')}",
                   "jvm-option -XX:+UnlockDiagnosticVMOptions",
                   "jvm-option -XX:+DebugNonSafepoints"], f"JVM options {opts}")
    check("env JAVA_TOOL_OPTIONS=-Xmx64m" in out, "JAVA_TOOL_OPTIONS changed")
    j = info("j1")
    check(j["jvm"]["java_launcher"] and j["jvm"]["agent_added"] and j["jvm"]["agent"] == agent,
          "jvm info")
    # the agent is already there: leave the command alone
    p = run(fakes() + ["--agent", agent, "-o", "j2", "--", FAKE_JAVA, "-agentpath:/x/libjpt.so",
                       PY, fa])
    opts = [l for l in p.stdout.splitlines() if l.startswith("jvm-option ")]
    check(opts == ["jvm-option -agentpath:/x/libjpt.so"], "options added although the "
          f"command line loads the agent: {opts}")
    p = run(fakes() + ["--agent", agent, "-o", "j3", "--", FAKE_JAVA, PY, fa],
            env={"JAVA_TOOL_OPTIONS": "-agentpath:/y/libjpt.so=out=/z"})
    out = p.stdout.splitlines()
    check("env JAVA_TOOL_OPTIONS=-agentpath:/y/libjpt.so=out=/z" in out and
          not any(l.startswith("jvm-option ") for l in out),
          "options changed although JAVA_TOOL_OPTIONS loads the agent")
    # a script named java (a version manager's shim) runs natively; the
    # launcher it execs is the one traced
    shim = os.path.join(TMP, "shims", "java")
    os.makedirs(os.path.dirname(shim))
    with open(shim, "w") as f:
        f.write(f'#!/bin/sh\nexec "{FAKE_JAVA}" "$@"\n')
    os.chmod(shim, 0o755)
    p = run(fakes() + ["--agent", agent, "-o", "j6", "--", shim, PY, fa, CC])
    out = p.stdout.splitlines()
    check(p.returncode == 0 and "reply: ok" in out and
          f"jvm-option -agentpath:{agent}=out={os.path.join(TMP, 'j6')}" in out,
          "the shim's launcher was not traced")
    check(not info("j6")["jvm"]["java_launcher"] and info("j6")["jvm"]["handshake"] == "ok",
          "j6 info")
    # no agent anywhere: one clear line
    expect_error(fakes()[:-2] + ["-o", "j4", "--", FAKE_JAVA, PY, fa], 2, "JPT_AGENT",
                 env={"JPT_AGENT": "/nonexistent/libjpt.so"})
    # a non-java command with the default filter is warned about
    p = run(fakes() + ["-o", "j5", "--", "true"])
    check("true started no java launcher: nothing was traced" in p.stderr,
          "no warning for a command that started no JVM")


def case_exit_status():
    p = run(fakes() + ["--filter", "all", "-o", "e1", "--"] + agent_cmd("--exit", "7"))
    check(p.returncode == 7, f"exit status {p.returncode}, wanted 7")
    check(info("e1")["exit"] == {"status": 7}, "exit in info.json")
    check(SUMMARY.search(p.stderr) is not None, "no summary line")
    p = run(["--quiet"] + fakes() + ["--filter", "all", "-o", "e2", "--", "true"])
    check(p.returncode == 0 and p.stderr == "", f"--quiet printed {p.stderr!r}")


def case_signals():
    e = dict(os.environ)
    e.pop("JAVA_TOOL_OPTIONS", None)
    args = [PTREC] + fakes() + ["--filter", "all", "-o", "s1", "--"] + agent_cmd("--sleep")
    for sig in (signal.SIGTERM, signal.SIGINT):
        shutil.rmtree(os.path.join(TMP, "s1"), ignore_errors=True)
        p = subprocess.Popen(args, cwd=TMP, env=e, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        line = p.stdout.readline()
        while line and line.strip() != "sleeping":
            line = p.stdout.readline()
        p.send_signal(sig)
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            check(False, f"signal {sig} was not forwarded")
            continue
        err = p.stderr.read()
        print(f"signal {sig}: exit {p.returncode}\n{err}")
        check(p.returncode == 128 + sig, f"exit {p.returncode}, wanted {128 + sig}")
        check(info("s1")["exit"] == {"signal": int(sig)}, "signal in info.json")
        check(SUMMARY.search(err) is not None, "no summary after a signal")


def case_killed():
    """ptrec killed by SIGKILL takes its child (qemu, where java runs) with
    it, and its trace says the recording did not finish."""
    e = dict(os.environ)
    e.pop("JAVA_TOOL_OPTIONS", None)
    args = [PTREC] + fakes() + ["--filter", "all", "-o", "k1", "--"] + agent_cmd("--sleep")
    p = subprocess.Popen(args, cwd=TMP, env=e, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    child = agent = None
    line = p.stdout.readline()
    while line and line.strip() != "sleeping":
        m = re.match(r"pid (\d+) ppid (\d+)", line)
        if m:
            agent, child = int(m.group(1)), int(m.group(2))
        line = p.stdout.readline()
    check(child is not None, "the fake agent reported its parent (the fake qemu)")
    p.kill()
    p.wait(timeout=20)
    gone = False
    for _ in range(100):
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            gone = True
            break
        time.sleep(0.1)
    check(gone, "the command under ptrec was still running 10 s after ptrec was killed")
    if agent:
        try:
            os.kill(agent, signal.SIGKILL)   # the stand-in's own child: not ptrec's
        except ProcessLookupError:
            pass
    check(info("k1")["complete"] is False, "info.json says the recording did not finish")


def case_idx_damaged():
    p = run(fakes() + ["--filter", "all", "-o", "i1", "--", "true"], env={"FAKE_IDX": "partial"})
    check(p.returncode == 0, "exit")
    check(re.search(r"warning: .*/i1/pt/tid-\d+\.idx: offset 96: partial record \(12 of 40 "
                    r"bytes\): the index was cut", p.stderr) is not None, "partial record warning")
    check(info("i1")["totals"]["lost_bytes"] == 500, "records before the damage kept")
    p = run(fakes() + ["--filter", "all", "-o", "i2", "--", "true"], env={"FAKE_IDX": "bad"})
    check(re.search(r"tid-\d+\.idx: offset 0: not a jpt AUX index \(bad magic\)", p.stderr) is not None, "bad magic")
    check(info("i2")["totals"]["lost_bytes"] == 0, "lost bytes from a bad index")


def case_force_replace():
    d = os.path.join(TMP, "old")
    os.makedirs(os.path.join(d, "pt"))
    open(os.path.join(d, "pt", "tid-1.pt"), "wb").write(b"x" * 10)
    open(os.path.join(d, "info.json"), "w").write("{}")
    expect_error(fakes() + ["--filter", "all", "-o", "old", "--", "true"], 2,
                 "ptrec: old exists (use --force to replace it)")
    p = run(fakes() + ["--filter", "all", "--force", "-o", "old", "--", "true"])
    check(p.returncode == 0, "exit")
    check(not os.path.exists(os.path.join(d, "pt", "tid-1.pt")), "old stream kept")
    check(info("old")["complete"] is True, "new info.json")
    # a symlink to a trace is replaced in place, the link kept
    os.makedirs(os.path.join(TMP, "real", "pt"))
    open(os.path.join(TMP, "real", "pt", "tid-2.pt"), "wb").write(b"y")
    os.symlink("real", os.path.join(TMP, "link"))
    p = run(fakes() + ["--filter", "all", "--force", "-o", "link", "--", "true"])
    check(p.returncode == 0, "exit")
    check(os.path.islink(os.path.join(TMP, "link")), "symlink replaced by a directory")
    check(not os.path.exists(os.path.join(TMP, "real", "pt", "tid-2.pt")), "old stream kept")
    check(os.path.isfile(os.path.join(TMP, "real", "info.json")), "no info.json behind the link")


def case_tree():
    """A script that starts two JVMs at once: each runs "under qemu" (the fake)
    with the agent's options, in a trace directory of its own, with its own
    handshake and plugin connection; the shell itself runs natively."""
    java = " ".join(f'"{a}"' for a in agent_cmd())
    cc2 = CC.replace("4242", "4243")
    script = (f'{java} "{CC}" & {java} "{cc2}"; wait; '
              'echo "sh-handshake=${JPT_HANDSHAKE_FD:-none} sh-preload=$LD_PRELOAD"; exit 3')
    p = run(fakes() + ["-o", "t", "--", "sh", "-c", script])
    agent = fakes()[-1]
    check(p.returncode == 3, f"exit status {p.returncode}, wanted the script's 3")
    out = p.stdout.splitlines()
    check(out.count("reply: ok") == 2, "both JVMs answered ok")
    check(out.count("env JAVA_TOOL_OPTIONS=") == 2, "JAVA_TOOL_OPTIONS set")
    t = os.path.join(TMP, "t")
    opts = sorted(l for l in out if l.startswith("jvm-option -agentpath:"))
    check(opts == [f"jvm-option -agentpath:{agent}=out={t}",
                   f"jvm-option -agentpath:{agent}=out={t}/java-2"], f"agent options {opts}")
    check(out.count("jvm-option -XX:+DebugNonSafepoints") == 2, "no -XX:+DebugNonSafepoints")
    sh = [l for l in out if l.startswith("sh-handshake=")]
    check(len(sh) == 1 and sh[0].startswith("sh-handshake=none sh-preload=")
          and sh[0].endswith("libjptexec.so"), f"the shell's environment {sh}")
    top, second = info("t"), info("t/java-2")
    check(top["complete"] and top["exit"] == {"status": 3}, "top info.json")
    check(top["jvm"]["handshake"] == "ok" and second["jvm"]["handshake"] == "ok", "handshakes")
    check(len(top["more_jvms"]) == 1 and top["more_jvms"][0]["dir"] == "java-2"
          and top["more_jvms"][0]["index"] == 2, f"more_jvms {top.get('more_jvms')}")
    check({top["jvm"]["pid"], second["jvm"]["pid"]} == {4242, 4243}, "JVM pids")
    check(top["more_jvms"][0]["pid"] == second["jvm"]["pid"], "more_jvms pid")
    check(second["complete"] and second["exit"] == {} and second["jvm"]["index"] == 2,
          "java-2/info.json")
    for d in ("t", "t/java-2"):
        check("ctl filter 0x7f0000000000 0x7f0010000000" in plugin_log(d), f"{d}: no filter")
        check(len(info(d)["streams"]) == 1 and info(d)["pt"]["filter"]["ranges"] ==
              [[0x7f0000000000, 0x7f0010000000]], f"{d}: streams or filter in info.json")
    check(re.search(r"^ptrec: JVM 2 \(pid 424[23]\): 1 thread, .* trace in t/java-2$",
                    p.stderr, re.M) is not None, "no summary line for JVM 2")
    # --force takes a trace with java-<n> directories for one
    p = run(fakes() + ["--force", "-o", "t", "--", "true"])
    check(p.returncode == 0 and not os.path.exists(os.path.join(t, "java-2")), "--force")


def case_tree_hardware():
    """The hardware backend (sideband only, any Linux) injects the agent the
    same way: the JVM runs natively with the agent's options first."""
    java = " ".join(f'"{a}"' for a in agent_cmd())
    agent = fakes()[-1]
    p = run(["--sideband-only", "--agent", agent, "-q", "-o", "th", "--", "sh", "-c",
             f'{java} "{CC}"; echo "sh-status=$?"'])
    if "perf_event_open" in p.stderr and p.returncode != 0:
        check(False, "perf_event_open refused: this test needs a software perf event")
        return
    out = p.stdout.splitlines()
    th = os.path.join(TMP, "th")
    check(p.returncode == 0 and "sh-status=0" in out, f"exit status {p.returncode}")
    check(f"jvm-option -agentpath:{agent}=out={th}" in out, "agent option")
    check("reply: ok" in out and info("th")["jvm"]["handshake"] == "ok", "handshake")
    check(info("th")["backend"] == "perf", "backend")


def case_tree_unreachable():
    """A java exec that cannot get a trace directory runs untraced, with one line
    on stderr, and the program goes on unharmed."""
    import socket
    import threading
    sock = os.path.join(TMP, "exec.sock")
    e = dict(os.environ, LD_PRELOAD=os.path.join(os.path.dirname(PTREC), "libjptexec.so"),
             JPT_EXEC_SOCK=sock, JPT_EXEC_AGENT="/x/libjpt.so")
    script = f'"{FAKE_JAVA}" "{PY}" -c "print(\'ran\')"; echo "status=$?"'

    def run_script():
        p = subprocess.run(["sh", "-c", script], env=e, capture_output=True, text=True,
                           timeout=60)
        print(f"-> {p.returncode}\n{p.stdout}{p.stderr}")
        check(p.stdout.splitlines() == ["ran", "status=0"], f"the program's output {p.stdout!r}")
        return p

    p = run_script()   # nobody listens
    check("cannot reach ptrec" in p.stderr and len(p.stderr.splitlines()) == 1,
          f"stderr {p.stderr!r}")
    # something listens and answers nonsense, then hangs up
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(sock)
    srv.listen(4)

    def answer():
        c, _ = srv.accept()
        c.recv(100)
        c.sendall(b"ok 1 relative/dir\n")
        c.close()

    threading.Thread(target=answer, daemon=True).start()
    p = run_script()
    check("ptrec gave" in p.stderr and "no trace directory" in p.stderr and
          len(p.stderr.splitlines()) == 1, f"stderr {p.stderr!r}")


def main():
    name = sys.argv[2]
    try:
        globals()["case_" + name]()
    finally:
        if not failures:
            shutil.rmtree(TMP, ignore_errors=True)
        else:
            print(f"kept {TMP}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
