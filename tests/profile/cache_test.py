#!/usr/bin/env python3
"""The decoded-flow cache and the pipeline's threads change nothing.

usage: cache_test.py PTREC PLUGIN AGENT PTDECODE JAVA_BIN_DIR SAMPLES_DIR WORKDIR SAMPLE [ARGS...]
       cache_test.py --trace TRACE.DIR PTDECODE WORKDIR

Records `java SAMPLE ARGS` under `ptrec --emulate` (JIT on), or copies TRACE.DIR into WORKDIR
(the cache is written next to the trace), then:
1. References, decoded without the cache on one thread: `flow` (the projector's flow),
   `flow --recover --json`, `export` of cct-json and folded, `hot --json`.
2. The same without the cache on two threads: byte for byte equal.
3. A first command with the cache on makes TRACE.DIR/cache/flow.jfc (one export run writes
   cct-json and folded together); then every output read from the cache, with one and with
   two threads, is equal to the references, and the summary says the flow was read from it.
4. A cache damaged in its middle, cut short, replaced by another file, or another
   recording's (info.json changed): one warning naming the file and an offset, the same
   outputs, and the cache made again.
5. Two commands at once on a trace without a cache: equal outputs, one whole cache, no
   temporary file left. --no-cache writes none.
The CPU time of the first `hot` (decoding, cache made) and of a second one (cache read) is
printed with their ratio.
"""
import hashlib
import os
import resource
import shutil
import subprocess
import sys
import time


def run(cmd, **kw):
    print('$ ' + ' '.join(cmd), flush=True)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=3600, **kw)


def digest(path):
    """A large output's sha256 and size: outputs are compared without holding them."""
    h, n = hashlib.sha256(), 0
    with open(path, 'rb') as f:
        for block in iter(lambda: f.read(1 << 20), b''):
            h.update(block)
            n += len(block)
    return '%s %d bytes' % (h.hexdigest(), n)


def digest_text(text):
    data = text.encode()
    return '%s %d bytes' % (hashlib.sha256(data).hexdigest(), len(data))


def run_to_file(cmd, path):
    """Runs cmd with its standard output in path: (returncode, stderr)."""
    print('$ ' + ' '.join(cmd) + ' > ' + path, flush=True)
    with open(path, 'wb') as out:
        r = subprocess.run(cmd, stdout=out, stderr=subprocess.PIPE, text=True, timeout=3600)
    return r.returncode, r.stderr


class Checker:
    def __init__(self, ptdecode, trace, work):
        self.ptdecode, self.trace, self.work = ptdecode, trace, work
        self.failures = []

    def fail(self, what):
        print('FAIL: ' + what, flush=True)
        self.failures.append(what)

    def outputs(self, tag, extra):
        """Every compared output of the trace with extra options, by name."""
        out = {}
        for name, args in (('flow', ['flow']), ('flow-recover', ['flow', '--recover', '--json']),
                           ('hot', ['hot', '-n', '40', '--json'])):
            path = os.path.join(self.work, '%s.%s' % (tag, name))
            rc, err = run_to_file([self.ptdecode] + args[:1] + [self.trace] + args[1:] + extra,
                                  path)
            if rc != 0:
                self.fail('%s %s exited with %d: %s' % (tag, name, rc, err[-1500:]))
            out[name] = digest(path)
            out[name + ' stderr'] = err
            if name == 'flow-recover':
                with open(path) as f:
                    out['bytecodes in flow-recover'] = sum('"kind":"bytecode"' in l for l in f)
            os.unlink(path)
        files = {f: os.path.join(self.work, '%s.%s' % (tag, f)) for f in ('cct.json', 'folded')}
        r = run([self.ptdecode, 'export', self.trace, '--format', 'cct-json', '-o',
                 files['cct.json'], '--format', 'folded', '-o', files['folded']] + extra)
        if r.returncode != 0:
            self.fail('%s export exited with %d: %s' % (tag, r.returncode, r.stderr[-1500:]))
        for f, path in files.items():
            out[f] = digest(path) if os.path.exists(path) else None
            if os.path.exists(path):
                os.unlink(path)
        return out

    def same(self, tag, got, want):
        for name, text in want.items():
            if got.get(name) != text:
                self.fail('%s: %s differs from the reference (%s, not %s)' %
                          (tag, name, str(got.get(name))[-300:], str(text)[-300:]))

    def summary_flow(self, extra=()):
        r = run([self.ptdecode, self.trace] + list(extra))
        line = next((l for l in r.stdout.splitlines() if l.startswith('flow ')), '')
        return line, r.stderr


