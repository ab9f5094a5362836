#!/usr/bin/env python3
"""Profiles of a traced run against the JVM's own account.

usage: traced_test.py PTREC PLUGIN AGENT PTDECODE JAVA_BIN_DIR SAMPLES_DIR WORKDIR SAMPLE [ARGS...]

1. Compiles SAMPLE (samples/java/SAMPLE.java) and records `java -Xint SAMPLE ARGS` twice:
   under emulation with PT (`ptrec --emulate`, lossless), and natively with the agent in
   reference mode (method entries and exits, single steps; HotSpot's bytecode rewriting off,
   as in tests/flow/flow_test.py). The program is deterministic: both runs execute the same
   application code.
2. Builds the calling context tree of both (`ptdecode export --format cct-json`) and the
   hot methods by calls (`ptdecode hot --by calls --json`).
3. Application contexts (the innermost method is a method of SAMPLE or its nested classes;
   the path is compared by method names, lambda proxy names normalized): every context's
   call count in the traced profile must be within 1% of the reference's, and a context
   present in one profile only counts as 100% off. The top 10 application methods by calls
   (ties by name) must be the reference's top 10, in order.
The differences are printed whether or not they pass.
4. Calling-context ids: `ptdecode flow --context-ids --json` on the traced run (the first
   FLOW_LIMIT events of each thread). The stack of each event is followed here from the
   segments' starting stacks and the calls and returns (as the profile builds its tree);
   one id must always mean one stack and one stack one id, and `ptdecode context` must
   decode a sample of the ids (the deepest ones among them) to those stacks.
5. Coverage: `ptdecode export --format lcov --classes 'SAMPLE*'` of both runs must be valid
   lcov tracefiles (checked strictly here: record structure, every count consistent with
   its summary line) naming SAMPLE.java, and equal: the same lines, functions and branch
   outcomes. When genhtml (Debian package lcov) is installed, it must accept the file.
6. The summary (`ptdecode DIR`) of the traced run: its bytecodes are the CCT's, all decoded
   (nothing was lost), nothing lost, and its hot methods are `ptdecode hot`'s top 10.
"""
import difflib
import json
import os
import re
import shutil
import subprocess
import sys

MAX_REL_DIFF = 0.01
TOP = 10
FLOW_LIMIT = 300000
SAMPLE_IDS = 60

LAMBDA = re.compile(r'\$\$Lambda(\$\d+)?[./]0x[0-9a-f]+')


def norm(name):
    """Lambda proxy classes are named after their address, which differs between runs."""
    return LAMBDA.sub('$$Lambda', name)


def mine(sample, name):
    return name.startswith(sample + '.') or name.startswith(sample + '$')


def run(cmd, **kw):
    print('$ ' + ' '.join(cmd), flush=True)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=1800, **kw)


def method_name(m):
    return norm('%s.%s%s' % (m['class'].replace('/', '.'), m['name'], m['sig']))


def app_contexts(doc, keep):
    """{path of method names (outermost first): calls} of the contexts whose innermost
    method keep(name) accepts, over all threads (the thread roots are dropped from
    the path)."""
    names = [method_name(m) for m in doc['methods']]
    nodes = doc['nodes']
    parent, method, calls = nodes['parent'], nodes['method'], nodes['calls']
    path = [None] * len(parent)
    out = {}
    for i in range(len(parent)):
        if method[i] < 0:
            path[i] = ()
            continue
        path[i] = path[parent[i]] + (names[method[i]],)
        if keep(path[i][-1]):
            out[path[i]] = out.get(path[i], 0) + calls[i]
    return out


def top_app(hot, sample):
    rows = [(norm(h['method']), h['calls']) for h in hot if mine(sample, norm(h['method']))]
    rows.sort(key=lambda r: (-r[1], r[0]))
    return rows[:TOP]


PRIMS = {'B': 'byte', 'C': 'char', 'D': 'double', 'F': 'float', 'I': 'int', 'J': 'long',
         'S': 'short', 'Z': 'boolean', 'V': 'void'}


def readable(flow_name):
    """'java/lang/String.indexOf(Ljava/lang/String;I)I' -> 'java.lang.String.indexOf(
    java.lang.String, int)': the flow's names in the form `ptdecode context` prints."""
    if flow_name == '?':
        return '?'     # a frame the trace could not name
    head, _, sig = flow_name.partition('(')
    params, i, desc = [], 0, sig.split(')')[0]
    while i < len(desc):
        dims = 0
        while desc[i] == '[':
            dims, i = dims + 1, i + 1
        if desc[i] == 'L':
            end = desc.index(';', i)
            t, i = desc[i + 1:end].replace('/', '.'), end + 1
        else:
            t, i = PRIMS.get(desc[i], desc[i]), i + 1
        params.append(t + '[]' * dims)
    return '%s(%s)' % (head.replace('/', '.'), ', '.join(params))


