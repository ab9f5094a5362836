#!/usr/bin/env python3
"""A real recording: ptrec --emulate on JDK 17 with the plugin and the agent
found next to ptrec (build tree layout).

usage: integration_test.py PTREC CLASSDIR MAINCLASS [PTREC OPTIONS...]
With --aux-size/--drain-rate among the options, the loss model must report loss.
Fails with the reason when JDK 17, qemu-x86_64, libptemu.so or libjpt.so is missing
(./setup.sh installs and builds all of them).
"""
import json
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

PTREC, CLASSES, MAIN = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2]), sys.argv[3]
EXTRA = sys.argv[4:]
LOSSY = "--drain-rate" in EXTRA
JAVA = "/usr/lib/jvm/java-17-openjdk-amd64/bin/java"
SUMMARY = re.compile(r"^ptrec: (\d+) threads?, ([0-9.]+) MB of PT, ([0-9.]+) MB lost "
                     r"\(([0-9.]+)%\), trace in (.+)$", re.M)


def missing(why):
    print("FAIL: " + why + " (run ./setup.sh)")
    sys.exit(1)


def main():
    here = os.path.dirname(PTREC)
    plugin = os.path.join(here, "ptemu", "libptemu.so")
    agent = os.path.join(here, "..", "jvm-agent", "libjpt.so")
    if not os.access(JAVA, os.X_OK):
        missing(f"no JDK 17 at {JAVA}")
    if not shutil.which("qemu-x86_64"):
        missing("no qemu-x86_64 (Debian package qemu-user)")
    for f in (plugin, agent):
        if not os.path.isfile(f):
            missing(f"{f} is not built")

    tmp = tempfile.mkdtemp(prefix="ptrec-it-")
    out = os.path.join(tmp, "hello.trace")
    env = dict(os.environ)
    for k in ("JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "_JAVA_OPTIONS", "JPT_AGENT", "JPT_PTEMU"):
        env.pop(k, None)
    cmd = [PTREC, "--emulate", "-o", out] + EXTRA + ["--", JAVA, "-cp", CLASSES, MAIN]
    print("$ " + " ".join(cmd), flush=True)
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=850)
    print(f"-> {p.returncode}\n--- stdout\n{p.stdout}--- stderr\n{p.stderr}")

    failures = []

    def check(cond, what):
        if not cond:
            failures.append(what)
            print("FAIL: " + what)

    check(p.returncode == 0, f"exit status {p.returncode}")
    check("Hello from jpt" in p.stdout, "the program's output is missing")
    m = SUMMARY.search(p.stderr)
    check(m is not None, "no summary line")
    try:
        with open(os.path.join(out, "info.json")) as f:
            info = json.load(f)
    except (OSError, ValueError) as e:
        info = None
        check(False, f"info.json: {e}")
    pts = [f for f in glob.glob(os.path.join(out, "pt", "tid-*.pt")) if os.path.getsize(f) > 0]
    check(len(pts) >= 1, "no non-empty pt/tid-*.pt")
    if info:
        print(json.dumps({k: info[k] for k in ("jvm", "pt", "totals")}, indent=1))
        check(info["complete"] is True and info["backend"] == "emulated", "info.json header")
        check(info["jvm"]["handshake"] == "ok", f"handshake {info['jvm']['handshake']}")
        check(len(info["pt"]["filter"]["ranges"]) == 1, "no code-cache filter recorded")
        check(info["totals"]["pt_bytes"] == sum(os.path.getsize(f) for f in
                                                glob.glob(os.path.join(out, "pt", "*.pt"))),
              "totals disagree with pt/")
    check(os.path.isfile(os.path.join(out, "jvm", "meta.jpt")), "no jvm/meta.jpt from the agent")
    # The plugin's own accounting (an evaluation file, when it writes one) must
    # agree with what ptrec read back from pt/*.pt and pt/*.idx.
    ev = os.path.join(out, "eval", "ptemu.json")
    if info and os.path.isfile(ev):
        with open(ev) as f:
            emu = json.load(f)
        mine = {s["name"]: (s["pt_bytes"], s["lost_bytes"]) for s in info["streams"]}
        theirs = {f"tid-{s['tid']}": (s["bytes"], s["lost_bytes"]) for s in emu.get("streams", [])}
        check(mine == theirs, f"streams disagree with the plugin's summary: {mine} vs {theirs}")
    if LOSSY and info and m:
        t = info["totals"]
        check(t["lost_bytes"] > 0 and t["truncated"] > 0, f"no loss recorded: {t}")
        check(t["lost_bytes"] == sum(s["lost_bytes"] for s in info["streams"]), "lost total")
        pct = 100.0 * t["lost_bytes"] / (t["lost_bytes"] + t["pt_bytes"])
        check(abs(float(m.group(4)) - pct) < 0.06, f"summary says {m.group(4)}%, info {pct:.2f}%")
        check(info["aux_size"] > 0 and info["drain_rate"] > 0, "buffer parameters not recorded")
    if failures:
        print(f"kept {tmp}")
        return 1
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
