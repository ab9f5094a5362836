#!/usr/bin/env python3
"""Recovery and the accuracy statistics end to end.

usage: recover_test.py PTREC PLUGIN AGENT PTDECODE JAVA_BIN SAMPLES_DIR WORK

Records `java -Xint Branchy 60` under emulation with the loss model (a 16 KiB
buffer drained at 2 bytes per 1000 TSC ticks: most of the trace is cut) and
--keep-lossless, then checks `ptdecode stats --json`:
  - every percentage is present and within [0, 100], PMD + PDC = 100;
  - the bytes lost agree with info.json, and some were lost (PMD > 0);
  - what was decoded is right: DA >= 95 against the lossless copy;
  - recovery filled something: recovered bytecodes > 0, PR and RA reported,
    RA > 0; the shares of the flow recovered and guessed and the overall
    accuracy are percentages, and recovery's CPU time is part of the flow's;
  - the pruning of Theorem 5.5 saved work (candidates pruned on a bound);
that `--holes` lists holes that add up to the totals, largest first, that
`--time-only` (holes sized by their time span) decodes the same, and
that `ptdecode flow --recover --json` marks as many events recovered and
guessed as stats counts, and that hostile arguments give one-line errors.
"""
import json
import os
import shutil
import subprocess
import sys


class Fail(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Fail(what)
    print('ok:', what)


def run(cmd, **kw):
    print('$ ' + ' '.join(cmd), flush=True)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kw)


