#!/usr/bin/env python3
"""Reconstruction of interpreted code, checked against the JVM's own account.

usage: flow_test.py PTREC PLUGIN AGENT PTDECODE JAVA_BIN_DIR SAMPLES_DIR WORKDIR SAMPLE [ARGS...]

1. Compiles SAMPLE (samples/java/SAMPLE.java) and records `java -Xint SAMPLE ARGS` twice:
   under emulation with PT (`ptrec --emulate`), and natively with the agent in reference
   mode, where JVMTI single-stepping reports the (method, bci) of every bytecode (with
   HotSpot's bytecode rewriting off: single-stepping reports a fused pair as one step).
2. `ptdecode flow --json` reconstructs the traced run.
3. For the sample's own methods (class SAMPLE and its nested classes): the per-(method,
   bci) execution counts of the two runs must agree within 1% (sum of absolute
   differences over the reference total), and the aligned sequence agreement of the
   thread that runs them must be at least 99% (matching blocks of the two sequences over
   the longer one).
4. For Dispatch, the calls inside the first `round` must be the hand-known sequence.
"""
import difflib
import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter

MAX_COUNT_DIFF = 0.01
MIN_SEQ_AGREEMENT = 0.99

# Dispatch.round(0, ...): the sample's own calls, in order, up to the exception.
DISPATCH_ROUND = [
    'Dispatch$Square.<init>(I)V', 'Dispatch$Base.<init>()V',
    'Dispatch$Rect.<init>(II)V',
    'Dispatch$Base.area()I', 'Dispatch$Square.side()I', 'Dispatch$Square.side()I',
    'Dispatch$Rect.area()I',
    'Dispatch$Shape.scaled(I)I', 'Dispatch$Base.area()I', 'Dispatch$Square.side()I',
    'Dispatch$Square.side()I',
    'Dispatch$Rect.scaled(I)I',
    'Dispatch$$Lambda.applyAsInt(I)I', 'Dispatch.lambda$round$0(I)I',
    'Dispatch.kind(LDispatch$Shape;)I', 'Dispatch$Base.area()I', 'Dispatch$Square.side()I',
    'Dispatch$Square.side()I',
    'Dispatch.kind(LDispatch$Shape;)I', 'Dispatch$Rect.area()I',
    'Dispatch.depth(I)I',
]


LAMBDA = re.compile(r'\$\$Lambda(\$\d+)?[./]0x[0-9a-f]+')


def norm(name):
    """Lambda proxy classes are named after their address, which differs between runs."""
    return LAMBDA.sub('$$Lambda', name)


def mine(sample, name):
    return name.startswith(sample + '.') or name.startswith(sample + '$')


def run(cmd, **kw):
    print('$ ' + ' '.join(cmd), flush=True)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=1800, **kw)


