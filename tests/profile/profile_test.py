#!/usr/bin/env python3
"""Integration tests of the profile commands on real JVMs in the agent's
reference mode.

usage: profile_test.py CASE LIBJPT PTDECODE JAVA SAMPLES_DIR

Compiles the samples with the javac next to JAVA, records CASE's sample with
-agentpath:libjpt.so=mode=reference, then checks, against counts computed
here from `ptdecode dump` (independently of profile/):
  - the CCT (cct-json) has one call per METHOD_ENTRY, per method and per
    thread, and (with -Xint) one bytecode per SINGLE_STEP;
  - folded stacks are well formed and sum to the calls (and are accepted by
    flamegraph.pl when it is installed);
  - the Chrome trace parses, has one B/E pair per call, nested per thread in
    file order with strictly increasing times;
  - `ptdecode hot` prints a top 10; hcct-json has no false negatives;
    `ptdecode context` decodes the ids it lists;
  - times are in s/ms/us with the TSC frequency of info.json (or --tsc-hz),
    in ticks (said so) without one, and a damaged info.json only warns;
  - --thread keeps one thread's calls, --include / --exclude PATTERN split
    the calls between the stacks with and without a matching frame, and
    --to / --from 40% the calls, bytecodes and time between the two parts of
    the run;
  - lcov covers the program's own classes by default, and genhtml renders it.
"""
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

CASES = {
    # name: (main class, args, extra JVM options)
    "hello": ("Hello", [], []),
    "branchy": ("Branchy", ["300"], ["-Xint"]),
    "threads": ("Threads", ["2"], []),
    "jit": ("Jit", ["20"], []),
    "signals": ("Signals", ["2000"], []),
}


