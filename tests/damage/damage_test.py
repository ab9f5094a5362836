#!/usr/bin/env python3
"""Damaged copies of a real trace given to whole `ptdecode` commands: each
damage class gets the outcome docs/FORMAT.md ("Damage and loss") documents,
the same from every command. Fatal: exit 1, one stderr line naming the file
(and the offset), no output file left. Counted: exit 0, a warning, and the
right figures on the summary's and stats' lines. No command takes more than
twice its time on the undamaged trace (plus a few seconds of start-up).
Outputs are written whole or not at all, and write errors name the file.

usage: damage_test.py PTREC PLUGIN AGENT JAVA_BIN SAMPLES PTDECODE WORKDIR
"""
import os
import re
import resource
import shutil
import signal
import stat
import struct
import subprocess
import sys
import time

FAILS = []


def fail(what):
    print('FAIL: ' + what)
    FAILS.append(what)


def run(ptdecode, args, timeout):
    t0 = time.monotonic()
    try:
        p = subprocess.run([ptdecode] + args, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, timeout
    if p.returncode < 0:
        fail('%s died of signal %d' % (args, -p.returncode))
    return p, time.monotonic() - t0


def outputs(ptdecode, good, work):
    """An export's output is written whole or not at all: a user's file of
    that name stays as it was when the export fails, is stopped or cannot
    write; every write error names the file and the reason."""
    out = os.path.join(work, 'profile.json')
    mine = "the user's file\n"

    def reset():
        with open(out, 'w') as f:
            f.write(mine)

    def left(what):
        if open(out).read() != mine:
            fail('%s: the existing output was changed' % what)
        tmps = [f for f in os.listdir(work) if f.startswith('profile.json.')]
        if tmps:
            fail('%s: left %s' % (what, tmps))
            for f in tmps:
                os.unlink(os.path.join(work, f))

    export = [ptdecode, 'export', '--format', 'cct-json', '-o', out]
    reset()
    p = subprocess.run(export + [os.path.join(work, 'no_jvm')], capture_output=True, text=True)
    if p.returncode != 1:
        fail('export of a damaged trace: exit %d' % p.returncode)
    left('export of a damaged trace')
    p = subprocess.run([ptdecode, 'export', good, '--format', 'hcct-json', '--phi', '0.001',
                        '--epsilon', '0.01', '-o', out], capture_output=True, text=True)
    if p.returncode != 2:
        fail('hcct-json with epsilon > phi: exit %d' % p.returncode)
    left('hcct-json usage error')

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 16, 1 << 16))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    p = subprocess.run(export + [good], capture_output=True, text=True, preexec_fn=small_files)
    errs = [l for l in p.stderr.splitlines() if 'warning' not in l]
    if p.returncode != 1 or errs != ['ptdecode: %s: cannot write: File too large' % out]:
        fail('export over the file size limit: exit %d, %s' % (p.returncode, p.stderr))
    left('export over the file size limit')

    # while decoding (--no-cache: from the flow cache it would be done before the signal),
    # two formats at once: neither file is left (profile.json.folded nor a temporary file)
    q = subprocess.Popen(export + [good, '--no-cache', '--format', 'folded', '-o',
                                   out + '.folded'],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)
    q.send_signal(signal.SIGTERM)
    q.wait(timeout=60)
    left('export stopped by SIGTERM')

    p = subprocess.run(export + [good], capture_output=True, text=True)
    if p.returncode != 0 or not open(out).read().startswith('{'):
        fail('export over an existing file: exit %d' % p.returncode)
    elif os.stat(out).st_mode & 0o777 != 0o666 & ~current_umask():
        fail('export: mode %o' % (os.stat(out).st_mode & 0o777))
    else:
        print('ok   outputs: kept whole on failure, SIGTERM and write errors; replaced on success')

    if os.path.exists('/dev/full') and stat.S_ISCHR(os.stat('/dev/full').st_mode):
        with open('/dev/full', 'w') as full:
            p = subprocess.run([ptdecode, 'events', '--summary', good], stdout=full,
                               stderr=subprocess.PIPE, text=True)
        if p.returncode != 1 or 'standard output: cannot write: No space left on device' \
                not in p.stderr:
            fail('events to a full device: exit %d, %s' % (p.returncode, p.stderr))


