#!/usr/bin/env python3
"""One name style, patterns in both, and a traced run's time and frame kinds.

usage: names_test.py PTREC LIBPTEMU LIBJPT PTDECODE JDK_BIN SAMPLES_DIR WORKDIR DOC...

Records Hello under `ptrec --emulate` (JIT on), then:
  - every `--method '...'` and `--classes '...'` pattern in the DOCs (README.md,
    docs/PROFILES.md) is run as written and rewritten into the other style (Java
    `pkg.Cls.m` <-> JVM `pkg/Cls.m`): both select the same methods (classes) of
    `ptdecode flow --json` (the lcov tracefile), and where they select nothing,
    both warn; the patterns naming Hello or java.lang.String select something;
  - reports name methods in Java style, and `--simple` without parameters;
  - info.json has the TSC frequency measured over the recording, and `hot`
    shows ms / us with it and says the run was emulated;
  - the flame graph's data marks frames by how they ran: interpreted ones, and
    compiled ones when the summary reports compiled code;
  - its chrome-trace nests: B/E pairs closed in order, times strictly
    increasing per thread;
  - on a terminal, `hot` shows how much of the trace it has read and the
    time left, and clears the line at the end.
"""
import json
import os
import pty
import re
import select
import shutil
import subprocess
import sys
import time


def run(cmd, timeout=900):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


failures = []


def check(cond, what, detail=''):
    print('%s %s%s' % ('ok  ' if cond else 'FAIL', what, ': ' + str(detail) if detail != '' else ''))
    if not cond:
        failures.append(what)


def other_style(kind, pattern):
    """The pattern in the other naming style: JVM names separate packages with
    '/', Java names with '.' (a method pattern keeps its last '.' before the
    parameters: it separates the method)."""
    if '/' in pattern:
        return pattern.replace('/', '.')
    head, paren, rest = pattern.partition('(')
    if kind == 'method':
        cls, dot, meth = head.rpartition('.')
        return (cls.replace('.', '/') + dot + meth if dot else head) + paren + rest
    return head.replace('.', '/') + paren + rest


def flow_methods(ptdecode, trace, pattern):
    p = run([ptdecode, 'flow', trace, '--json', '--method', pattern])
    names = set()
    for line in p.stdout.splitlines():
        ev = json.loads(line)
        if ev.get('kind') == 'bytecode':
            names.add(ev['method'])
    warned = 'no method that ran matches --method' in p.stderr
    return p.returncode, names, warned


def lcov_classes(ptdecode, trace, pattern, out):
    p = run([ptdecode, 'export', trace, '--format', 'lcov', '--classes', pattern, '-o', out])
    files = set()
    if os.path.exists(out):
        with open(out) as f:
            files = {l[3:].strip() for l in f if l.startswith('SF:')}
    return p.returncode, files, 'lcov: no class matches --classes' in p.stderr


