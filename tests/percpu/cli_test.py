#!/usr/bin/env python3
"""ptrec --cpus on bad arguments: exit status 2 and one line saying what is wrong,
before anything is run or written.

usage: cli_test.py PTREC WORKDIR
"""
import os
import shutil
import subprocess
import sys


def main():
    ptrec, work = sys.argv[1:3]
    if os.path.exists(work):
        shutil.rmtree(work)
    os.makedirs(work)
    out = os.path.join(work, 'never.trace')
    cases = [
        (['--emulate', '--cpus', '0'], "bad --cpus '0'"),
        (['--emulate', '--cpus', 'two'], "bad --cpus 'two'"),
        (['--emulate', '--cpus', '257'], "bad --cpus '257'"),
        (['--cpus', '2'], '--cpus needs --emulate'),
        (['--emulate', '--cpus'], "option '--cpus' needs a value"),
    ]
    failed = 0
    for args, want in cases:
        cmd = [ptrec] + args + ['-o', out, '--', 'true']
        if args[-1] == '--cpus':
            cmd = [ptrec] + args
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        lines = r.stderr.strip().splitlines()
        if r.returncode != 2 or len(lines) != 1 or want not in lines[0]:
            print('FAIL: %s: status %d, stderr %r (expected 2 and %r)' %
                  (' '.join(args), r.returncode, r.stderr, want))
            failed += 1
        if os.path.exists(out):
            print('FAIL: %s wrote %s' % (' '.join(args), out))
            failed += 1
    h = subprocess.run([ptrec, '--help'], capture_output=True, text=True, timeout=60)
    if h.returncode != 0 or '--cpus N' not in h.stdout or '--emulate --cpus 2' not in h.stdout:
        print('FAIL: ptrec --help does not explain --cpus with an example')
        failed += 1
    print('FAIL' if failed else 'OK: %d bad uses refused' % len(cases))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