def current_umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def main():
    ptrec, plugin, agent, jbin, samples, ptdecode, work = map(os.path.abspath, sys.argv[1:8])
    if os.path.exists(work):
        shutil.rmtree(work)
    os.makedirs(work)
    classes = os.path.join(work, 'classes')
    subprocess.run([os.path.join(jbin, 'javac'), '-d', classes,
                    os.path.join(samples, 'Hello.java')], check=True)
    good = os.path.join(work, 'good')
    rec = subprocess.run([ptrec, '--emulate', '--plugin', plugin, '--agent', agent, '-q',
                          '-o', good, '--', os.path.join(jbin, 'java'), '-Xint', '-cp', classes,
                          'Hello'], capture_output=True, text=True, timeout=900)
    if rec.returncode != 0 or 'sum of squares = 328350' not in rec.stdout:
        print(rec.stdout + rec.stderr)
        print('FAIL: recording failed (status %d)' % rec.returncode)
        return 1
    ptdir = os.path.join(good, 'pt')
    sizes = {f[:-3]: os.path.getsize(os.path.join(ptdir, f))
             for f in os.listdir(ptdir) if f.endswith('.pt')}
    main_stream = max(sizes, key=sizes.get)
    small = min(sizes, key=sizes.get)
    main_tid = main_stream[4:]
    total = sum(sizes.values())
    print('recorded %d streams, %d bytes; main %s (%d bytes)' % (len(sizes), total, main_stream,
                                                                sizes[main_stream]))

    out_file = os.path.join(work, 'out.json')
    commands = {
        'info': ['info'],
        'events': ['events', '--summary', '--jobs', '1'],
        'summary': ['summary'],
        'export': ['export', '--format', 'cct-json', '-o', out_file],
        'stats': ['stats'],
    }
    budget = {}
    for name, args in commands.items():
        p, secs = run(ptdecode, args + [good], 600)
        noise = [l for l in (p.stderr.splitlines() if p else [])
                 if 'code records overlap' not in l]
        if p is None or p.returncode != 0 or noise:
            fail('undamaged %s: %s' % (name, p and p.stderr))
        budget[name] = 2 * secs + 5
        print('undamaged %-8s %.2f s' % (name, secs))

    def variant(name, damage):
        d = os.path.join(work, name)
        if os.path.exists(d):
            shutil.rmtree(d)
        shutil.copytree(good, d)
        damage(d)
        return d

    def check(name, d, cmds, status, pattern, lines=()):
        """Runs cmds on d: exit status, a stderr line matching pattern (the
        only line when fatal), no output file after a fatal export, and each
        (command, regex) of lines found in that command's stdout."""
        for c in cmds:
            if os.path.exists(out_file):
                os.unlink(out_file)
            p, secs = run(ptdecode, commands[c] + [d], budget[c])
            what = '%s / %s' % (name, c)
            if p is None:
                fail('%s: over %.1f s (twice the undamaged time and 5 s)' % (what, budget[c]))
                continue
            err = p.stderr.splitlines()
            if p.returncode != status:
                fail('%s: exit %d, wanted %d: %s' % (what, p.returncode, status, p.stderr))
                continue
            if status == 1 and (len(err) != 1 or not re.search(pattern, err[0])):
                fail('%s: wanted one line matching /%s/, got %s' % (what, pattern, err))
                continue
            if status == 0 and not any(re.search(pattern, l) and 'warning:' in l for l in err):
                fail('%s: no warning matching /%s/ in %s' % (what, pattern, err))
                continue
            if status == 1 and c == 'export' and os.path.exists(out_file):
                fail('%s: a fatal export left its output file' % what)
            for lc, rx in lines:
                if lc == c and not re.search(rx, p.stdout, re.M):
                    fail('%s: no line matching /%s/ in:\n%s' % (what, rx, p.stdout[:3000]))
            print('ok   %-40s %.2f s  %s' % (what, secs, err[0] if err else ''))

    everything = list(commands)
    decoding = ['events', 'summary', 'stats']
    mpt = main_stream + '.pt'
    main_bytes = sizes[main_stream]
    half = main_bytes // 2

    # A stream cut short: the bytes its index covers past the end are lost,
    # a gap at the end, counted in the summary's and stats' losses.
    d = variant('cut_half', lambda d: os.truncate(os.path.join(d, 'pt', mpt), half))
    check('cut_half', d, decoding, 0,
          r'%s: offset %d: the file ends %d bytes before its index' % (mpt, half,
                                                                       main_bytes - half),
          [('summary', r'^losses +%d bytes lost of %d .*, %d bytes missing from cut streams'
            % (main_bytes - half, total, main_bytes - half)),
           ('events', r'^# the file: %d bytes its index covers are missing' % (main_bytes - half)),
           ('stats', r'^all threads .*\n +%d bytes recorded, %d lost'
            % (total - (main_bytes - half), main_bytes - half))])

    # The main thread's stream empty, and gone.
    d = variant('main_empty', lambda d: os.truncate(os.path.join(d, 'pt', mpt), 0))
    check('main_empty', d, ['summary'], 0, r'thread main \(tid %s\) has no trace' % main_tid,
          [('summary', r'^losses +%d bytes lost of %d .*thread main \(tid %s\) untraced'
            % (main_bytes, total, main_tid))])
    d = variant('main_gone', lambda d: os.unlink(os.path.join(d, 'pt', mpt)))
    check('main_gone', d, ['summary', 'stats'], 0, r'%s: missing; .* %d bytes of it: lost'
          % (mpt, main_bytes),
          [('summary', r'^losses +%d bytes lost of %d .*1 stream absent' % (main_bytes, total)),
           ('stats', r'^trace losses +1 stream absent, %d bytes missing' % main_bytes)])

    # Every stream cut: one warning, then how many more; --verbose: each.
    def cut_all(d):
        for name, size in sizes.items():
            os.truncate(os.path.join(d, 'pt', name + '.pt'), size // 2)
    d = variant('all_cut', cut_all)
    for verbose in ([], ['--verbose']):
        p, _ = run(ptdecode, ['events', '--summary', d] + verbose, 120)
        cuts = [l for l in p.stderr.splitlines()
                if 'bytes before its index says' in l and 'more like' not in l]
        more = [l for l in p.stderr.splitlines()
                if re.search(r'warning: %d more like ".*the file ends' % (len(sizes) - 1), l)]
        want = (len(sizes), 0) if verbose else (1, 1)
        if p.returncode != 0 or (len(cuts), len(more)) != want:
            fail('all_cut %s: %d warnings and %d counts, wanted %s:\n%s'
                 % (verbose, len(cuts), len(more), want, p.stderr))
        else:
            print('ok   all_cut / events %s: %d warning line(s) for %d streams'
                  % (' '.join(verbose), len(cuts) + len(more), len(sizes)))

    # One byte of a small stream's only PSB: the thread is a gap, not gone.
    def psb_byte(d):
        with open(os.path.join(d, 'pt', small + '.pt'), 'r+b') as f:
            f.seek(3)
            f.write(b'\x00')
    d = variant('psb_damaged', psb_byte)
    check('psb_damaged', d, ['events', 'summary'], 0,
          r'none of its %d bytes (of PT )?could be decoded' % sizes[small],
          [('summary', r'^losses .* 1 gaps, %d bytes not decodable' % sizes[small]),
           ('events', r'decode-error 1, .* %d bytes skipped' % sizes[small])])

    # The recording did not finish.
    def incomplete(d):
        p = os.path.join(d, 'info.json')
        text = open(p).read().replace('"complete": true', '"complete": false')
        open(p, 'w').write(text)
    d = variant('incomplete', incomplete)
    check('incomplete', d, ['summary', 'stats'], 0, r'did not finish',
          [('summary', r'^recording +cut: info.json says it did not finish'),
           ('stats', r'^recording +cut: info.json says it did not finish')])

    # The JVM's metadata cut in a record (the agent killed while writing):
    # in its END record, and a third from its end.
    meta_size = os.path.getsize(os.path.join(good, 'jvm', 'meta.jpt'))
    d = variant('meta_cut_end', lambda d: os.truncate(os.path.join(d, 'jvm', 'meta.jpt'),
                                                      meta_size - 5))
    check('meta_cut_end', d, ['info', 'summary'], 0,
          r'meta.jpt: offset %d: truncated record header \(11 of 16 bytes\)$' % (meta_size - 16),
          [('summary', r'^recording +cut: jvm/meta.jpt cut at offset %d$' % (meta_size - 16))])
    # Five bytes into the record that holds the two-thirds point: a cut at a
    # fixed offset could fall between two records and leave nothing truncated.
    with open(os.path.join(good, 'jvm', 'meta.jpt'), 'rb') as f:
        meta = f.read()
    cut = struct.unpack_from('<I', meta, 12)[0]
    while cut + 16 <= meta_size * 2 // 3:
        cut += 16 + struct.unpack_from('<I', meta, cut + 4)[0]
    d = variant('meta_cut', lambda d: os.truncate(os.path.join(d, 'jvm', 'meta.jpt'), cut + 5))
    check('meta_cut', d, ['info', 'events'], 0,
          r'meta.jpt: offset \d+: truncated (record header|[A-Z_]+ record) \(',
          [('events', r'^# recording cut: jvm/meta.jpt cut at offset \d+$')])

    # A stream padded far past its index: not decoded, and no slower.
    def pad(d):
        with open(os.path.join(d, 'pt', small + '.pt'), 'r+b') as f:
            f.truncate(sizes[small] + (1 << 30))
    d = variant('padded', pad)
    check('padded', d, ['events', 'summary'], 0,
          r'%s.pt: offset %d: 1073741824 bytes past the end of its index' % (small, sizes[small]),
          [('summary', r'^losses .*, 1073741824 bytes past their index not decoded')])

    # An index read with the wrong record size: records no writer makes.
    def idx48(d):
        with open(os.path.join(d, 'pt', main_stream + '.idx'), 'r+b') as f:
            f.seek(12)
            f.write(bytes([48]))
    d = variant('idx_record_size', idx48)
    check('idx_record_size', d, everything, 1,
          r'%s.idx: offset 64: bad record 1 \(offset \d+, size \d+, flags 0x[0-9a-f]+, lost \d+\): '
          % main_stream)

    # No jvm/: the missing file is named where it belongs.
    d = variant('no_jvm', lambda d: shutil.rmtree(os.path.join(d, 'jvm')))
    check('no_jvm', d, everything, 1, r'no_jvm/jvm/meta.jpt: cannot read: No such file')

    # A FIFO for a file: refused at once, never read.
    for f in ['info.json', 'jvm/meta.jpt', 'pt/%s.idx' % small, 'pt/%s.pt' % small]:
        def fifo(d, f=f):
            os.unlink(os.path.join(d, f))
            os.mkfifo(os.path.join(d, f))
        name = 'fifo_' + f.replace('/', '_')
        d = variant(name, fifo)
        check(name, d, everything, 1, re.escape(f) + ': cannot read: not a regular file')

    outputs(ptdecode, good, work)

    if FAILS:
        print('%d failures' % len(FAILS))
        return 1
    print('PASS')
    shutil.rmtree(work)
    return 0


if __name__ == '__main__':
    sys.exit(main())
