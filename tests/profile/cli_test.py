#!/usr/bin/env python3
"""The summary and the newer profile options on bad input: one clear line on standard error,
the documented exit status, no output file left behind, never a crash.

usage: cli_test.py PTDECODE WORKDIR
"""
import os
import shutil
import subprocess
import sys


def main():
    ptdecode, work = sys.argv[1:3]
    if os.path.exists(work):
        shutil.rmtree(work)
    empty = os.path.join(work, 'empty.trace')
    os.makedirs(empty)
    afile = os.path.join(work, 'file.trace')
    with open(afile, 'w') as f:
        f.write('not a trace\n')
    damaged = os.path.join(work, 'damaged.trace')
    os.makedirs(os.path.join(damaged, 'jvm'))
    with open(os.path.join(damaged, 'jvm', 'meta.jpt'), 'wb') as f:
        f.write(b'JPTM' + bytes(range(256)) * 4)
    out = os.path.join(work, 'out.info')
    # (arguments, expected status, text the one error line must contain)
    cases = [
        ([empty], 1, empty),
        ([afile], 2, 'unknown command'),
        ([damaged], 1, damaged),
        (['summary', empty, '-n', '0'], 2, '-n'),
        (['summary'], 2, 'TRACE.DIR'),
        (['export', empty, '--format', 'lcov', '-o', out], 1, empty),
        (['export', damaged, '--format', 'lcov', '-o', out], 1, damaged),
        (['export', empty, '--format', 'lcovx', '-o', out], 2, 'lcov'),
        (['export', empty, '--format', 'hcct-json', '--phi', 'abc', '-o', out], 2,
         "--phi: expected a positive number, got 'abc'"),
        (['export', empty, '--format', 'chrome-trace', '--tsc-hz=-3', '-o', out], 2,
         "--tsc-hz: expected a positive number, got '-3'"),
        (['context', empty, 'abc'], 2, "'abc'"),
        (['context', empty, '1', '-5'], 2, '-5'),
        (['flow', empty, '--context-ids'], 1, empty),
        (['flow', damaged, '--context-ids', '--json'], 1, damaged),
        (['diff', empty], 2, 'two trace directories'),
        (['diff', empty, damaged], 1, empty),
        (['diff', damaged, damaged, '-o', out], 1, damaged),
    ]
    failed = 0
    for args, status, text in cases:
        p = subprocess.run([ptdecode] + args, capture_output=True, text=True, timeout=60)
        errs = [l for l in p.stderr.splitlines()
                if l.startswith('ptdecode: ') and not l.startswith('ptdecode: warning')]
        problems = []
        if p.returncode != status:
            problems.append('status %d, expected %d' % (p.returncode, status))
        if p.returncode < 0 or 'Traceback' in p.stderr:
            problems.append('crashed')
        if not errs or not any(text in l for l in errs):
            problems.append('no error line naming %r' % text)
        if os.path.exists(out):
            problems.append('left %s behind' % out)
            os.unlink(out)
        print('%s: ptdecode %s -> %d %s' % ('FAIL' if problems else 'ok', ' '.join(args),
                                            p.returncode, '; '.join(problems)))
        if problems:
            print('  stderr: ' + p.stderr.strip().replace('\n', '\n          '))
            failed += 1
    # --help of every profile command teaches with an example
    for cmd in (['hot'], ['export'], ['context'], ['summary'], ['flow'], ['diff']):
        p = subprocess.run([ptdecode] + cmd + ['--help'], capture_output=True, text=True,
                           timeout=60)
        good = p.returncode == 0 and 'example' in p.stdout and 'ptdecode' in p.stdout
        print('%s: ptdecode %s --help has an example' % ('ok' if good else 'FAIL', cmd[0]))
        failed += not good
    if failed:
        print('FAIL: %d cases' % failed)
        return 1
    shutil.rmtree(work)
    print('PASS')
    return 0


if __name__ == '__main__':
    sys.exit(main())