def main():
    ptrec, plugin, agent, ptdecode, jbin, samples, work = sys.argv[1:8]
    if os.path.exists(work):
        shutil.rmtree(work)
    os.makedirs(work)
    classes = os.path.join(work, 'classes')
    subprocess.run([os.path.join(jbin, 'javac'), '--release', '17', '-d', classes,
                    os.path.join(samples, 'Branchy.java')], check=True)
    trace = os.path.join(work, 'lossy.trace')
    rec = run([ptrec, '--emulate', '--plugin', plugin, '--agent', agent,
               '--aux-size', '16K', '--drain-rate', '2', '--keep-lossless', '-o', trace,
               '--', os.path.join(jbin, 'java'), '-Xint', '-cp', classes, 'Branchy', '60'])
    sys.stderr.write(rec.stderr)
    check(rec.returncode == 0 and 'Branchy 60' in rec.stdout, 'recording ran')

    p = run([ptdecode, 'stats', trace, '--json'])
    sys.stderr.write(p.stderr[-2000:])
    check(p.returncode == 0, 'ptdecode stats --json succeeded')
    st = json.loads(p.stdout)
    tot = st['total']
    print(json.dumps(tot, indent=1))
    for t in st['threads'] + [tot]:
        for k in ('pmd', 'pdc', 'pd', 'da', 'pr', 'ra', 'overall', 'recovered_share',
                  'guessed_share'):
            v = t[k]
            if not isinstance(v, (int, float)) or not 0 <= v <= 100:
                raise Fail('%s of %s is %r' % (k, t.get('tid', 'total'), v))
        if abs(t['pmd'] + t['pdc'] - 100) > 0.01:
            raise Fail('PMD + PDC != 100 for %s' % t.get('tid', 'total'))
    check(True, 'all percentages present and in [0, 100], PMD + PDC = 100')
    info = json.load(open(os.path.join(trace, 'info.json')))
    check(tot['lost_bytes'] == info['totals']['lost_bytes'] and
          tot['pt_bytes'] == info['totals']['pt_bytes'],
          'bytes recorded and lost agree with info.json (%d, %d)' %
          (tot['pt_bytes'], tot['lost_bytes']))
    check(tot['pmd'] > 0, 'data was lost: PMD %.2f' % tot['pmd'])
    check(tot['eval'] and tot['reference_bytecodes'] > tot['bytecodes'],
          'the lossless copy decoded to more bytecodes (%d) than the lossy stream (%d)' %
          (tot['reference_bytecodes'], tot['bytecodes']))
    check(tot['pd'] >= 90, 'PD %.2f >= 90' % tot['pd'])
    check(tot['da'] >= 95, 'DA %.2f >= 95 on what was decoded' % tot['da'])
    rv = tot['recovery']
    check(rv['filled'] > 0 and rv['bytecodes'] > 0,
          'recovery filled %d gaps with %d bytecodes' % (rv['filled'], rv['bytecodes']))
    check(tot['pr'] > 0 and tot['ra'] > 0, 'PR %.2f and RA %.2f reported' % (tot['pr'], tot['ra']))
    check(0 <= rv['empty_rejoin'] <= rv['rejoined'] <= rv['boundaries'],
          'boundaries %d, rejoined %d, at once (nothing missing) %d' %
          (rv['boundaries'], rv['rejoined'], rv['empty_rejoin']))
    check(tot['ga'] is None or 0 <= tot['ga'] <= 100,
          'GA %s: none guessed or a percentage' % tot['ga'])
    right = tot['da_matched'] + rv['ra_matched'] + rv['ga_matched']
    check(abs(tot['overall'] - min(100.0, 100.0 * right / tot['reference_bytecodes'])) < 0.01,
          'overall %.2f = (right decoded + recovered + guessed) / reference bytecodes'
          % tot['overall'])
    check(0 <= rv['seconds'] <= tot['flow_seconds'],
          'recovery took %.2f s of the flow\'s %.2f s CPU' % (rv['seconds'], tot['flow_seconds']))
    check(rv['candidates'] > 0 and rv['pruned_tier1'] + rv['pruned_tier2'] > 0 and
          rv['ranked_tier3'] < rv['candidates'],
          'pruning: %d of %d candidates ranked on tier 3 (%d pruned on tier 1, %d on tier 2)' %
          (rv['ranked_tier3'], rv['candidates'], rv['pruned_tier1'], rv['pruned_tier2']))

    h = tot['holes']
    check(0 < h['count'] and 0 < h['largest'] <= h['bytecodes'] and
          h['bytecodes'] <= tot['reference_bytecodes'] - tot['da_matched'] and
          h['large'] <= h['count'] and h['large_bytecodes'] <= h['bytecodes'] and
          (h['large'] > 0) == (h['largest'] >= h['large_min']) and
          h['count'] == sum(t['holes']['count'] for t in st['threads']),
          'holes: %d holding %d bytecodes, at most the reference\'s not matched by decoding '
          '(%d), largest %d' % (h['count'], h['bytecodes'],
                                tot['reference_bytecodes'] - tot['da_matched'], h['largest']))

    # a recovered bytecode is a copy of the thread's history: the ones that match their
    # hole are at a (method, bci) some segment before the hole ran
    check(0 <= h['unseen'] <= h['bytecodes'] and
          rv['ra_matched'] <= h['bytecodes'] - h['unseen'],
          'holes: %d bytecodes never run before their hole; %d recovered right, at most the '
          'other %d' % (h['unseen'], rv['ra_matched'], h['bytecodes'] - h['unseen']))

    # --holes: the list of holes adds up to the totals, largest first, and each
    # fill's bytecodes right in order are at most those of the hole's code
    p = run([ptdecode, 'stats', trace, '--json', '--holes', '1000000'])
    check(p.returncode == 0, 'ptdecode stats --json --holes succeeded')
    every = json.loads(p.stdout)
    for t in every['threads']:
        hl, th, trv = t['largest_holes'], t['holes'], t['recovery']
        what = 'thread %d: ' % t['tid']
        check(len(hl) == th['count'] and sum(x['bytecodes'] for x in hl) == th['bytecodes'] and
              sum(x['unseen'] for x in hl) == th['unseen'] and
              sum(x['right'] for x in hl) == trv['ra_matched'] + trv['ga_matched'],
              what + '--holes lists %d holes; their bytecodes, never run before and right add '
              'up to the totals' % len(hl))
        check(all(a['bytecodes'] >= b['bytecodes'] for a, b in zip(hl, hl[1:])) and
              (not hl or hl[0]['bytecodes'] == th['largest']),
              what + 'holes listed largest first')
        check(all(x['right'] <= x['same_code'] <= x['filled'] and x['unseen'] <= x['bytecodes'] and
                  x['method'] and x['fill_method'] for x in hl),
              what + 'per hole: right in order <= of the hole\'s code <= filled; methods named')
    main_t = max(every['threads'], key=lambda t: t['holes']['count'])
    p = run([ptdecode, 'stats', trace, '--json', '--holes', '2'])
    check(p.returncode == 0, 'ptdecode stats --json --holes 2 succeeded')
    two = {t['tid']: t['largest_holes'] for t in json.loads(p.stdout)['threads']}
    check(two[main_t['tid']] == main_t['largest_holes'][:2],
          '--holes 2 lists the first two of the whole list')
    p = run([ptdecode, 'stats', trace, '--holes', '1', '--thread', str(main_t['tid'])])
    check(p.returncode == 0 and 'the 1 largest of %d holes' % main_t['holes']['count'] in p.stdout,
          'the text output lists the largest hole')

    p = run([ptdecode, 'stats', trace, '--json', '--no-recover'])
    nr = json.loads(p.stdout)['total']
    check(p.returncode == 0 and nr['pr'] is None and nr['ra'] is None and
          abs(nr['da'] - tot['da']) < 1e-9 and nr['holes'] == h,
          '--no-recover: no PR/RA, the same DA and holes')

    # a cut fill is a prefix of the whole one, and fills never enter the
    # history: cutting can only recover less
    p = run([ptdecode, 'stats', trace, '--json', '--cut-disputed'])
    cut = json.loads(p.stdout)['total']
    check(p.returncode == 0 and cut['recovery']['bytecodes'] <= rv['bytecodes'] and
          cut['da'] == tot['da'],
          '--cut-disputed: %d bytecodes recovered, at most the %d of whole fills, the same DA'
          % (cut['recovery']['bytecodes'], rv['bytecodes']))

    # holes sized by their time alone, as on hardware: decoding is the same
    p = run([ptdecode, 'stats', trace, '--json', '--time-only'])
    tonly = json.loads(p.stdout)['total'] if p.returncode == 0 else None
    check(tonly is not None and tonly['da'] == tot['da'] and tonly['pmd'] == tot['pmd'] and
          tonly['recovery']['boundaries'] == rv['boundaries'],
          '--time-only: the same PMD, DA and holes; %d bytecodes recovered (%d sized by bytes)'
          % (tonly['recovery']['bytecodes'] if tonly else -1, rv['bytecodes']))

    p = run([ptdecode, 'flow', trace, '--recover', '--json'])
    check(p.returncode == 0, 'ptdecode flow --recover --json succeeded')
    n = g = 0
    for line in p.stdout.splitlines():
        if '"origin":"recovered"' in line:
            n += 1
        elif '"origin":"guessed"' in line:
            g += 1
    check(n == rv['events'], 'flow --recover marks %d events recovered (stats: %d)' %
          (n, rv['events']))
    check(g == rv['guessed_events'], 'flow --recover marks %d events guessed (stats: %d)' %
          (g, rv['guessed_events']))

    for args, what in (([trace, '--thread', 'x'], 'a bad --thread'),
                       ([os.path.join(work, 'none')], 'a missing trace'),
                       ([trace, '--bogus'], 'an unknown option'),
                       ([trace, '--holes', '-1'], 'a negative --holes')):
        p = run([ptdecode, 'stats'] + args)
        err = p.stderr.strip().splitlines()
        check(p.returncode in (1, 2) and err and p.stdout == '',
              'stats with %s fails with a message (%s)' % (what, err[0] if err else ''))
    return 0


if __name__ == '__main__':
    try:
        sys.exit(main())
    except Fail as e:
        print('FAIL:', e)
        sys.exit(1)