def main():
    ptrec, plugin, agent, ptdecode, jbin, samples, work, sample = sys.argv[1:9]
    args = sys.argv[9:]
    if os.path.exists(work):
        shutil.rmtree(work)
    os.makedirs(work)
    classes = os.path.join(work, 'classes')
    subprocess.run([os.path.join(jbin, 'javac'), '-d', classes,
                    os.path.join(samples, sample + '.java')], check=True)
    java = os.path.join(jbin, 'java')

    trace = os.path.join(work, 'pt.trace')
    rec = run([ptrec, '--emulate', '--plugin', plugin, '--agent', agent, '-o', trace, '--',
               java, '-Xint', '-cp', classes, sample, *args])
    sys.stderr.write(rec.stderr)
    if rec.returncode != 0:
        print('FAIL: recording failed (status %d)' % rec.returncode)
        return 1
    ref = os.path.join(work, 'ref.trace')
    env = dict(os.environ)
    env.pop('JAVA_TOOL_OPTIONS', None)
    # JVMTI single-stepping reports one step for HotSpot's fused bytecode pairs
    # (aload_0 + getfield run as one template): without the rewriting, every
    # bytecode is its own step. The traced run keeps the rewriting.
    r = run([java, '-Xint', '-XX:-RewriteBytecodes', '-XX:-RewriteFrequentPairs',
             '-agentpath:%s=mode=reference,out=%s' % (agent, ref), '-cp', classes,
             sample, *args], env=env)
    if r.returncode != 0 or rec.stdout != r.stdout:
        print('FAIL: reference run failed or printed something else:\n%s\n%s' % (rec.stdout, r.stdout))
        return 1

    # the reference: SINGLE_STEP records, per thread
    dump = run([ptdecode, 'dump', ref, '--type', 'SINGLE_STEP'])
    ref_seq = {}
    pat = re.compile(r'^SINGLE_STEP tsc=\d+ tid=(\d+) bci=(-?\d+) method=(.*)$')
    for line in dump.stdout.splitlines():
        m = pat.match(line)
        if m and mine(sample, m.group(3)):
            ref_seq.setdefault(int(m.group(1)), []).append((norm(m.group(3)), int(m.group(2))))
    if not ref_seq:
        print('FAIL: the reference recorded no bytecodes of %s' % sample)
        return 1

    flow = run([ptdecode, 'flow', trace, '--json'])
    if flow.returncode != 0:
        sys.stderr.write(flow.stderr[-3000:])
        print('FAIL: ptdecode flow exited with %d' % flow.returncode)
        return 1
    got_seq, calls = {}, {}
    for line in flow.stdout.splitlines():
        ev = json.loads(line)
        if ev['kind'] == 'bytecode' and mine(sample, ev['method']):
            got_seq.setdefault(ev['tid'], []).append((norm(ev['method']), ev['bci']))
        elif ev['kind'] == 'call' and mine(sample, ev['method']) and not ev.get('context'):
            calls.setdefault(ev['tid'], []).append(norm(ev['method']))
    for l in flow.stderr.splitlines():
        if l.startswith('# '):
            print(l)
    if not got_seq:
        print('FAIL: the reconstruction placed no bytecodes in %s' % sample)
        return 1

    ref_tid = max(ref_seq, key=lambda t: len(ref_seq[t]))
    got_tid = max(got_seq, key=lambda t: len(got_seq[t]))
    a, b = ref_seq[ref_tid], got_seq[got_tid]
    ca, cb = Counter(a), Counter(b)
    diff = sum(abs(ca[k] - cb[k]) for k in set(ca) | set(cb))
    print('%s: %d bytecodes in the reference, %d reconstructed; per-(method, bci) count '
          'difference %d (%.3f%%)' % (sample, len(a), len(b), diff, 100.0 * diff / len(a)))
    ids = {}
    ia = [ids.setdefault(x, len(ids)) for x in a]
    ib = [ids.setdefault(x, len(ids)) for x in b]
    sm = difflib.SequenceMatcher(None, ia, ib, autojunk=False)
    same = sum(blk.size for blk in sm.get_matching_blocks())
    agree = same / max(len(a), len(b))
    print('%s: aligned sequence agreement %.3f%% (%d of %d)' % (sample, 100 * agree, same,
                                                                 max(len(a), len(b))))
    ok = True
    if diff > MAX_COUNT_DIFF * len(a):
        print('FAIL: counts differ by more than %.0f%%' % (100 * MAX_COUNT_DIFF))
        worst = sorted(set(ca) | set(cb), key=lambda k: -abs(ca[k] - cb[k]))[:10]
        for k in worst:
            print('  %s bci %d: reference %d, reconstructed %d' % (k[0], k[1], ca[k], cb[k]))
        ok = False
    if agree < MIN_SEQ_AGREEMENT:
        print('FAIL: sequence agreement under %.0f%%' % (100 * MIN_SEQ_AGREEMENT))
        ok = False
    if sample == 'Dispatch':
        seq = calls.get(got_tid, [])
        if seq and seq[0].startswith('Dispatch.main'):
            seq = seq[1:]
        first = seq[1:1 + len(DISPATCH_ROUND)] if seq[:1] == ['Dispatch.round(ILjava/util/Map;)I'] else []
        if first != DISPATCH_ROUND:
            print('FAIL: the calls of the first Dispatch.round are not the known sequence:')
            for x, y in zip(DISPATCH_ROUND + [''] * 40, first + [''] * 40):
                if not x and not y:
                    break
                print('  %-45s %s' % (x, y))
            ok = False
        else:
            print('Dispatch.round: the %d known calls, in order' % len(DISPATCH_ROUND))
    if ok:
        print('PASS')
        shutil.rmtree(work)
        return 0
    return 1


if __name__ == '__main__':
    sys.exit(main())
