#!/usr/bin/env python3
"""Emulated per-CPU recording of samples/java/Threads.java, decoded both ways.

usage: percpu_test.py PTREC PLUGIN AGENT PTDECODE TSCCHECK JAVA_BIN_DIR SAMPLES_DIR WORKDIR NCPUS

1. Records `java Threads 2` (two waves of six threads, JIT on) with
   `ptrec --emulate --cpus NCPUS --keep-lossless`, which keeps the per-thread
   streams the per-CPU ones were made of in eval/per-thread/.
2. Checks the per-CPU layout: pt/ holds cpu-0 .. cpu-(N-1) and no tid-N
   streams; info.json describes N CPUs with a valid time conversion; each
   pt/cpu-K.pt decodes packet by packet with time never going back (tsccheck); in each
   sideband/cpu-K.sb record times never go back, and switches alternate: a
   thread is switched out only after being switched in on that CPU.
3. Decodes the per-CPU trace with `ptdecode events` and the same run's
   per-thread streams (a copy of the trace with eval/per-thread/'s pt/ and
   sideband/), and compares the events thread by thread (the gap lines'
   stream offsets left out: they are positions in different files). No
   context switch may be reported as unattachable. Both are decoded with
   each stream in one chunk (`--chunk`): a chunk starts from the code as
   recorded at its start, so where the two layouts cut a thread's flow at
   different PSBs, a call site the thread resolved before the cut may be
   decoded differently next to it (decoder/README.md, "What crosses a chunk
   boundary"). That is the chunking's, tested in tests/decoder; what is
   compared here is the split by context switches.
   A thread that never waited for a virtual CPU (eval/percpu.json) must have
   exactly the same events, and the same times except for at most
   RETIMED_MAX events: where decoding starts again at a PSB, its first
   events may carry that PSB's time rather than the one a decoder reading on
   would still report (decoder/README.md, "Time"), and the two layouts have
   their PSBs in different places. A thread that waited had its
   times shifted by the wait while the agent's records of code loads and
   patches keep the real times, so where code changed during the wait the
   decoder may see other code: its events are compared without the time, and
   at most SHIFTED_MAX_DIFF of them may differ (counted with diff(1)).
   With two or more CPUs at least one thread must be compared exactly; with
   one, every thread may have waited (the count is printed).
"""
import json
import os
import re
import shutil
import struct
import subprocess
import sys

SWITCH, AUX, ITRACE_START, EXIT = 14, 11, 12, 4
SHIFTED_MAX_DIFF = 0.01
RETIMED_MAX = 10
SWITCH_OUT = 0x2000


def fail(msg):
    print('FAIL: ' + msg)
    sys.exit(1)


def check_sideband(path, cpu):
    data = open(path, 'rb').read()
    off, last_time, cur, switches = 0, 0, None, 0
    while off < len(data):
        if len(data) - off < 8:
            fail('%s: offset %d: incomplete record header' % (path, off))
        typ, misc, size = struct.unpack_from('<IHH', data, off)
        if size < 48 or size % 8 or off + size > len(data):
            fail('%s: offset %d: bad record size %d' % (path, off, size))
        pid, tid, time, _id, rcpu = struct.unpack_from('<IIQQI', data, off + size - 40)
        if rcpu != cpu:
            fail('%s: offset %d: sample_id cpu %d' % (path, off, rcpu))
        if time < last_time:
            fail('%s: offset %d: time %d before the previous record\'s %d' %
                 (path, off, time, last_time))
        last_time = time
        if typ == SWITCH:
            switches += 1
            if misc & SWITCH_OUT:
                if cur != tid:
                    fail('%s: offset %d: switch-out of %d, but %s is switched in' %
                         (path, off, tid, cur))
                cur = None
            else:
                if cur is not None:
                    fail('%s: offset %d: switch-in of %d while %d is in' % (path, off, tid, cur))
                cur = tid
        off += size
    if cur is not None:
        fail('%s: thread %d never switched out' % (path, cur))
    return switches


def strip_time(lines):
    return [re.sub(r'until \d+', 'until', re.sub(r'^\s*\d+ ', '', l)) for l in lines]


