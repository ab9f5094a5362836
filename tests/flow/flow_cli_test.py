#!/usr/bin/env python3
"""`ptdecode flow` and `ptdecode compare` on bad input: one line naming the problem, a clear
status, no crash.

usage: flow_cli_test.py PTDECODE WORKDIR"""
import os
import shutil
import subprocess
import sys


def main():
    ptdecode, work = sys.argv[1:3]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(os.path.join(work, 'short', 'jvm'))
    open(os.path.join(work, 'short', 'jvm', 'meta.jpt'), 'wb').close()
    os.makedirs(os.path.join(work, 'junk', 'jvm'))
    with open(os.path.join(work, 'junk', 'jvm', 'meta.jpt'), 'wb') as f:
        f.write(b'\x01' * 100)
    cases = [
        (['--thread', 'x', work], 2, "--thread wants a thread id, not 'x'"),
        (['--limit', '-1', work], 2, "--limit wants a count, not '-1'"),
        (['--bogus', work], 2, 'usage: ptdecode flow'),
        ([], 2, 'usage: ptdecode flow'),
        ([os.path.join(work, 'missing')], 1, 'missing: not a trace directory'),
        ([os.path.join(work, 'short')], 1, 'offset 0: not a jpt metadata file'),
        ([os.path.join(work, 'junk')], 1, 'offset 0: not a jpt metadata file'),
    ]
    failed = 0
    for args, status, text in cases:
        r = subprocess.run([ptdecode, 'flow', *args], capture_output=True, text=True, timeout=60)
        ok = r.returncode == status and text in r.stderr
        print('%s flow %s: status %d, %s' % ('ok  ' if ok else 'FAIL', ' '.join(args),
                                              r.returncode, r.stderr.strip().splitlines()[:1]))
        failed += not ok
    r = subprocess.run([ptdecode, 'flow', '--help'], capture_output=True, text=True, timeout=60)
    if r.returncode != 0 or 'example' not in r.stdout:
        print('FAIL flow --help')
        failed += 1
    missing = os.path.join(work, 'missing')
    compare_cases = [
        ([], 2, 'expected TRACED.DIR and REFERENCE.DIR'),
        ([missing], 2, 'expected TRACED.DIR and REFERENCE.DIR'),
        (['--worst', 'x', missing, missing], 2, "--worst: expected a count from 0 to 100000, got 'x'"),
        (['--class', '', missing, missing], 2, '--class: expected a class name'),
        (['--bogus', missing, missing], 2, "unknown or incomplete option '--bogus'"),
        ([missing, missing], 1, 'missing: not a trace directory'),
        ([os.path.join(work, 'junk'), os.path.join(work, 'short')], 1,
         'offset 0: not a jpt metadata file'),
    ]
    for args, status, text in compare_cases:
        r = subprocess.run([ptdecode, 'compare', *args], capture_output=True, text=True,
                           timeout=60)
        ok = r.returncode == status and text in r.stderr
        print('%s compare %s: status %d, %s' % ('ok  ' if ok else 'FAIL', ' '.join(args),
                                                 r.returncode, r.stderr.strip().splitlines()[:1]))
        failed += not ok
    r = subprocess.run([ptdecode, 'compare', '--help'], capture_output=True, text=True,
                       timeout=60)
    if r.returncode != 0 or 'example' not in r.stdout:
        print('FAIL compare --help')
        failed += 1
    shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