def cpu_of(cmd):
    """Runs cmd; its CPU seconds (children's rusage)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = run(cmd)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return r, cpu


def main():
    if sys.argv[1] == '--trace':
        src, ptdecode, work = sys.argv[2:5]
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
        trace = os.path.join(work, 'copy.trace')
        shutil.copytree(src, trace, ignore=shutil.ignore_patterns('cache'))
    else:
        ptrec, plugin, agent, ptdecode, jbin, samples, work, sample = sys.argv[1:9]
        args = sys.argv[9:]
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
        classes = os.path.join(work, 'classes')
        subprocess.run([os.path.join(jbin, 'javac'), '-d', classes,
                        os.path.join(samples, sample + '.java')], check=True)
        trace = os.path.join(work, 'pt.trace')
        rec = run([ptrec, '--emulate', '--plugin', plugin, '--agent', agent, '-o', trace, '--',
                   os.path.join(jbin, 'java'), '-cp', classes, sample, *args])
        if rec.returncode != 0:
            print('FAIL: recording failed (%d): %s' % (rec.returncode, rec.stderr[-2000:]))
            return 1
    c = Checker(ptdecode, trace, work)
    cache = os.path.join(trace, 'cache', 'flow.jfc')

    # 1, 2: without the cache, one and two threads
    ref = c.outputs('ref', ['--no-cache', '--jobs', '1'])
    if os.path.exists(cache):
        c.fail('--no-cache wrote %s' % cache)
    if not ref['bytecodes in flow-recover']:
        c.fail('the reference flow has no bytecodes')
    c.same('two threads, no cache', c.outputs('j2', ['--no-cache', '--jobs', '2']), ref)

    # 3: the cache made by the first command, read by the next ones
    r, first_cpu = cpu_of([ptdecode, 'hot', trace, '-n', '40', '--json', '--jobs', '2'])
    if digest_text(r.stdout) != ref['hot']:
        c.fail('the hot run that made the cache printed another ranking')
    if not os.path.exists(cache):
        c.fail('no cache after the first command')
    r, second_cpu = cpu_of([ptdecode, 'hot', trace, '-n', '40', '--json'])
    if digest_text(r.stdout) != ref['hot']:
        c.fail('hot from the cache printed another ranking')
    print('hot: %.2f s CPU decoding, %.2f s from the cache (%.1f%%)' %
          (first_cpu, second_cpu, 100 * second_cpu / max(first_cpu, 1e-9)))
    for jobs in ('1', '2'):
        c.same('from the cache, %s threads' % jobs, c.outputs('c' + jobs, ['--jobs', jobs]), ref)
    line, _ = c.summary_flow()
    if 'read from the decoded-flow cache' not in line:
        c.fail('the summary does not say the flow came from the cache: %r' % line)

    # 4: damage, foreign files and stale caches
    with open(cache, 'rb') as f:
        good = f.read()
    cases = (('damaged', good[:len(good) // 2] + bytes([good[len(good) // 2] ^ 0x10]) +
              good[len(good) // 2 + 1:]),
             ('cut short', good[:len(good) * 2 // 3]),
             ('foreign', b'{"a": "file that is no cache"}\n' * 10))
    for what, data in cases:
        with open(cache, 'wb') as f:
            f.write(data)
        r = run([ptdecode, 'hot', trace, '-n', '40', '--json'])
        warn = [l for l in r.stderr.splitlines() if 'flow.jfc' in l]
        if digest_text(r.stdout) != ref['hot']:
            c.fail('%s cache: another ranking' % what)
        if len(warn) != 1 or ': offset ' not in warn[0] or cache not in warn[0]:
            c.fail('%s cache: expected one warning naming %s and an offset, got %s' %
                   (what, cache, warn))
        line, err = c.summary_flow()
        if 'read from the decoded-flow cache' not in line or 'flow.jfc' in err:
            c.fail('%s cache: not made again (%r, %r)' % (what, line, err))
    info = os.path.join(trace, 'info.json')
    with open(info) as f:
        text = f.read()
    with open(info, 'w') as f:
        f.write(text + '\n')
    line, err = c.summary_flow()
    warn = [l for l in err.splitlines() if 'flow.jfc' in l]
    if 'decoded, and kept' not in line or len(warn) != 1 or ': offset 40: ' not in warn[0]:
        c.fail('another recording\'s cache (info.json changed): expected one warning and the '
               'cache made again (%r, %r)' % (line, err))
    c.same('after a stale cache', c.outputs('stale', []), ref)

    # 5: two commands at once, and --no-cache
    shutil.rmtree(os.path.dirname(cache))
    procs = [subprocess.Popen([ptdecode, 'hot', trace, '-n', '40', '--json'],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    for p in procs:
        out, err = p.communicate(timeout=3600)
        if p.returncode != 0 or digest_text(out) != ref['hot']:
            c.fail('concurrent hot: status %d, %s' % (p.returncode, err[-500:]))
    left = sorted(os.listdir(os.path.dirname(cache)))
    if left != ['flow.jfc']:
        c.fail('after two writers, cache/ holds %s' % left)
    line, _ = c.summary_flow()
    if 'read from the decoded-flow cache' not in line:
        c.fail('after two writers the cache is not used: %r' % line)
    shutil.rmtree(os.path.dirname(cache))
    c.summary_flow(['--no-cache'])
    if os.path.exists(os.path.dirname(cache)):
        c.fail('--no-cache made %s' % os.path.dirname(cache))

    if c.failures:
        print('%d failures' % len(c.failures))
        return 1
    print('ok')
    return 0


if __name__ == '__main__':
    sys.exit(main())
