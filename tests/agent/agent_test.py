#!/usr/bin/env python3
"""Integration tests of the JVM agent (libjpt.so) with a real JVM.

usage: agent_test.py CASE LIBJPT PTDECODE JAVA SAMPLES_DIR

Compiles the samples with the javac next to JAVA into a temporary directory,
runs JAVA with -agentpath:LIBJPT=..., and checks the recorded trace.dir through
`PTDECODE dump DIR [--type T]`, whose lines read
"TYPE tsc=<n> key=value ... lastkey=<rest of line>". Cases:

  jit          C2 inline maps of Jit.hot name the inlined Jit.mix and Jit$Vec.dot
  sparse       -XX:-DebugNonSafepoints: one warning, sparse maps
  classes      class files (java/lang/String from the runtime image, Hello from the
               hook, both their files' sizes), one class file per non-hidden
               prepared class
  classes_patched  with --patch-module java.base: java/lang/String retransformed
  threads      every worker thread of Threads has a start (native tid) and an end
  reference    -Xint mode=reference: exact entry/exit/step counts of Hello.square
  unwritable   an unusable out dir: one error line, Hello still runs, exit 0
  handshake    JPT_HANDSHAKE_FD: code-cache line, "ok" reply, variable removed
  handshake_no the collector answers "no <reason>": one warning, the JVM goes on
  handshake_hostile  JPT_HANDSHAKE_FD naming stdout or a user's file: nothing written there
  help         =help prints the options and the JVM runs untraced

Prints what it checked; exits 0 on success, 1 with a reason otherwise. Set
JPT_KEEP=1 to keep the temporary directory.
"""
import os
import json
import re
import shutil
import socket
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