def check_context_ids(ptdecode, trace, limit=FLOW_LIMIT, sample_ids=SAMPLE_IDS):
    """Returns a list of problems (empty: the ids agree with the flow). limit:
    events per thread (None: all); sample_ids: how many ids to decode (None:
    every one)."""
    flow = subprocess.Popen([ptdecode, 'flow', trace, '--context-ids', '--json'] +
                            (['--limit', str(limit)] if limit else []),
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    stacks, by_id, by_stack, problems = {}, {}, {}, []
    events = 0
    for line in flow.stdout:
        ev = json.loads(line)
        tid, kind = ev['tid'], ev['kind']
        st = stacks.setdefault(tid, [])
        if kind == 'segment':
            st[:] = ev['stack']
            here = tuple(st)
        elif kind == 'call':
            st.append(ev['method'])
            here = tuple(st)
        elif kind == 'return':
            here = tuple(st)
            if st:
                st.pop()
        else:
            here = tuple(st)
        events += 1
        cid = ev.get('ctx')
        if cid is None or cid < 0:
            problems.append('event without a context id: %s' % line.strip())
            continue
        if by_id.setdefault(cid, here) != here and len(problems) < 10:
            problems.append('id %d is both %s and %s' % (cid, by_id[cid], here))
        if by_stack.setdefault(here, cid) != cid and len(problems) < 10:
            problems.append('stack %s has ids %d and %d' % (here, by_stack[here], cid))
        if kind in ('call', 'bytecode') and here and here[-1] != ev['method'] and \
                len(problems) < 10:
            problems.append('event of %s in context %s' % (ev['method'], here))
    if flow.wait() != 0:
        problems.append('ptdecode flow --context-ids exited with %d' % flow.returncode)
    if not by_id:
        return problems + ['no context ids in the flow']
    # the deepest ids and an even spread of the others
    ids = sorted(by_id, key=lambda i: (-len(by_id[i]), i))
    if sample_ids is None:
        sample = ids
    else:
        half = max(1, sample_ids // 2)
        sample = ids[:half] + ids[half::max(1, len(ids) // half)]
    decoded, cur = {}, None
    for k in range(0, len(sample), 5000):   # within the command line's limits
        ctx = run([ptdecode, 'context', trace] + [str(i) for i in sample[k:k + 5000]])
        if ctx.returncode != 0:
            return problems + ['ptdecode context failed (%d): %s' % (ctx.returncode, ctx.stderr)]
        for line in ctx.stdout.splitlines():
            if line.startswith('# '):
                cur = int(line[2:])
                decoded[cur] = []
            elif line != '(empty context)':
                decoded[cur].append(line)
    for i in sample:
        want = [readable(m) for m in by_id[i]]
        if decoded.get(i) != want:
            problems.append('context %d decodes to %s, the flow had %s' %
                            (i, decoded.get(i), want))
    print('context ids: %d events, %d distinct contexts, %d decoded (deepest %d frames), '
          '%d problems' % (events, len(by_id), len(sample), len(by_id[ids[0]]), len(problems)))
    return problems


def check_summary(ptdecode, trace, doc, hot):
    """Problems with `ptdecode TRACE` (the summary) against the profile."""
    p = run([ptdecode, trace])
    if p.returncode != 0:
        return ['ptdecode %s exited with %d: %s' % (trace, p.returncode, p.stderr[-2000:])]
    out = p.stdout
    print(out)
    problems = []
    m = re.search(r'^bytecodes +(\d+): ([\d.]+)% decoded', out, re.M)
    total = doc['nodes']['bytecodes'][0]
    if not m or int(m.group(1)) != total or float(m.group(2)) != 100.0:
        problems.append('bytecodes line %r, the CCT has %d, all decoded' %
                        (m and m.group(0), total))
    if not re.search(r'^losses +0 bytes lost of \d+ \(PMD 0\.00%\), 0 gaps', out, re.M):
        problems.append('a lossless recording with losses')
    ranked = re.findall(r'^ +\d+ +[\d.]+ +\d+ +\d+  (.+)$', out, re.M)
    by_bc = sorted(hot, key=lambda h: -h['self_bytecodes'])
    want = [h['method'] for h in by_bc[:10]]
    # ties in self bytecodes may order differently: compare by value at each rank
    got_vals = [next((h['self_bytecodes'] for h in hot if h['method'] == r), None)
                for r in ranked]
    if len(ranked) != 10 or got_vals != [h['self_bytecodes'] for h in by_bc[:10]]:
        problems.append('hot methods %s, expected %s' % (ranked, want))
    return problems


def check_lcov(text, sample):
    """Problems with an lcov tracefile (empty: valid)."""
    problems = []
    lines = text.splitlines()
    if not lines or not re.fullmatch(r'TN:\w*', lines[0]):
        return ['the first line is not TN:NAME']
    rec = None
    files = []
    num = r'(0|[1-9]\d*)'
    for ln in lines[1:]:
        tag, _, val = ln.partition(':')
        if rec is None:
            if tag != 'SF' or not val:
                problems.append('expected SF:PATH, got %r' % ln)
                break
            rec = {'sf': val, 'fn': {}, 'fnda': {}, 'brda': {}, 'da': {}, 'sums': {}}
            continue
        if ln == 'end_of_record':
            files.append(rec)
            rec = None
            continue
        if tag == 'FN':
            m = re.fullmatch(num + r',([^,]+)', val)
            if not m or m.group(2) in rec['fn']:
                problems.append('bad or repeated FN: %r' % ln)
            else:
                rec['fn'][m.group(2)] = int(m.group(1))
        elif tag == 'FNDA':
            m = re.fullmatch(num + r',([^,]+)', val)
            if not m or m.group(2) not in rec['fn'] or m.group(2) in rec['fnda']:
                problems.append('bad FNDA (unknown or repeated function): %r' % ln)
            else:
                rec['fnda'][m.group(2)] = int(m.group(1))
        elif tag == 'BRDA':
            m = re.fullmatch(r'%s,%s,%s,(-|%s)' % (num, num, num, num), val)
            key = m and (int(m.group(1)), int(m.group(2)), int(m.group(3)))
            if not m or key in rec['brda'] or int(m.group(1)) == 0:
                problems.append('bad or repeated BRDA: %r' % ln)
            else:
                rec['brda'][key] = m.group(4)
        elif tag == 'DA':
            m = re.fullmatch(num + ',' + num, val)
            if not m or int(m.group(1)) in rec['da'] or int(m.group(1)) == 0:
                problems.append('bad or repeated DA: %r' % ln)
            else:
                rec['da'][int(m.group(1))] = int(m.group(2))
        elif tag in ('FNF', 'FNH', 'BRF', 'BRH', 'LF', 'LH'):
            if not re.fullmatch(num, val) or tag in rec['sums']:
                problems.append('bad or repeated %s: %r' % (tag, ln))
            else:
                rec['sums'][tag] = int(val)
        else:
            problems.append('unknown line %r' % ln)
    if rec is not None:
        problems.append('the last record has no end_of_record')
    for r in files:
        want = {'FNF': len(r['fn']), 'FNH': sum(1 for v in r['fnda'].values() if v),
                'BRF': len(r['brda']), 'BRH': sum(1 for v in r['brda'].values() if v not in
                                                  ('-', '0')),
                'LF': len(r['da']), 'LH': sum(1 for v in r['da'].values() if v)}
        for k, v in want.items():
            if r['sums'].get(k) != v:
                problems.append('%s: %s is %s, the record has %d' % (r['sf'], k,
                                                                    r['sums'].get(k), v))
        if set(r['fnda']) != set(r['fn']):
            problems.append('%s: functions without FNDA' % r['sf'])
    if [r['sf'] for r in files] != [sample + '.java']:
        problems.append('files %s, expected only %s.java' % ([r['sf'] for r in files], sample))
    elif not any(files[0]['da'].values()) or not files[0]['brda']:
        problems.append('no line was hit or no branch found')
    return problems


def lcov(ptdecode, trace, work, tag, sample):
    out = os.path.join(work, tag + '.info')
    e = run([ptdecode, 'export', trace, '--format', 'lcov', '--classes', sample + '*',
             '--title', sample, '-o', out])
    if e.returncode != 0:
        raise RuntimeError('lcov of %s failed (%d): %s' % (tag, e.returncode, e.stderr[-2000:]))
    with open(out) as f:
        return f.read()


def profile(ptdecode, trace, work, tag):
    out = os.path.join(work, tag + '.cct.json')
    e = run([ptdecode, 'export', trace, '--format', 'cct-json', '-o', out])
    if e.returncode != 0:
        raise RuntimeError('export of %s failed (%d): %s' % (tag, e.returncode, e.stderr[-2000:]))
    with open(out) as f:
        doc = json.load(f)
    h = run([ptdecode, 'hot', trace, '--by', 'calls', '--json', '-n', '1000000'])
    if h.returncode != 0:
        raise RuntimeError('hot of %s failed (%d): %s' % (tag, h.returncode, h.stderr[-2000:]))
    return doc, json.loads(h.stdout)


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
    if rec.returncode != 0:
        sys.stderr.write(rec.stderr)
        print('FAIL: recording failed (status %d)' % rec.returncode)
        return 1
    ref = os.path.join(work, 'ref.trace')
    env = dict(os.environ)
    env.pop('JAVA_TOOL_OPTIONS', None)
    r = run([java, '-Xint', '-XX:-RewriteBytecodes', '-XX:-RewriteFrequentPairs',
             '-agentpath:%s=mode=reference,out=%s' % (agent, ref), '-cp', classes,
             sample, *args], env=env)
    if r.returncode != 0 or rec.stdout != r.stdout:
        print('FAIL: reference run failed or printed something else:\n%s\n%s' %
              (rec.stdout, r.stdout))
        return 1

    got_doc, got_hot = profile(ptdecode, trace, work, 'traced')
    ref_doc, ref_hot = profile(ptdecode, ref, work, 'reference')
    got, want = [app_contexts(d, lambda n: mine(sample, n)) for d in (got_doc, ref_doc)]
    if not want:
        print('FAIL: the reference profile has no contexts of %s' % sample)
        return 1
    ok = True
    worst = []
    for path in set(got) | set(want):
        g, w = got.get(path, 0), want.get(path, 0)
        rel = abs(g - w) / w if w else (1.0 if g else 0.0)
        worst.append((rel, path, g, w))
    worst.sort(key=lambda x: (-x[0], x[1]))
    over = [x for x in worst if x[0] > MAX_REL_DIFF]
    total_w = sum(want.values())
    total_g = sum(got.get(p, 0) for p in want)
    print('%s: %d application contexts in the reference, %d traced; %d calls in the '
          'reference, %d traced; largest difference %.3f%%; %d contexts over %.0f%%' %
          (sample, len(want), len(got), total_w, total_g, 100 * worst[0][0], len(over),
           100 * MAX_REL_DIFF))
    if over:
        ok = False
        print('FAIL: contexts whose calls differ by more than %.0f%%:' % (100 * MAX_REL_DIFF))
        for rel, path, g, w in over[:20]:
            print('  %.2f%% reference %d traced %d: %s' % (100 * rel, w, g, ' > '.join(path)))
    tg, tw = top_app(got_hot, sample), top_app(ref_hot, sample)
    print('top %d application methods by calls (reference | traced):' % TOP)
    for a, b in zip(tw + [('', '')] * TOP, tg + [('', '')] * TOP):
        if not a[0] and not b[0]:
            break
        print('  %-50s %8s | %8s %s' % (a[0], a[1], b[1], '' if a[0] == b[0] else b[0]))
    if [x[0] for x in tg] != [x[0] for x in tw]:
        print('FAIL: the top %d application methods by calls differ' % TOP)
        ok = False
    got_cov, ref_cov = lcov(ptdecode, trace, work, 'traced', sample), \
        lcov(ptdecode, ref, work, 'reference', sample)
    problems = check_lcov(got_cov, sample)
    if problems:
        print('FAIL: the lcov tracefile is not valid:')
        for p in problems[:10]:
            print('  ' + p)
        ok = False
    elif got_cov != ref_cov:
        print('FAIL: the coverage of the traced run differs from the reference\'s:')
        for d in list(difflib.unified_diff(ref_cov.splitlines(), got_cov.splitlines(),
                                           'reference', 'traced', lineterm=''))[:40]:
            print('  ' + d)
        ok = False
    else:
        print('lcov: valid, equal to the reference (%d lines)' % len(got_cov.splitlines()))
        if shutil.which('genhtml'):
            # SF: names are relative to the source root (package path + file):
            # genhtml reads them from there (lcov 1.16 has no --source-directory).
            g = run(['genhtml', '--branch-coverage', '-o', os.path.join(work, 'html'),
                     os.path.abspath(os.path.join(work, 'traced.info'))], cwd=samples)
            if g.returncode != 0:
                print('FAIL: genhtml rejected the tracefile: %s' % g.stderr[-2000:])
                ok = False
            else:
                print('genhtml accepted it')
    problems = check_summary(ptdecode, trace, got_doc, got_hot)
    if problems:
        print('FAIL: the summary disagrees with the profile:')
        for p in problems:
            print('  ' + p)
        ok = False
    problems = check_context_ids(ptdecode, trace)
    if problems:
        print('FAIL: context ids of `ptdecode flow` and `ptdecode context` disagree:')
        for p in problems[:10]:
            print('  ' + p)
        ok = False
    if ok:
        print('PASS')
        shutil.rmtree(work)
        return 0
    return 1


if __name__ == '__main__':
    sys.exit(main())
