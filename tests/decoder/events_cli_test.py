#!/usr/bin/env python3
"""`ptdecode events` on bad and odd input: one clear line, the right exit
status, never a crash.

usage: events_cli_test.py PTDECODE MKMETA WORKDIR
"""
import os
import shutil
import struct
import subprocess
import sys


def run(args):
    p = subprocess.run(args, capture_output=True, text=True, timeout=120)
    if p.returncode < 0:
        print('FAIL: %s died with signal %d' % (args, -p.returncode))
        sys.exit(1)
    return p


def expect(cond, what, p):
    if not cond:
        print('FAIL: %s\nstatus %d\nstdout:\n%s\nstderr:\n%s' % (what, p.returncode, p.stdout,
                                                                 p.stderr))
        sys.exit(1)


def main():
    ptdecode, mkmeta, work = sys.argv[1:4]
    if os.path.exists(work):
        shutil.rmtree(work)
    os.makedirs(work)

    p = run([ptdecode, 'events', os.path.join(work, 'nothing')])
    expect(p.returncode == 1 and 'nothing' in p.stderr and len(p.stderr.splitlines()) == 1,
           'missing trace: one line naming it', p)

    p = run([ptdecode, 'events'])
    expect(p.returncode == 2 and 'usage' in p.stderr, 'no directory: usage', p)
    p = run([ptdecode, 'events', work, '--thread', 'x'])
    expect(p.returncode == 2 and '--thread' in p.stderr, 'bad --thread', p)
    p = run([ptdecode, 'events', work, '--limit', '-3'])
    expect(p.returncode == 2 and '--limit' in p.stderr, 'bad --limit', p)
    p = run([ptdecode, 'events', '--help'])
    expect(p.returncode == 0 and 'usage' in p.stdout, '--help', p)

    trace = os.path.join(work, 't')
    subprocess.run([mkmeta, trace], check=True)
    p = run([ptdecode, 'events', trace])
    expect(p.returncode == 1 and 'no PT streams' in p.stderr, 'metadata without streams', p)

    # docs/FORMAT.md, "Damage and loss": damage is fatal, one line naming
    # the file and the offset, before any output.
    os.makedirs(os.path.join(trace, 'pt'))
    pt = os.path.join(trace, 'pt', 'tid-7.pt')
    idx = os.path.join(trace, 'pt', 'tid-7.idx')
    info = os.path.join(trace, 'info.json')
    with open(pt, 'wb') as f:
        f.write(bytes((i * 37 + 11) & 0xff for i in range(5000)))
    with open(idx, 'wb') as f:
        f.write(b'JPTAUX\0\0garbage')
    with open(info, 'w') as f:
        f.write('{"cpu": {"family": ')
    p = run([ptdecode, 'events', trace])
    expect(p.returncode == 1 and len(p.stderr.splitlines()) == 1 and
           'info.json: offset 19: unexpected end of file' in p.stderr and not p.stdout,
           'bad info.json: fatal, one line with the offset', p)
    os.unlink(info)
    p = run([ptdecode, 'events', trace])
    expect(p.returncode == 1 and len(p.stderr.splitlines()) == 1 and
           'tid-7.idx: offset 0: not a jpt AUX index' in p.stderr and not p.stdout,
           'bad index: fatal, one line with the offset', p)

    # A whole index over a garbage stream: decoded (gaps), exit 0.
    with open(idx, 'wb') as f:
        f.write(b'JPTAUX\0\0' + struct.pack('<II', 1, 40) + struct.pack('<5Q', 0, 5000, 0, 1, 0))
    p = run([ptdecode, 'events', trace])
    expect(p.returncode == 0, 'garbage stream under a good index: status 0', p)
    expect('# thread 7' in p.stdout and '# gaps:' in p.stdout, 'stream still summarized', p)

    p = run([ptdecode, 'events', trace, '--thread', '8'])
    expect(p.returncode == 1 and 'thread 8' in p.stderr, 'unknown thread', p)
    print('PASS')
    shutil.rmtree(work)
    return 0


if __name__ == '__main__':
    sys.exit(main())