class Fail(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Fail(what)
    print("ok:", what)


def run(cmd, **kw):
    kw.setdefault("timeout", 600)
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def ptd(ptdecode, *args):
    p = run([ptdecode] + list(args))
    if p.returncode != 0:
        raise Fail(f"ptdecode {' '.join(args)} failed ({p.returncode}): {p.stderr.strip()}")
    return p.stdout


def recount(ptdecode, trace):
    """Per-method and per-thread METHOD_ENTRY counts and SINGLE_STEP total,
    from the dump's text lines."""
    per_method = collections.Counter()
    per_tid = collections.Counter()
    steps = 0
    p = subprocess.Popen([ptdecode, "dump", trace, "--type", "METHOD_ENTRY,SINGLE_STEP"],
                         stdout=subprocess.PIPE, text=True)
    for line in p.stdout:
        if line.startswith("METHOD_ENTRY "):
            m = re.search(r" tid=(\d+) method=(\S+)", line)
            per_tid[int(m.group(1))] += 1
            per_method[m.group(2)] += 1
        elif line.startswith("SINGLE_STEP "):
            steps += 1
    if p.wait() != 0:
        raise Fail("ptdecode dump failed")
    return per_method, per_tid, steps


def check_cct(doc, per_method, per_tid, steps, xint):
    check(doc["format"] == "jpt-cct" and doc["version"] == 1, "cct-json format and version")
    nodes = doc["nodes"]
    n = len(nodes["parent"])
    check(all(len(nodes[k]) == n for k in
              ("method", "calls", "bytecodes", "self_bytecodes", "time", "self_time")),
          f"cct-json arrays all have {n} nodes")
    check(nodes["parent"][0] == -1 and all(0 <= nodes["parent"][i] < i for i in range(1, n)),
          "nodes are in preorder (parent[i] < i)")
    # Inclusive = self + children's inclusive.
    incl_b = list(nodes["self_bytecodes"])
    incl_t = list(nodes["self_time"])
    for i in range(n - 1, 0, -1):
        incl_b[nodes["parent"][i]] += incl_b[i]
        incl_t[nodes["parent"][i]] += incl_t[i]
    check(incl_b == nodes["bytecodes"] and incl_t == nodes["time"],
          "inclusive bytecodes and time are self plus children")
    methods = doc["methods"]
    calls = collections.Counter()
    for i in range(n):
        m = nodes["method"][i]
        if m >= 0:
            meth = methods[m]
            calls[meth["class"] + "." + meth["name"] + meth["sig"]] += nodes["calls"][i]
    check(sum(calls.values()) == sum(per_method.values()),
          f"CCT calls {sum(calls.values())} == METHOD_ENTRY records {sum(per_method.values())}")
    diff = {k: (calls.get(k), per_method.get(k)) for k in set(calls) | set(per_method)
            if calls.get(k, 0) != per_method.get(k, 0)}
    check(not diff, f"calls per method equal the recount ({len(per_method)} methods)"
          + ("" if not diff else f": {list(diff.items())[:5]}"))
    thread_calls = collections.Counter()
    labels = doc["labels"]
    check(labels.get("0") == "all threads", "node 0 is labelled 'all threads'")
    root_of = {}
    for i in range(1, n):
        if nodes["parent"][i] == 0:
            check(nodes["method"][i] == -1 and str(i) in labels, f"thread root {i} is labelled")
            tid = int(re.search(r"\(tid (\d+)\)", labels[str(i)]).group(1))
            root_of[i] = tid
    owner = [None] * n
    for i in range(1, n):
        owner[i] = root_of[i] if nodes["parent"][i] == 0 else owner[nodes["parent"][i]]
        thread_calls[owner[i]] += nodes["calls"][i]
    check(dict(thread_calls) == {t: c for t, c in per_tid.items()},
          f"calls per thread equal the recount ({len(per_tid)} threads)")
    if xint:
        check(nodes["bytecodes"][0] == steps and steps > 0,
              f"bytecodes {nodes['bytecodes'][0]} == SINGLE_STEP records {steps}")


def check_folded(path, total_calls):
    line_re = re.compile(r"^([^;\n]+(?:;[^;\n]+)*) ([1-9][0-9]*)$")
    total = 0
    lines = 0
    with open(path) as f:
        for line in f:
            m = line_re.match(line.rstrip("\n"))
            if not m or any(fr.strip() != fr or not fr for fr in m.group(1).split(";")):
                raise Fail(f"malformed folded line: {line!r}")
            total += int(m.group(2))
            lines += 1
    check(lines > 0 and total == total_calls,
          f"folded by calls: {lines} well-formed stacks summing to {total_calls} calls")
    fg = shutil.which("flamegraph.pl") or shutil.which("flamegraph")
    if fg:
        p = run([fg, path])
        check(p.returncode == 0 and "<svg" in p.stdout, f"{os.path.basename(fg)} accepts it")
    else:
        print("note: no flamegraph.pl installed; the folded format was validated strictly")


def check_chrome(path, total_calls):
    """B/E events per thread: in file order, each at a later time than the
    thread's previous event, every E closing the frame the B before it opened
    (same name), none left open: what Perfetto and speedscope need to nest
    frames as the flow did."""
    with open(path) as f:
        doc = json.load(f)
    events = [e for e in doc["traceEvents"] if e["ph"] in ("B", "E", "X")]
    check(all(e["ph"] != "X" for e in events), "chrome trace: duration events only (B/E)")
    begins = sum(1 for e in events if e["ph"] == "B")
    check(begins == total_calls, f"chrome trace: {begins} frames begun == {total_calls} calls")
    stacks, last = collections.defaultdict(list), {}
    for e in events:
        tid, ts = e["tid"], e["ts"]
        if tid in last and not ts > last[tid]:
            raise Fail(f"tid {tid}: event at {ts} us not after the thread's previous one ({last[tid]})")
        last[tid] = ts
        st = stacks[tid]
        if e["ph"] == "B":
            st.append(e["name"])
        elif not st or st.pop() != e["name"]:
            raise Fail(f"tid {tid}: end of {e['name']} at {ts} does not close the frame on top")
    open_frames = sum(len(st) for st in stacks.values())
    check(open_frames == 0, f"every frame closed, times strictly increasing in {len(stacks)} threads")


def check_time(ptdecode, trace, tmp):
    """Times in real units with the frequency info.json records, in ticks (said
    so) without one, and a damaged info.json costs only the units."""
    hot = ptd(ptdecode, "hot", trace, "-n", "3")
    check("time in TSC ticks: the trace records no TSC frequency" in hot and " ticks " in hot,
          "without a TSC frequency, hot's times are ticks and it says so")
    doc = json.loads(ptd(ptdecode, "export", trace, "--format", "cct-json", "-o", "-"))
    check("tsc_hz" not in doc, "cct-json has no tsc_hz without one")
    info = os.path.join(trace, "info.json")
    try:
        with open(info, "w") as f:
            json.dump({"backend": "perf", "time": {"time_mult": 1, "tsc_hz": 2000000000,
                                                   "tsc_hz_source": "perf_mmap_page"}}, f)
        hot = ptd(ptdecode, "hot", trace, "-n", "3")
        check("2.000 GHz, info.json (perf_mmap_page)" in hot and re.search(r" \d+\.\d{3} [mu]?s ", hot),
              "hot shows s/ms/us with the frequency of info.json")
        rows = json.loads(ptd(ptdecode, "hot", trace, "-n", "5", "--json"))
        check(all(abs(r["time_ns"] - r["time"] / 2) < 1e-6 * r["time"] + 1 and
                  abs(r["self_time_ns"] - r["self_time"] / 2) < 1e-6 * r["self_time"] + 1
                  for r in rows), "hot --json: time_ns is ticks / 2 GHz")
        rows = json.loads(ptd(ptdecode, "hot", trace, "-n", "5", "--json", "--tsc-hz", "1e9"))
        check(all(abs(r["time_ns"] - r["time"]) < 1e-6 * r["time"] + 1 for r in rows),
              "--tsc-hz overrides info.json")
        doc = json.loads(ptd(ptdecode, "export", trace, "--format", "cct-json", "-o", "-"))
        check(doc.get("tsc_hz") == 2000000000, "cct-json carries tsc_hz")
        ring = os.path.join(tmp, "ring.html")
        ptd(ptdecode, "export", trace, "--format", "ringchart", "-o", ring)
        with open(ring) as f:
            check('"tsc_hz":2000000000' in f.read(), "the ring chart's data carries tsc_hz")
        with open(info, "w") as f:
            f.write('{"time": {"tsc_hz": 12}}')
        p = run([ptdecode, "hot", trace, "-n", "3"])
        warn = [l for l in p.stderr.splitlines() if "info.json: offset 20:" in l]
        check(p.returncode == 0 and len(warn) == 1 and "times stay in TSC ticks" in warn[0] and
              " ticks " in p.stdout, "an implausible tsc_hz: one warning naming file and offset, ticks")
        with open(info, "w") as f:
            f.write('{"time": {"tsc_hz": 2e9')
        p = run([ptdecode, "hot", trace, "-n", "3"])
        check(p.returncode == 1 and "info.json: offset 23:" in p.stderr and not p.stdout,
              "malformed info.json: fatal (docs/FORMAT.md), one line naming file and offset")
    finally:
        os.unlink(info)


def check_focus(ptdecode, trace, tmp, per_tid):
    """--thread keeps a thread's events, --include / --exclude PATTERN the
    stacks with / without a matching frame: the two parts of a pattern add up
    to the whole, in either naming style."""
    def total(*args, by="calls"):
        rows = json.loads(ptd(ptdecode, "hot", trace, "-n", "100000", "--json", "--by", by, *args))
        return sum(r["calls" if by == "calls" else "self_bytecodes"] for r in rows), rows
    whole, _ = total()
    tid, calls = max(per_tid.items(), key=lambda kv: kv[1])
    one, _ = total("--thread", str(tid))
    check(one == calls, f"--thread {tid}: its {calls} calls only")
    p = run([ptdecode, "hot", trace, "--thread", "no-such-thread"])
    check(p.returncode == 0 and "no thread matches --thread 'no-such-thread'" in p.stderr,
          "--thread matching nothing says so")
    for pat, alt in (("java.lang.String*", "java/lang/String*"), ("java.util.*", "java/util/*")):
        inc, rows = total("--include", pat)
        exc, _ = total("--exclude", alt)
        check(inc + exc == whole and inc > 0 and exc > 0,
              f"--include {pat} ({inc} calls) and --exclude {alt} ({exc}) add up to {whole}")
    inc, rows = total("--include", "java.lang.String*", "--include", "java.util.*")
    check(inc >= max(total("--include", "java.lang.String*")[0], total("--include", "java.util.*")[0]),
          "two --include patterns: stacks with either")
    p = run([ptdecode, "hot", trace, "--include", "no.such.Class"])
    check(p.returncode == 0 and "no method matches 'no.such.Class'" in p.stderr,
          "a pattern matching nothing says so")
    for by, key in (("calls", "calls"), ("bytecodes", "self_bytecodes"), ("time", "self_time")):
        def part(*args):
            rows = json.loads(ptd(ptdecode, "hot", trace, "-n", "100000", "--json", "--by", by, *args))
            return sum(r[key] for r in rows)
        first, second, every = part("--to", "40%"), part("--from", "40%"), part()
        check(first + second == every and (first > 0 or every == 0),
              f"--to 40% and --from 40% split the {by}: {first} + {second} = {every}")
    p = run([ptdecode, "hot", trace, "--from", "1s"])
    check(p.returncode == 1 and "need the TSC frequency" in p.stderr,
          "--from in seconds without a TSC frequency says so")
    p = run([ptdecode, "export", trace, "--format", "chrome-trace", "--from", "10%", "-o", "-"])
    check(p.returncode == 2 and "do not apply to chrome-trace" in p.stderr,
          "--from is refused by the timeline exports")
    chrome = os.path.join(tmp, "one.json")
    ptd(ptdecode, "export", trace, "--format", "chrome-trace", "--thread", str(tid), "-o", chrome)
    with open(chrome) as f:
        tids = {e["tid"] for e in json.load(f)["traceEvents"] if e["ph"] in ("B", "E")}
    check(tids == {tid}, f"chrome-trace --thread {tid}: that thread's frames only")


JDK_PACKAGES = ("java/", "javax/", "jdk/", "sun/", "com/sun/", "org/ietf/jgss/", "org/w3c/dom/",
                "org/xml/sax/", "org/jcp/xml/")


def check_lcov_default(ptdecode, trace, tmp, samples, main_class):
    """lcov without --classes covers the program's own classes, and the
    genhtml of Debian's lcov renders it from the source root."""
    info = os.path.join(tmp, "default.info")
    ptd(ptdecode, "export", trace, "--format", "lcov", "-o", info)
    with open(info) as f:
        files = [l[3:].strip() for l in f if l.startswith("SF:")]
    check(f"{main_class}.java" in files and not any(f.startswith(JDK_PACKAGES) for f in files),
          f"lcov by default: the program's classes only ({', '.join(files)})")
    every = os.path.join(tmp, "all.info")
    ptd(ptdecode, "export", trace, "--format", "lcov", "--classes", "*", "-o", every)
    with open(every) as f:
        check(any(l.startswith("SF:java/lang/") for l in f), "lcov --classes '*': the JDK's too")
    if shutil.which("genhtml"):
        p = run(["genhtml", "--branch-coverage", "-o", os.path.join(tmp, "html"), info],
                cwd=samples)
        check(p.returncode == 0, "genhtml renders it from the source root, as documented")
    else:
        print("note: no genhtml (Debian package lcov): not rendered")


def main():
    case, libjpt, ptdecode, java, samples = sys.argv[1:6]
    main_class, args, jvm = CASES[case]
    tmp = tempfile.mkdtemp(prefix="jpt-profile-test-")
    try:
        classes = os.path.join(tmp, "classes")
        javac = os.path.join(os.path.dirname(java), "javac")
        srcs = [os.path.join(samples, f) for f in sorted(os.listdir(samples)) if f.endswith(".java")]
        p = run([javac, "-d", classes] + srcs)
        if p.returncode != 0:
            raise Fail("javac failed: " + p.stderr)
        trace = os.path.join(tmp, "t.trace")
        p = run([java, f"-agentpath:{libjpt}=mode=reference,out={trace}"] + jvm +
                ["-cp", classes, main_class] + args)
        if p.returncode != 0:
            raise Fail(f"java {main_class} failed: {p.stderr[-2000:]}")
        per_method, per_tid, steps = recount(ptdecode, trace)
        total = sum(per_method.values())
        check(total > 0, f"{total} METHOD_ENTRY records, {steps} SINGLE_STEP records")

        out = os.path.join(tmp, "cct.json")
        ptd(ptdecode, "export", trace, "--format", "cct-json", "--threads", "2", "-o", out)
        with open(out) as f:
            check_cct(json.load(f), per_method, per_tid, steps, "-Xint" in jvm)
        # The sequential builder gives the same document as the ParCCT pool.
        out1 = os.path.join(tmp, "cct1.json")
        ptd(ptdecode, "export", trace, "--format", "cct-json", "--threads", "1", "-o", out1)
        with open(out) as a, open(out1) as b:
            check(a.read() == b.read(), "parallel and sequential builders agree")

        folded = os.path.join(tmp, "calls.folded")
        ptd(ptdecode, "export", trace, "--format", "folded", "--by", "calls", "-o", folded)
        check_folded(folded, total)

        chrome = os.path.join(tmp, "trace.json")
        ptd(ptdecode, "export", trace, "--format", "chrome-trace", "-o", chrome)
        check_chrome(chrome, total)

        check_time(ptdecode, trace, tmp)
        check_focus(ptdecode, trace, tmp, per_tid)
        check_lcov_default(ptdecode, trace, tmp, samples, main_class)

        hot = ptd(ptdecode, "hot", trace, "-n", "10", "--by", "calls")
        print(hot, end="")
        rows = [l for l in hot.splitlines() if re.match(r"^\s+\d+ ", l)]
        check(len(rows) == min(10, len(per_method)), "hot prints a top 10")
        top = json.loads(ptd(ptdecode, "hot", trace, "-n", "1", "--by", "calls", "--json"))
        check(top[0]["calls"] == max(per_method.values()),
              f"the most called method has {max(per_method.values())} calls")

        hcct_path = os.path.join(tmp, "hcct.json")
        ptd(ptdecode, "export", trace, "--format", "hcct-json", "--phi", "0.01",
            "--epsilon", "0.001", "-o", hcct_path)
        with open(hcct_path) as f:
            hc = json.load(f)
        check(hc["stream_length"] == total and hc["accuracy"]["false_negatives"] == 0,
              f"hcct: {hc['accuracy']['reported_hot']} hot contexts, no false negatives, "
              f"{hc['accuracy']['hcct_nodes']} of {hc['accuracy']['cct_nodes']} nodes")

        listing = ptd(ptdecode, "context", trace, "--list", "-n", "3").splitlines()
        check(len(listing) == 3, "context --list prints 3 contexts")
        cid, leaf = listing[0].split(" ", 1)[0], listing[0].split(" ", 2)[2]
        stack = ptd(ptdecode, "context", trace, cid).splitlines()
        check(stack and stack[-1] == leaf, f"context {cid} decodes to a stack ending in {leaf}")
        print("PASS")
        return 0
    except Fail as e:
        print("FAIL:", e)
        return 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