def diff_lines(a, b, work):
    """Lines of a and b that diff(1) does not match up."""
    pa, pb = os.path.join(work, 'a.txt'), os.path.join(work, 'b.txt')
    with open(pa, 'w') as f:
        f.write('\n'.join(a) + '\n')
    with open(pb, 'w') as f:
        f.write('\n'.join(b) + '\n')
    r = subprocess.run(['diff', pa, pb], capture_output=True, text=True, timeout=600)
    return sum(1 for l in r.stdout.splitlines() if l[:2] in ('< ', '> ')), r.stdout[:2000]


def events_by_thread(ptdecode, trace, chunk_kib):
    r = subprocess.run([ptdecode, 'events', '--chunk', str(chunk_kib), trace],
                       capture_output=True, text=True, timeout=600)
    sys.stderr.write(r.stderr)
    if r.returncode != 0:
        fail('ptdecode events %s: status %d' % (trace, r.returncode))
    if 'could not be attached' in r.stderr or 'not between a TIP.PGD' in r.stderr:
        fail('ptdecode events %s: context switches not attached' % trace)
    threads, cur = {}, None
    for line in r.stdout.splitlines():
        m = re.match(r'# thread (\d+)', line)
        if m:
            cur = threads.setdefault(int(m.group(1)), [])
            continue
        if line.startswith('#') or cur is None:
            continue
        # The offsets of gaps are positions in different files.
        cur.append(re.sub(r'stream bytes \d+\.\.\d+', 'stream bytes', line))
    return threads