def main():
    ptrec, plugin, agent, ptdecode, jbin, samples, work = sys.argv[1:8]
    docs = sys.argv[8:]
    shutil.rmtree(work, ignore_errors=True)
    classes = os.path.join(work, 'classes')
    os.makedirs(classes)
    p = run([os.path.join(jbin, 'javac'), '--release', '17', '-d', classes,
             os.path.join(samples, 'Hello.java')])
    if p.returncode:
        print('FAIL javac: ' + p.stderr)
        return 1
    trace = os.path.join(work, 'hello.trace')
    rec = run([ptrec, '--emulate', '--plugin', plugin, '--agent', agent, '-o', trace, '--',
               os.path.join(jbin, 'java'), '-cp', classes, 'Hello'])
    print(rec.stderr[-1500:])
    if rec.returncode or 'Hello from jpt' not in rec.stdout:
        print('FAIL recording (status %d)' % rec.returncode)
        return 1

    # ---- the documented patterns, in both styles
    found = []
    for doc in docs:
        with open(doc) as f:
            text = f.read()
        for kind, pat in re.findall(r"--(method|classes) '([^']+)'", text):
            found.append((os.path.basename(doc), kind, pat))
    check(len({p for _, k, p in found if k == 'method'}) >= 3 and
          any(k == 'classes' for _, k, _ in found), 'patterns found in the docs',
          ', '.join(sorted({p for _, _, p in found})))
    selected = {}
    for doc, kind, pat in sorted(set(found)):
        alt = other_style(kind, pat)
        if kind == 'method':
            a, b = flow_methods(ptdecode, trace, pat), flow_methods(ptdecode, trace, alt)
        else:
            a = lcov_classes(ptdecode, trace, pat, os.path.join(work, 'a.info'))
            b = lcov_classes(ptdecode, trace, alt, os.path.join(work, 'b.info'))
        selected[pat] = a[1]
        check(a[0] == 0 and b[0] == 0 and a[1] == b[1] and bool(a[1]) == (not a[2]) and
              a[2] == b[2], "%s --%s '%s' and '%s' select the same" % (doc, kind, pat, alt),
              '%d selected%s' % (len(a[1]), '' if a[1] else ', both warn'))
    for pat in selected:
        if 'Hello' in pat or 'String' in pat:
            check(selected[pat], "'%s' selects something in Hello's trace" % pat)
    rc, names, warned = flow_methods(ptdecode, trace, 'no.such.Method*')
    check(rc == 0 and not names and warned, 'a pattern matching nothing says so')

    # ---- one name style in the reports
    hot = json.loads(run([ptdecode, 'hot', trace, '-n', '50', '--json']).stdout)
    names = [h['method'] for h in hot]
    check(names and all('/' not in n and ('(' in n or n == '?' or n.startswith('0x'))
                        for n in names), 'hot names methods in Java style', names[:3])
    simple = json.loads(run([ptdecode, 'hot', trace, '-n', '50', '--json', '--simple']).stdout)
    check([h['method'] for h in simple] == [n.split('(')[0] for n in names],
          '--simple names them without parameters', [h['method'] for h in simple][:3])

    # ---- time of an emulated run
    with open(os.path.join(trace, 'info.json')) as f:
        tinfo = json.load(f)['time']
    check(tinfo.get('tsc_hz_source') == 'measured' and 1e8 < tinfo.get('tsc_hz', 0) < 1e11,
          'info.json: the TSC frequency measured over the recording', tinfo)
    text = run([ptdecode, 'hot', trace, '-n', '5']).stdout
    check(re.search(r' \d+\.\d{3} (s|ms|us) ', text) and 'an emulated run' in text,
          'hot shows real units and says the run was emulated', text.splitlines()[-1])

    # ---- frame kinds in the flame graph's data
    doc = json.loads(run([ptdecode, 'export', trace, '--format', 'cct-json', '-o', '-']).stdout)
    kinds = doc['nodes']['kind']
    interp, compiled = 1 << doc['kinds'].index('interpreted'), 1 << doc['kinds'].index('compiled')
    inlined = 1 << doc['kinds'].index('inlined')
    summary = run([ptdecode, trace]).stdout
    ran_compiled = re.search(r'^compiled +(\d+) bytecodes', summary, re.M)
    check(any(k & interp for k in kinds), 'interpreted frames are marked')
    if ran_compiled and int(ran_compiled.group(1)) > 0:
        check(any(k & (compiled | inlined) for k in kinds), 'compiled frames are marked',
              '%d nodes; the summary: %s bytecodes compiled' %
              (sum(1 for k in kinds if k & (compiled | inlined)), ran_compiled.group(1)))
    else:
        print('note: no compiled code in this run: compiled frames not checked')

    # ---- progress on a terminal: the share of the trace read and the time left
    master, slave = pty.openpty()
    started = time.time()
    prog = subprocess.Popen([ptdecode, 'hot', trace, '-n', '3'], stdout=subprocess.PIPE,
                            stderr=slave)
    os.close(slave)
    shown = b''
    while True:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            shown += chunk
        elif prog.poll() is not None:
            break
    prog.communicate()
    os.close(master)
    took = time.time() - started
    if took > 1.5:
        check(re.search(rb'\r\x1b\[Kptdecode: \d+% of the trace, [\d.]+M events, \d+ s left\r', shown)
              and shown.endswith(b'\r\x1b[K'),
              'a progress line with the share read and the time left, cleared at the end',
              '%.1f s: %r' % (took, shown[-120:]))
    else:
        print('note: hot took %.1f s, before the progress line shows (1 s): not checked' % took)

    # ---- the Chrome trace of a traced run nests (segments, frames sharing a TSC)
    chrome = os.path.join(work, 'hello.json')
    p = run([ptdecode, 'export', trace, '--format', 'chrome-trace', '-o', chrome])
    with open(chrome) as f:
        events = [e for e in json.load(f)['traceEvents'] if e['ph'] in ('B', 'E', 'X')]
    stacks, last, bad, bumped = {}, {}, [], 0
    for e in events:
        tid = e['tid']
        if tid in last:
            if not e['ts'] > last[tid]:
                bad.append('tid %d: %s at %s not after %s' % (tid, e['ph'], e['ts'], last[tid]))
            bumped += abs(e['ts'] - last[tid] - 0.001) < 1e-9
        last[tid] = e['ts']
        st = stacks.setdefault(tid, [])
        if e['ph'] == 'B':
            st.append(e['name'])
        elif e['ph'] != 'E' or not st or st.pop() != e['name']:
            bad.append('tid %d: %s of %s at %s' % (tid, e['ph'], e['name'], e['ts']))
    check(p.returncode == 0 and events and not bad and not any(stacks.values()),
          'chrome-trace of a traced run: B/E nested, closed, strictly increasing per thread',
          '%d events, %d one nanosecond after the previous; %s' % (len(events), bumped, bad[:3]))

    if failures:
        print('FAIL: %d check(s)' % len(failures))
        return 1
    shutil.rmtree(work, ignore_errors=True)
    print('PASS')
    return 0


if __name__ == '__main__':
    sys.exit(main())
