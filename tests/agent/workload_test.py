#!/usr/bin/env python3
"""A real application with the agent loaded natively: the workload must run as
it does without the agent, and its metadata must validate and hold what a
decoder needs.

usage: workload_test.py LIBJPT PTDECODE JAVA WORKLOAD_SCRIPT
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def main():
    libjpt, ptdecode, java, script = (os.path.abspath(a) for a in sys.argv[1:5])
    if not os.path.isfile(script):
        fail(f"{script} not found (the shared workloads sit beside the repository)")
    tmp = tempfile.mkdtemp(prefix="jpt-wl-")
    try:
        trace = os.path.join(tmp, "wl.trace")
        env = dict(os.environ, JAVA=java, WL_QUIET="1",
                   JAVA_OPTS=f"-agentpath:{libjpt}=out={trace}")
        p = subprocess.run(["bash", script, os.path.join(tmp, "work")], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=600)
        if p.returncode != 0:
            print(p.stderr[-2000:])
            fail(f"the workload exited {p.returncode} with the agent")
        jpt = [l for l in p.stderr.splitlines() if l.startswith("jpt:")]
        if jpt:
            fail("agent warnings: " + repr(jpt[:5]))
        r = subprocess.run([ptdecode, "info", "--json", trace], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            fail("ptdecode info rejects the trace: " + r.stderr.strip())
        d = json.loads(r.stdout)
        c, k = d["compiled"], d["classes"]
        print(f"{os.path.basename(script)} on {d['jvm']['version']}: {k['captured']} classes "
              f"({k['from_retransform']} retransformed, {k['hidden']} hidden, {k['missing']} "
              f"missing), {c['loads']} compiled loads, {c['pc_records']} pc records "
              f"({c['pc_records_per_kb']:.1f}/KiB), {d['patches']['count']} patches, "
              f"{d['stubs']['count']} stubs, {d['threads']['started']} threads, "
              f"{d['bytes']['meta'] + d['bytes']['code']} bytes")
        checks = [
            (d["clean_end"], "the stream ends with END"),
            (d["interpreter"]["codelets"] > 200, "interpreter codelets recorded"),
            (k["captured"] > 500, "class files captured"),
            (k["unparsable"] == 0, "every class file parses"),
            (k["missing"] == 0, f"no class is missing (e.g. {k['missing_examples']})"),
            (c["loads"] > 100, "compiled methods recorded"),
            (c["by_level"]["unknown"] == 0, "every compilation level known"),
            (c["pc_records_per_kb"] > 5, "dense pc maps"),
            (d["agent_stats"].get("queue_records_dropped", 1) == 0, "no record dropped"),
            (not d["warnings"], f"no agent warning: {d['warnings'][:3]}"),
        ]
        for ok, what in checks:
            if not ok:
                fail(what)
        print("PASS")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
