#!/usr/bin/env python3
"""Ground truth with the JIT on: a sample traced as users run it, against the reference.

usage: groundtruth_test.py PTREC PLUGIN AGENT PTDECODE JAVA_BIN_DIR SAMPLES_DIR WORKDIR
                           [--traced-option=JVM_OPTION...] SAMPLE [ARGS...]

1. Compiles SAMPLE (samples/java/SAMPLE.java) and runs `java SAMPLE ARGS` twice: traced
   under emulation with the JIT on (`ptrec --emulate`, with the JVM options given, such as
   -XX:-TieredCompilation for C2 alone), and natively in the agent's
   reference mode with -Xint and single steps (HotSpot's bytecode rewriting off, so that
   every bytecode is a step of its own). A deterministic program runs the same bytecodes
   either way; both must print the same.
2. `ptdecode compare --json --class SAMPLE` measures the agreement over the sample's own
   methods: calls per calling context, calls per method, bytecodes per (method, bci).
3. The inputs must make the test about compiled code: at least MIN_COMPILED of the
   sample's bytecodes ran compiled (the reference's bytecodes less the interpreted ones
   the trace shows, which are exact).
Each figure must reach its bound below; the report is printed either way.
"""
import json
import os
import shutil
import subprocess
import sys

# The goal of the compiled-code reconstruction (reconstruct/compiled.h) on the samples.
MIN_CONTEXTS = 99.9
MIN_METHODS = 99.9
MIN_BYTECODES = 99.5
# Of the sample's own bytecodes, the share that must have run compiled.
MIN_COMPILED = 50.0


def run(cmd, **kw):
    print('$ ' + ' '.join(cmd), flush=True)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=3000, **kw)


def main():
    ptrec, plugin, agent, ptdecode, jbin, samples, work = \
        [os.path.abspath(a) for a in sys.argv[1:8]]
    rest = sys.argv[8:]
    traced_opts = [a.split('=', 1)[1] for a in rest if a.startswith('--traced-option=')]
    rest = [a for a in rest if not a.startswith('--traced-option=')]
    sample, args = rest[0], rest[1:]
    if os.path.exists(work):
        shutil.rmtree(work)
    classes = os.path.join(work, 'classes')
    os.makedirs(classes)
    java, javac = os.path.join(jbin, 'java'), os.path.join(jbin, 'javac')
    c = run([javac, '--release', '17', '-d', classes, os.path.join(samples, sample + '.java')])
    if c.returncode != 0:
        print('FAIL: javac: ' + c.stderr[-2000:])
        return 1
    env = dict(os.environ)
    env.pop('JAVA_TOOL_OPTIONS', None)
    trace, ref = os.path.join(work, 'jit.trace'), os.path.join(work, 'ref.trace')
    rec = run([ptrec, '--emulate', '--plugin', plugin, '--agent', agent, '-o', trace, '--',
               java] + traced_opts + ['-cp', classes, sample] + args, env=env)
    r = run([java, '-XX:-RewriteBytecodes', '-XX:-RewriteFrequentPairs', '-Xint',
             '-agentpath:%s=mode=reference,out=%s' % (agent, ref), '-cp', classes, sample] +
            args, env=env)
    if rec.returncode != 0 or r.returncode != 0 or rec.stdout != r.stdout:
        print('FAIL: the runs failed or printed different things (status %d and %d):\n%s\n%s\n%s'
              % (rec.returncode, r.returncode, rec.stdout[-1000:], r.stdout[-1000:],
                 (rec.stderr + r.stderr)[-3000:]))
        return 1
    cmp = run([ptdecode, 'compare', trace, ref, '--class', sample, '--json', '--worst', '5'])
    if cmp.returncode != 0:
        print('FAIL: ptdecode compare exited with %d: %s' % (cmp.returncode, cmp.stderr[-2000:]))
        return 1
    d = json.loads(cmp.stdout)
    figures = [
        ('calls per context', d['contexts']['agreement_pct'], MIN_CONTEXTS),
        ('calls per method', d['methods']['agreement_pct'], MIN_METHODS),
        ('bytecodes per bci', d['bytecodes']['agreement_pct'] if d['bytecodes'] else 0.0,
         MIN_BYTECODES),
        ('ran compiled', d['compiled']['share_pct'], MIN_COMPILED),
    ]
    ok = True
    print('%s %s, JIT on%s, against -Xint single steps (%d reference calls, %d bytecodes):' %
          (sample, ' '.join(args), ''.join(' ' + o for o in traced_opts), d['contexts']['reference'],
           d['bytecodes']['reference'] if d['bytecodes'] else 0))
    for name, got, bound in figures:
        good = got >= bound
        ok = ok and good
        print('  %-18s %8.3f%%  (at least %.1f%%)%s' % (name, got, bound, '' if good else '  FAIL'))
    for w in d['worst_contexts'] + d['worst_bytecodes']:
        print('  %10d traced %10d reference  %s' % (w['traced'], w['reference'], w['key']))
    if not ok:
        # What the decode counted (gaps, resyncs, scopes left out) says where to look
        # when a recording that usually agrees does not.
        st = run([ptdecode, 'stats', trace, '--no-cache']).stdout.splitlines()
        tail = next((i for i, l in enumerate(st) if l.startswith('all threads')), len(st))
        print('\n'.join([l for l in st[:tail] if 'compiled code' in l] + st[tail:]))
        print('FAIL: %s does not agree with the reference as it should' % sample)
        return 1
    print('PASS')
    return 0


if __name__ == '__main__':
    sys.exit(main())