class Fail(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Fail(what)
    print("ok:", what)


def run(cmd, timeout=300, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    return p


class Ctx:
    def __init__(self, libjpt, ptdecode, java, samples):
        self.libjpt, self.ptdecode, self.java = libjpt, ptdecode, java
        self.samples = samples
        self.tmp = tempfile.mkdtemp(prefix="jpt-agent-test-")
        self.classes = os.path.join(self.tmp, "classes")
        os.mkdir(self.classes)
        javac = os.path.join(os.path.dirname(java), "javac")
        srcs = [os.path.join(samples, f) for f in sorted(os.listdir(samples)) if f.endswith(".java")]
        srcs.append(os.path.join(HERE, "EnvProbe.java"))
        p = run([javac, "-d", self.classes] + srcs)
        if p.returncode != 0:
            raise Fail("javac failed:\n" + p.stderr)

    def java_run(self, agent_opts, main, args=(), jvm=(), env=None, **kw):
        agent = "-agentpath:" + self.libjpt + ("=" + agent_opts if agent_opts else "")
        cmd = [self.java, agent] + list(jvm) + ["-cp", self.classes, main] + list(args)
        return run(cmd, env=env, **kw)

    def trace(self, name):
        return os.path.join(self.tmp, name)

    def dump(self, d, types=None):
        cmd = [self.ptdecode, "dump", d]
        if types:
            cmd += ["--type", types]
        p = run(cmd)
        if p.returncode != 0:
            raise Fail("ptdecode dump failed: " + p.stderr.strip())
        return [parse_line(l) for l in p.stdout.splitlines() if l.strip()]

    def cleanup(self):
        if os.environ.get("JPT_KEEP"):
            print("kept", self.tmp)
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)


LAST_KEYS = ("desc", "name", "method", "class", "text")


def parse_line(line):
    """'TYPE tsc=1 a=b c=d e f' -> ('TYPE', {'tsc': '1', 'a': 'b', 'c': 'd e f'})
    where the last field (one of LAST_KEYS) runs to the end of the line."""
    typ, _, rest = line.partition(" ")
    fields = {}
    while rest:
        m = re.match(r"(\w+)=", rest)
        if not m:
            break
        key = m.group(1)
        rest = rest[m.end():]
        if key in LAST_KEYS:
            fields[key] = rest
            break
        val, _, rest = rest.partition(" ")
        fields[key] = val
    return typ, fields


def jpt_lines(stderr):
    return [l for l in stderr.splitlines() if l.startswith("jpt:")]


def expect_clean_run(p, what):
    if p.returncode != 0:
        raise Fail(f"{what}: exit {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}")


def stream_end(ctx, d):
    recs = ctx.dump(d, "STATS,END")
    check(any(t == "END" for t, _ in recs), "the stream ends with END (clean shutdown)")
    stats = {}
    for t, f in recs:
        if t == "STATS":
            # STATS lines are all key=value pairs.
            stats = {k: v for k, v in f.items() if k != "tsc"}
    check(stats.get("queue_records_dropped") == "0", "no record was dropped")
    return stats


# ---- cases -----------------------------------------------------------------

def case_jit(ctx):
    d = ctx.trace("jit.trace")
    # -Xbatch: compile in the foreground, so C2 has compiled Jit.hot before
    # the program ends even on a loaded machine.
    p = ctx.java_run("out=" + d, "Jit", ["2000"],
                     jvm=["-Xbatch", "-XX:+UnlockDiagnosticVMOptions",
                          "-XX:+DebugNonSafepoints"])
    expect_clean_run(p, "java Jit")
    check(p.stdout.startswith("Jit "), "Jit ran to completion")
    check(not jpt_lines(p.stderr), "no agent warnings: " + repr(jpt_lines(p.stderr)))
    loads = [f for t, f in ctx.dump(d, "NMETHOD_LOAD") if t == "NMETHOD_LOAD"]
    hot = [f for f in loads if f.get("method") == "Jit.hot(I)J"]
    check(hot, f"Jit.hot was compiled ({len(hot)} loads of {len(loads)})")
    inl = [set(filter(None, re.split(r"[,|]", f.get("inlined", "")))) for f in hot]
    check(any("Jit.mix(II)I" in s for s in inl),
          "an inline map of Jit.hot names Jit.mix: " + repr(inl))
    check(any("Jit$Vec.dot(LJit$Vec;)D" in s for s in inl),
          "an inline map of Jit.hot names Jit$Vec.dot")
    c2 = [f for f, s in zip(hot, inl) if f.get("level") == "4"]
    check(c2 and all("Jit$Vec.dot(LJit$Vec;)D" in s and "Jit.mix(II)I" in s
                     for f, s in zip(hot, inl) if f.get("level") == "4"),
          f"{len(c2)} C2 (level 4) loads of Jit.hot, each inlining Jit.mix and Jit$Vec.dot")
    unknown = [f for f in loads if f.get("level") == "-1"]
    check(not unknown, f"the compilation level of all {len(loads)} loads is known")
    # The same through `ptdecode info --json`, which also validates the whole stream.
    r = subprocess.run([ctx.ptdecode, "info", "--json", d], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    check(r.returncode == 0, "ptdecode info accepts the trace: " + r.stderr.strip())
    comp = json.loads(r.stdout)["compiled"]
    c2_json = [m for m in comp["methods"] if m["method"] == "Jit.hot(I)J" and m["level"] == 4]
    check(c2_json and all({"Jit.mix(II)I", "Jit$Vec.dot(LJit$Vec;)D"} <= set(m["inlined"])
                          for m in c2_json),
          "info --json lists the C2 loads of Jit.hot with their inlined callees")
    check(comp["pc_records_per_kb"] > 0, "info --json reports the pc-record density: %s per KiB"
          % comp["pc_records_per_kb"])
    print(f"info --json: {comp['loads']} loads, {comp['pc_records']} pc records, "
          f"{comp['pc_records_per_kb']} per KiB, Jit.hot C2 inlines {c2_json[0]['inlined']}")
    dense = max(int(f["npcs"]) for f in hot)
    check(dense >= 15, f"the densest Jit.hot map has {dense} pc records (>= 15)")
    stats = stream_end(ctx, d)
    check(stats.get("debug_non_safepoints") == "1", "DebugNonSafepoints seen as on")
    check(int(stats.get("nmethod_pcs_per_kib", "0")) > 0, "pc density reported: " +
          stats.get("nmethod_pcs_per_kib", "?") + " per KiB")
    # Every method an inline map names has a METHOD record.
    meths = {f["id"] for t, f in ctx.dump(d, "METHOD") if t == "METHOD"}
    check(len(meths) > 1000, f"{len(meths)} METHOD records")
    # Code patches lie inside the code cache.
    cc = [f for t, f in ctx.dump(d, "CODE_CACHE") if t == "CODE_CACHE"]
    patches = [f for t, f in ctx.dump(d, "CODE_PATCH") if t == "CODE_PATCH"]
    if cc:
        lo, hi = int(cc[0]["low"], 16), int(cc[0]["high"], 16)
        bad = [f for f in patches
               if not (lo <= int(f["vaddr"], 16) and int(f["vaddr"], 16) + int(f["size"]) <= hi)]
        check(not bad, f"{len(patches)} code patches, all inside the code cache")


def case_sparse(ctx):
    """-XX:-DebugNonSafepoints: the agent warns, and C2's maps of Jit.hot hold
    only its few safepoints."""
    d = ctx.trace("sparse.trace")
    p = ctx.java_run("out=" + d, "Jit", ["2000"],
                     jvm=["-Xbatch", "-XX:+UnlockDiagnosticVMOptions",
                          "-XX:-DebugNonSafepoints"])
    expect_clean_run(p, "java Jit")
    warn = [l for l in jpt_lines(p.stderr) if "DebugNonSafepoints" in l]
    check(len(warn) == 1, "one warning names DebugNonSafepoints: " + repr(warn))
    loads = [f for t, f in ctx.dump(d, "NMETHOD_LOAD") if t == "NMETHOD_LOAD"]
    c2 = [int(f["npcs"]) for f in loads if f.get("method") == "Jit.hot(I)J" and
          f.get("level") == "4"]
    check(c2 and max(c2) < 15, f"C2 maps of Jit.hot are sparse: {c2} pc records")
    stats = stream_end(ctx, d)
    check(stats.get("debug_non_safepoints") == "0", "DebugNonSafepoints seen as off")
    recs = ctx.dump(d, "WARNING")
    check(any("DebugNonSafepoints" in f.get("text", "") for t, f in recs),
          "the warning is also in the stream")


def case_classes(ctx):
    d = ctx.trace("classes.trace")
    p = ctx.java_run("out=" + d, "Hello")
    expect_clean_run(p, "java Hello")
    check("Hello from jpt" in p.stdout, "Hello ran")
    files = [f for t, f in ctx.dump(d, "CLASS_FILE") if t == "CLASS_FILE"]
    by_class = {}
    for f in files:
        by_class.setdefault(f.get("class"), []).append(f)
    s = by_class.get("java/lang/String", [])
    check(s and s[0]["magic"] == "0xcafebabe", "java/lang/String captured, starts 0xCAFEBABE")
    check(s[0]["origin"] == "image", "java/lang/String came from the runtime image")
    jimage = os.path.join(os.path.dirname(ctx.java), "jimage")
    if os.path.exists(jimage):
        out = os.path.join(ctx.tmp, "image")
        r = run([jimage, "extract", "--dir", out, "--include", "regex:.*/java/lang/String.class",
                 os.path.join(os.path.dirname(os.path.dirname(ctx.java)), "lib", "modules")])
        size = os.path.getsize(os.path.join(out, "java.base", "java", "lang", "String.class"))
        check(r.returncode == 0 and int(s[0]["bytes"]) == size,
              f"java/lang/String's bytes are the image's class file ({size} bytes)")
    else:
        print(f"no {jimage}: java/lang/String's size not compared with the image's")
    h = by_class.get("Hello", [])
    size = os.path.getsize(os.path.join(ctx.classes, "Hello.class"))
    check(h and h[0]["origin"] == "hook" and h[0]["magic"] == "0xcafebabe",
          "Hello captured by the load hook")
    check(int(h[0]["bytes"]) == size, f"Hello's bytes are the class file ({size} bytes)")
    mism = [f for f in files if f.get("this") != f.get("class")]
    check(not mism, "every CLASS_FILE's this_class matches its recorded class: " +
          repr(mism[:3]))
    have = {f["id"] for f in files}
    # The latest CLASS_PREPARE of a class counts (a class whose rebuild
    # failed is re-recorded as hidden, with its bytecode).
    prep = list({f["id"]: f for t, f in ctx.dump(d, "CLASS_PREPARE")
                 if t == "CLASS_PREPARE"}.values())
    missing = [f["class"] for f in prep if f["hidden"] == "0" and f["id"] not in have]
    check(not missing, f"{len(prep)} prepared classes, each non-hidden one has a class file "
          + repr(missing[:5]))
    hidden = [f for f in prep if f["hidden"] == "1"]
    bc = {f["method"] for t, f in ctx.dump(d, "METHOD_BYTECODE") if t == "METHOD_BYTECODE"}
    check(not hidden or bc, f"{len(hidden)} hidden classes with {len(bc)} method bytecodes")
    # The classes the VM initialized before the agent's start (java/lang/String
    # among them), whose initializers cannot run later.
    inited = [f for t, f in ctx.dump(d, "CLASSES_INITIALIZED") if t == "CLASSES_INITIALIZED"]
    check(len(inited) == 1 and int(inited[0]["classes"]) > 100,
          "one CLASSES_INITIALIZED record, of more than 100 classes: " + repr(inited))
    stream_end(ctx, d)


def case_classes_patched(ctx):
    # A patched java.base is not the image: its classes are rebuilt instead.
    d = ctx.trace("patched.trace")
    empty = os.path.join(ctx.tmp, "patch-empty")
    os.makedirs(empty, exist_ok=True)
    p = ctx.java_run("out=" + d, "Hello", jvm=["--patch-module", "java.base=" + empty])
    expect_clean_run(p, "java --patch-module java.base=... Hello")
    files = [f for t, f in ctx.dump(d, "CLASS_FILE") if t == "CLASS_FILE"]
    s = [f for f in files if f.get("class") == "java/lang/String"]
    check(s and s[0]["origin"] == "retransform" and s[0]["magic"] == "0xcafebabe",
          "java/lang/String rebuilt by retransformation")
    check(not [f for f in files if f["origin"] == "image"], "no class file from the image")
    stream_end(ctx, d)


def case_threads(ctx):
    d = ctx.trace("threads.trace")
    p = ctx.java_run("out=" + d, "Threads", ["4"])
    expect_clean_run(p, "java Threads")
    recs = ctx.dump(d, "THREAD_START,THREAD_END")
    starts = {f["name"]: f for t, f in recs if t == "THREAD_START"}
    ends = {f["java_tid"]: f for t, f in recs if t == "THREAD_END"}
    workers = [n for n in starts if n.startswith("worker-")]
    check(len(workers) == 24, f"24 worker threads recorded ({len(workers)})")
    check(all(int(starts[w]["tid"]) > 0 for w in workers), "each with its native tid")
    check(all(starts[w]["java_tid"] in ends and
              ends[starts[w]["java_tid"]]["tid"] == starts[w]["tid"] for w in workers),
          "each worker's THREAD_END has the same java and native tid")
    check(int(starts.get("main", {}).get("tid", "0")) > 0, "main is recorded with its native tid")
    # Threads started before the agent's VMInit get their tid from HotSpot.
    early = [starts.get(n, {}).get("tid", "0") for n in ("Reference Handler", "Signal Dispatcher")]
    check(all(int(t) > 0 for t in early) and len({*early, starts["main"]["tid"]}) == 3,
          "threads alive at VMInit have their own native tids: " + repr(early))
    jtids = [f["java_tid"] for t, f in recs if t == "THREAD_START"]
    check(len(jtids) == len(set(jtids)), f"no thread recorded twice ({len(jtids)} starts)")
    stream_end(ctx, d)


def case_reference(ctx):
    d = ctx.trace("reference.trace")
    p = ctx.java_run("out=" + d + ",mode=reference", "Hello", jvm=["-Xint"], timeout=600)
    expect_clean_run(p, "java -Xint Hello (reference mode)")
    check(any("reference mode" in l for l in jpt_lines(p.stderr)),
          "the slowness of reference mode is announced")
    recs = ctx.dump(d, "METHOD_ENTRY,METHOD_EXIT,SINGLE_STEP")
    sq = "Hello.square(I)I"
    entries = sum(1 for t, f in recs if t == "METHOD_ENTRY" and f["method"] == sq)
    exits = sum(1 for t, f in recs if t == "METHOD_EXIT" and f["method"] == sq)
    steps = [int(f["bci"]) for t, f in recs if t == "SINGLE_STEP" and f["method"] == sq]
    check(entries == 100, f"Hello.square entered 100 times ({entries})")
    check(exits == 100, f"Hello.square exited 100 times ({exits})")
    # iload_0 iload_0 imul ireturn: bcis 0..3, once per call.
    check(len(steps) == 400 and sorted(set(steps)) == [0, 1, 2, 3],
          f"400 single steps at bci 0-3 of Hello.square ({len(steps)})")
    stream_end(ctx, d)


def case_unwritable(ctx):
    blocker = os.path.join(ctx.tmp, "a-file")
    with open(blocker, "w") as f:
        f.write("not a directory\n")
    p = ctx.java_run("out=" + os.path.join(blocker, "trace"), "Hello")
    check(p.returncode == 0, f"the JVM exits 0 ({p.returncode})")
    check("Hello from jpt" in p.stdout, "Hello ran to completion")
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    check(len(lines) == 1 and lines[0].startswith("jpt: error:"),
          "exactly one error line: " + repr(lines))


def case_handshake(ctx):
    handshake(ctx, b"ok\n")


def case_handshake_no(ctx):
    handshake(ctx, b"no intel_pt PMU missing\n")


def handshake(ctx, reply):
    accept = reply == b"ok\n"
    d = ctx.trace("handshake.trace")
    ours, theirs = socket.socketpair()
    env = dict(os.environ, JPT_HANDSHAKE_FD=str(theirs.fileno()), JPT_TRACE_DIR=d)
    agent = "-agentpath:" + ctx.libjpt
    proc = subprocess.Popen([ctx.java, agent, "-cp", ctx.classes, "EnvProbe"], env=env,
                            pass_fds=[theirs.fileno()], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    theirs.close()
    ours.settimeout(60)
    line = b""
    while not line.endswith(b"\n"):
        chunk = ours.recv(256)
        if not chunk:
            break
        line += chunk
    m = re.fullmatch(rb"jpt 1 codecache 0x([0-9a-f]+) 0x([0-9a-f]+) pid (\d+)\n", line)
    check(m is not None, "handshake line: " + repr(line))
    lo, hi, pid = int(m.group(1), 16), int(m.group(2), 16), int(m.group(3))
    check(0 < lo < hi, f"code cache [0x{lo:x}, 0x{hi:x})")
    check(pid == proc.pid, "pid is the JVM's")
    ours.sendall(reply)
    out, err = proc.communicate(timeout=120)
    ours.close()
    check(proc.returncode == 0, f"the JVM exits 0 ({proc.returncode}): {err}")
    lines = jpt_lines(err)
    if accept:
        check(not lines, "no agent warnings: " + repr(lines))
    else:
        check(len(lines) == 1 and "intel_pt PMU missing" in lines[0],
              "one warning gives the collector's reason: " + repr(lines))
    check(out.strip() == "JPT_HANDSHAKE_FD=null", "the variable is gone for Java code: " + out)
    check(os.path.isfile(os.path.join(d, "jvm", "meta.jpt")), "JPT_TRACE_DIR used as out dir")
    cc = [f for t, f in ctx.dump(d, "CODE_CACHE") if t == "CODE_CACHE"]
    check(cc and int(cc[0]["low"], 16) == lo and int(cc[0]["high"], 16) == hi,
          "the CODE_CACHE record agrees with the handshake")
    stats = stream_end(ctx, d)
    check(stats.get("handshake") == ("1" if accept else "2"),
          "handshake recorded as " + ("accepted" if accept else "declined"))


def case_handshake_hostile(ctx):
    # JPT_HANDSHAKE_FD left in the environment or set by hand names no socket of a
    # collector: the program's stdout, a file of the user's. The agent writes to neither.
    out = os.path.join(ctx.tmp, "out.txt")
    with open(out, "w") as f:
        p = subprocess.run([ctx.java, "-agentpath:%s=out=%s" % (ctx.libjpt, ctx.trace("h1")),
                            "-cp", ctx.classes, "Hello"], env=dict(os.environ, JPT_HANDSHAKE_FD="1"),
                           stdout=f, stderr=subprocess.PIPE, text=True, timeout=120)
    got = open(out).read()
    check(p.returncode == 0, f"the JVM exits 0 ({p.returncode})")
    check("Hello from jpt" in got and "codecache" not in got,
          "the program's output is its own: " + repr(got[:200]))
    check("is not the collector's socket" in p.stderr, "one warning says why: " + p.stderr)
    log = os.path.join(ctx.tmp, "user.log")
    with open(log, "w") as f:
        f.write("the user's\n")
    fd = os.open(log, os.O_WRONLY | os.O_APPEND)
    try:
        p = subprocess.run([ctx.java, "-agentpath:%s=out=%s" % (ctx.libjpt, ctx.trace("h2")),
                            "-cp", ctx.classes, "Hello"],
                           env=dict(os.environ, JPT_HANDSHAKE_FD=str(fd)), pass_fds=[fd],
                           capture_output=True, text=True, timeout=120)
    finally:
        os.close(fd)
    check(p.returncode == 0 and "Hello from jpt" in p.stdout, "Hello runs")
    check(open(log).read() == "the user's\n", "the user's file is untouched")


def case_help(ctx):
    cwd = os.path.join(ctx.tmp, "cwd")
    os.mkdir(cwd)
    p = ctx.java_run("help", "Hello", cwd=cwd)
    check(p.returncode == 0 and "Hello from jpt" in p.stdout, "Hello runs")
    check("out=DIR" in p.stderr and "JPT_TRACE_DIR" in p.stderr, "options are printed")
    check(os.listdir(cwd) == [], "nothing is written")
    # A bad value is named; the JVM then runs untraced, as for any agent failure.
    for bad in ("close_ms=abc", "patch_ms=-5", "budget_mb=", "close_ms=99999999999"):
        p = ctx.java_run(bad, "Hello", cwd=cwd)
        check(p.returncode == 0 and "Hello from jpt" in p.stdout
              and f"agent option '{bad}' wants a whole number" in p.stderr,
              f"{bad} is refused with a message naming it")
    for bad, why in (("out=", "agent option 'out' wants a directory"),
                     ("mode=fast", "agent option 'mode' wants trace or reference, not 'fast'")):
        p = ctx.java_run(bad, "Hello", cwd=cwd)
        check(p.returncode == 0 and "Hello from jpt" in p.stdout and why in p.stderr,
              f"{bad} is refused with a message naming the option")
    check(os.listdir(cwd) == [], "nothing is written for refused options")


CASES = {
    "jit": case_jit, "sparse": case_sparse, "classes": case_classes,
    "classes_patched": case_classes_patched, "threads": case_threads,
    "reference": case_reference, "unwritable": case_unwritable,
    "handshake": case_handshake, "handshake_no": case_handshake_no,
    "handshake_hostile": case_handshake_hostile, "help": case_help,
}


def main():
    if len(sys.argv) != 6 or sys.argv[1] not in CASES:
        print(__doc__, file=sys.stderr)
        return 2
    case, libjpt, ptdecode, java, samples = sys.argv[1:]
    ctx = None
    try:
        ctx = Ctx(os.path.abspath(libjpt), os.path.abspath(ptdecode), java, samples)
        CASES[case](ctx)
    except Fail as e:
        print("FAIL:", e)
        return 1
    except subprocess.TimeoutExpired as e:
        print("FAIL: timeout:", e)
        return 1
    finally:
        if ctx:
            ctx.cleanup()
    print("PASS", case)
    return 0


if __name__ == "__main__":
    sys.exit(main())