def main():
    if len(sys.argv) != 10:
        print(__doc__)
        return 2
    ptrec, plugin, agent, ptdecode, tsccheck, jbin, samples, work, ncpus = sys.argv[1:]
    ncpus = int(ncpus)
    if os.path.exists(work):
        shutil.rmtree(work)
    os.makedirs(work)
    classes = os.path.join(work, 'classes')
    subprocess.run([os.path.join(jbin, 'javac'), '-d', classes,
                    os.path.join(samples, 'Threads.java')], check=True)
    trace = os.path.join(work, 'cpu.trace')
    rec = subprocess.run([ptrec, '--emulate', '--cpus', str(ncpus), '--keep-lossless',
                          '--plugin', plugin, '--agent', agent, '-o', trace, '--',
                          os.path.join(jbin, 'java'), '-cp', classes, 'Threads', '2'],
                         capture_output=True, text=True, timeout=600)
    sys.stdout.write(rec.stdout)
    sys.stderr.write(rec.stderr)
    if rec.returncode != 0 or 'Threads done true' not in rec.stdout:
        fail('recording failed (status %d)' % rec.returncode)
    waited = 'waited for a CPU' in rec.stderr

    info = json.load(open(os.path.join(trace, 'info.json')))
    names = sorted(s['name'] for s in info['streams'])
    want = sorted('cpu-%d' % k for k in range(ncpus))
    if names != want:
        fail('streams %s, expected %s' % (names, want))
    if info.get('cpus') != ncpus or not info['time'].get('valid'):
        fail('info.json does not describe %d CPUs with a time conversion' % ncpus)
    if any(f.startswith('tid-') for f in os.listdir(os.path.join(trace, 'pt'))):
        fail('per-thread streams left in pt/')
    chk = subprocess.run([tsccheck] + [os.path.join(trace, 'pt', 'cpu-%d.pt' % k)
                                       for k in range(ncpus)],
                         capture_output=True, text=True, timeout=300)
    sys.stdout.write(chk.stdout)
    if chk.returncode != 0:
        fail('tsccheck: ' + chk.stderr.strip())
    switches = sum(check_sideband(os.path.join(trace, 'sideband', 'cpu-%d.sb' % k), k)
                   for k in range(ncpus))
    print('%d CPUs, %d switch records, threads waited: %s' % (ncpus, switches, waited))
    if switches < 2:
        fail('no context switches recorded')

    # The same run as a per-thread trace.
    thr = os.path.join(work, 'thread.trace')
    os.makedirs(thr)
    os.symlink(os.path.join(trace, 'jvm'), os.path.join(thr, 'jvm'))
    for sub in ('pt', 'sideband'):
        shutil.copytree(os.path.join(trace, 'eval', 'per-thread', sub), os.path.join(thr, sub))
    # its info.json lists the per-thread streams, as a per-thread recording's does
    info = json.load(open(os.path.join(trace, 'info.json')))
    info.pop('cpus', None)
    info['streams'] = []
    for f in sorted(os.listdir(os.path.join(thr, 'pt'))):
        if f.endswith('.pt'):
            size = os.path.getsize(os.path.join(thr, 'pt', f))
            idx = os.path.getsize(os.path.join(thr, 'pt', f[:-3] + '.idx'))
            info['streams'].append({'name': f[:-3], 'pt_bytes': size, 'lost_bytes': 0,
                                    'aux_records': (idx - 16) // 40, 'truncated': 0})
    info['totals'] = {'streams': len(info['streams']), 'lost_bytes': 0, 'truncated': 0,
                      'pt_bytes': sum(x['pt_bytes'] for x in info['streams'])}
    with open(os.path.join(thr, 'info.json'), 'w') as f:
        json.dump(info, f)

    sched = json.load(open(os.path.join(trace, 'eval', 'percpu.json')))
    delay = {t['tid']: t['delay'] for t in sched['threads']}
    if waited != any(delay.values()):
        fail('ptrec said threads waited: %s, eval/percpu.json: %s' % (waited, delay))
    # One chunk per stream: the largest stream of either layout, in KiB.
    chunk_kib = 4 + max(os.path.getsize(os.path.join(d, 'pt', f)) >> 10
                        for d in (trace, thr) for f in os.listdir(os.path.join(d, 'pt')))
    a = events_by_thread(ptdecode, trace, chunk_kib)
    b = events_by_thread(ptdecode, thr, chunk_kib)
    if sorted(a) != sorted(b):
        fail('threads differ: per-CPU %s, per-thread %s' % (sorted(a), sorted(b)))
    total = exact = 0
    for tid in sorted(b):
        total += len(b[tid])
        if not delay.get(tid):
            if len(a[tid]) != len(b[tid]):
                fail('thread %d: %d events per CPU, %d per thread' %
                     (tid, len(a[tid]), len(b[tid])))
            x, y = strip_time(a[tid]), strip_time(b[tid])
            retimed = 0
            for i in range(len(y)):
                if x[i] != y[i]:
                    fail('thread %d, event %d: per-CPU "%s", per-thread "%s"' %
                         (tid, i, a[tid][i], b[tid][i]))
                if a[tid][i] != b[tid][i]:
                    retimed += 1
                    print('thread %d, event %d: time differs: per-CPU "%s", per-thread "%s"' %
                          (tid, i, a[tid][i].strip(), b[tid][i].strip()))
            if retimed > RETIMED_MAX:
                fail('thread %d: %d events with other times' % (tid, retimed))
            exact += 1
            continue
        x, y = strip_time(a[tid]), strip_time(b[tid])
        n, sample = (0, '') if x == y else diff_lines(x, y, work)
        print('thread %d waited (times shifted by %d ticks): %d of %d events differ' %
              (tid, delay[tid], n, len(y)))
        if n > SHIFTED_MAX_DIFF * max(len(y), 100):
            sys.stdout.write(sample)
            fail('thread %d: %d of %d events differ' % (tid, n, len(y)))
    if total < 1000:
        fail('only %d events decoded' % total)
    print('%d of %d threads compared exactly (never waited), %d with tolerance' %
          (exact, len(b), len(b) - exact))
    # With two or more CPUs some thread runs without waiting; if none did,
    # nothing was compared exactly and the test would prove little.
    if ncpus >= 2 and exact == 0:
        fail('%d CPUs: every one of the %d threads waited for a CPU, so no thread was '
             'compared exactly (eval/percpu.json: %s)' % (ncpus, len(b), delay))
    print('OK: %d threads (%d never waited: exactly the same events), %d events' %
          (len(b), exact, total))
    return 0


if __name__ == '__main__':
    sys.exit(main())
