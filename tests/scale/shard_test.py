#!/usr/bin/env python3
"""Sharded decoding against the single-process profile.

usage: shard_test.py PTREC PTDECODE JAVA_BIN_DIR SAMPLES_DIR WORKDIR

Records `java Branchy 60` (JIT on) and `java Hello` under emulation, lossless, then:
1. Whole threads (the default), N = 1, 2, 7, 16: `ptdecode merge` of all parts is byte for byte the
   cct-json of `ptdecode export`, also merged in other groupings (parts merged into parts
   first, in another order), and `merge --format hot` prints what `ptdecode hot` prints.
2. Threads split (--split), N = 1: identical too; N = 2, 7, 16: every grouping gives the
   same file, the total of calls is within 0.1% of the single process's, calls per method
   agree within 1% (sum of min over sum of max; calls per context are printed, not bound:
   they depend on where the cuts fall in the recording, 37% to 93% at N = 7); the
   merge reports one join per cut of a thread's stream in the plan and, where the profile
   is not the single process's, why: choices between call targets that took a class to
   have no objects the flow before had shown, or frames found after a join that are not
   the frames before it.
3. Parts that do not belong together or are damaged: each refused with exit status 1, one
   line naming the file, and no output file: another trace's part, another N, other
   options, a shard given twice, a shard missing, a file cut at many points, bytes
   flipped, and (with the checksum made right again) headers, counts and nodes changed.
"""
import collections
import json
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import zlib

# Threads split: what a piece's reconstruction, started without the stack
# and history before it, may settle otherwise (docs/PROFILES.md, "Sharded
# decoding"). Contexts fall far lower when joins misplace whole subtrees, by
# how the cuts fall in the recording: they are printed, with the merge's
# account of why.
MAX_CALLS_DIFF = 0.001
MIN_METHOD_AGREEMENT = 99.0
REPORT = re.compile(r'(\d+) joins inside threads: (\d+) frames found after them, (\d+) not the '
                    r'method before, (\d+) realigned;.*?(\d+) joins after which a choice')


def run(cmd, **kw):
    print('$ ' + ' '.join(cmd), flush=True)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=1800, **kw)


def must(cmd, **kw):
    r = run(cmd, **kw)
    if r.returncode != 0:
        raise RuntimeError('%s failed (%d): %s' % (cmd[1], r.returncode, r.stderr[-3000:]))
    return r


def shards(ptdecode, trace, n, outdir, extra=()):
    os.makedirs(outdir, exist_ok=True)
    parts = []
    for k in range(n):
        p = os.path.join(outdir, 'part-%02d' % k)
        must([ptdecode, 'shard', trace, '--of', str(n), '--index', str(k), '-o', p, *extra])
        parts.append(p)
    return parts


def read(path):
    with open(path, 'rb') as f:
        return f.read()


def contexts(doc):
    """calls per context path (method names, thread roots dropped) and per method"""
    names = ['%s.%s%s' % (m['class'], m['name'], m['sig']) for m in doc['methods']]
    n = doc['nodes']
    path, ctx, meth = {}, collections.Counter(), collections.Counter()
    for i, (p, m, c) in enumerate(zip(n['parent'], n['method'], n['calls'])):
        base = path.get(p, ()) if p >= 0 else ()
        path[i] = base + ((names[m],) if m >= 0 else ())
        if m >= 0:
            ctx[path[i]] += c
            meth[names[m]] += c
    return ctx, meth


def agreement(a, b):
    keys = set(a) | set(b)
    most = sum(max(a[k], b[k]) for k in keys)
    return 100.0 * sum(min(a[k], b[k]) for k in keys) / most if most else 100.0


def groupings(ptdecode, parts, work, tag):
    """merged outputs of the parts in three groupings; they must all be the same file"""
    n = len(parts)
    outs = []
    a = os.path.join(work, tag + '-all.json')
    must([ptdecode, 'merge', *parts, '-o', a])
    outs.append(a)
    if n >= 2:
        # left half into a part, right half (reversed) into a part, then both
        h = n // 2
        l, r = os.path.join(work, tag + '-l.part'), os.path.join(work, tag + '-r.part')
        must([ptdecode, 'merge', *parts[:h], '-o', l, '--format', 'part'])
        must([ptdecode, 'merge', *reversed(parts[h:]), '-o', r, '--format', 'part'])
        b = os.path.join(work, tag + '-lr.json')
        must([ptdecode, 'merge', r, l, '-o', b])
        outs.append(b)
        # pairs of neighbours, then the pairs' parts from the right
        pairs = []
        for i in range(0, n, 2):
            p = os.path.join(work, '%s-pair%d.part' % (tag, i))
            must([ptdecode, 'merge', *parts[i:i + 2], '-o', p, '--format', 'part'])
            pairs.append(p)
        c = os.path.join(work, tag + '-pairs.json')
        must([ptdecode, 'merge', *reversed(pairs), '-o', c])
        outs.append(c)
    first = read(outs[0])
    for o in outs[1:]:
        if read(o) != first:
            raise AssertionError('%s: merging in another grouping gave another file: %s vs %s' %
                                 (tag, outs[0], o))
    return outs[0]


def refused(ptdecode, args, out, name, why):
    """the merge must fail with one line on stderr naming `name`, and write nothing"""
    if os.path.exists(out):
        os.unlink(out)
    r = run([ptdecode, 'merge', *args, '-o', out])
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    problems = []
    if r.returncode != 1:
        problems.append('exit status %d, not 1' % r.returncode)
    if len(lines) != 1:
        problems.append('%d lines on stderr, not 1' % len(lines))
    elif name not in lines[0]:
        problems.append('the message does not name %s' % name)
    if os.path.exists(out):
        problems.append('it wrote %s' % out)
    if problems:
        raise AssertionError('%s: %s\n%s' % (why, '; '.join(problems), r.stderr[-2000:]))
    print('  refused (%s): %s' % (why, lines[0]))


def fix_crc(data):
    """the part with its end record's checksum made right again"""
    end = len(data) - 20
    kind, _, size = struct.unpack_from('<IIQ', data, end)
    assert kind == 0xffff and size == 4
    return data[:end + 16] + struct.pack('<I', zlib.crc32(data[:end]) & 0xffffffff)


def sections(data):
    """(offset of header, kind, payload offset, size) of every section"""
    out, at = [], 96
    while at < len(data):
        kind, _, size = struct.unpack_from('<IIQ', data, at)
        out.append((at, kind, at + 16, size))
        at += 16 + size
    return out


def hostile(ptdecode, parts, work):
    good = read(parts[0])
    bad = os.path.join(work, 'bad.part')
    out = os.path.join(work, 'bad-out.json')
    rnd = random.Random(63)

    def write(data):
        with open(bad, 'wb') as f:
            f.write(data)

    cuts = sorted(set([0, 7, 8, 12, 95, 96, 100, len(good) - 1, len(good) - 4] +
                      [rnd.randrange(len(good)) for _ in range(12)]))
    for c in cuts:
        write(good[:c])
        refused(ptdecode, [bad, *parts[1:]], out, bad, 'cut at %d of %d bytes' % (c, len(good)))
    for _ in range(8):
        d = bytearray(good)
        d[rnd.randrange(len(d))] ^= 1 << rnd.randrange(8)
        write(bytes(d))
        refused(ptdecode, [bad, *parts[1:]], out, bad, 'a bit flipped')
    # changes the checksum does not catch: the parser must
    d = bytearray(good)
    struct.pack_into('<I', d, 8, 99)
    write(fix_crc(bytes(d)))
    refused(ptdecode, [bad, *parts[1:]], out, bad, 'another version')
    secs = sections(good)
    for (at, kind, body, size) in secs:
        if kind == 0xffff:
            continue
        changes = [('section size', at + 8, '<Q', size + 1), ('section kind', at, '<I', 99)]
        if size >= 4:
            changes.append(('first field', body, '<I', 0x7fffffff))
        for what, off, fmt, val in changes:
            d = bytearray(good)
            struct.pack_into(fmt, d, off, val)
            write(fix_crc(bytes(d)))
            refused(ptdecode, [bad, *parts[1:]], out, bad, '%s of section %d' % (what, kind))
    pieces = [s for s in secs if s[1] == 6]
    at, _, body, size = max(pieces, key=lambda s: s[3])
    nodes = struct.unpack_from('<I', good, body + 52)[0]
    if nodes > 3:
        first_node = body + 64
        for what, off, fmt, val in [('a parent after its child', first_node + 56, '<I', 5),
                                    ('a duplicate node', first_node + 56, '<Q', 0),
                                    ('the final node out of range', body + 48, '<I', nodes),
                                    ('unknown piece flags', body + 4, '<I', 0x100)]:
            d = bytearray(good)
            if what == 'a duplicate node':
                # the second node made a copy of the first
                d[first_node + 56:first_node + 112] = d[first_node:first_node + 56]
            else:
                struct.pack_into(fmt, d, off, val)
            write(fix_crc(bytes(d)))
            refused(ptdecode, [bad, *parts[1:]], out, bad, what)
    # the class set of the first piece of a split thread, out of order
    for at, kind, body, size in pieces:
        flags, count, levels = struct.unpack_from('<I', good, body + 4)[0], \
            *struct.unpack_from('<II', good, body + 52)
        sets = body + 64 + (count - 1) * 56 + levels * 17
        if flags & 64 and struct.unpack_from('<I', good, sets)[0] >= 2:
            d = bytearray(good)
            d[sets + 8] = 0x7e          # the first name's first byte after every letter
            write(fix_crc(bytes(d)))
            refused(ptdecode, [bad, *parts[1:]], out, bad, 'a class set out of order')
            break
    else:
        raise AssertionError('no piece of a split thread with a class set in %s' % parts[0])


def main():
    ptrec, ptdecode, jbin, samples, work = sys.argv[1:6]
    if os.path.exists(work):
        shutil.rmtree(work)
    os.makedirs(work)
    classes = os.path.join(work, 'classes')
    subprocess.run([os.path.join(jbin, 'javac'), '--release', '17', '-d', classes,
                    os.path.join(samples, 'Branchy.java'), os.path.join(samples, 'Hello.java')],
                   check=True)
    java = os.path.join(jbin, 'java')
    trace = os.path.join(work, 'branchy.trace')
    must([ptrec, '--emulate', '-o', trace, '--', java, '-cp', classes, 'Branchy', '60'])
    other = os.path.join(work, 'hello.trace')
    must([ptrec, '--emulate', '-o', other, '--', java, '-cp', classes, 'Hello'])

    single = os.path.join(work, 'single.json')
    must([ptdecode, 'export', trace, '--format', 'cct-json', '-o', single])
    want = read(single)
    hot = must([ptdecode, 'hot', trace, '-n', '15']).stdout
    ok = True

    for n in (1, 2, 7, 16):
        parts = shards(ptdecode, trace, n, os.path.join(work, 'whole%d' % n))
        got = groupings(ptdecode, parts, work, 'whole%d' % n)
        same = read(got) == want
        print('whole threads, N = %d: %s' % (n, 'identical' if same else 'DIFFERENT'))
        ok &= same
        if n == 7:
            h = must([ptdecode, 'merge', *parts, '-o', '-', '--format', 'hot', '-n', '15']).stdout
            if h != hot:
                print('FAIL: merge --format hot differs from ptdecode hot:\n%s\n%s' % (h, hot))
                ok = False

    wctx, wmeth = contexts(json.loads(want))
    split_parts = {}
    for n in (1, 2, 7, 16):
        parts = shards(ptdecode, trace, n, os.path.join(work, 'split%d' % n), ['--split'])
        split_parts[n] = parts
        got = groupings(ptdecode, parts, work, 'split%d' % n)
        doc = json.loads(read(got))
        gctx, gmeth = contexts(doc)
        ctx_agree, meth_agree = agreement(gctx, wctx), agreement(gmeth, wmeth)
        calls, want_calls = sum(gmeth.values()), sum(wmeth.values())
        print('split, N = %d: %s; calls %d (single %d), per method %.3f%%, per context %.3f%%'
              % (n, 'identical' if read(got) == want else 'differs', calls, want_calls,
                 meth_agree, ctx_agree))
        if n == 1 and read(got) != want:
            print('FAIL: one shard is not the single-process profile')
            ok = False
        # the merge's account of the joins
        plan = json.loads(must([ptdecode, 'shard', trace, '--of', str(n), '--plan', '--split',
                                '--json']).stdout)
        cuts = collections.Counter(p['tid'] for p in plan['pieces'])
        want_joins = sum(c - 1 for c in cuts.values())
        r = must([ptdecode, 'merge', *parts, '-o', os.path.join(work, 'report.json')])
        m = REPORT.search(r.stderr)
        if not m:
            print('FAIL: split into %d: no account of the joins: %s' % (n, r.stderr))
            ok = False
        else:
            joins, _, differ, realigned, assumed = (int(x) for x in m.groups())
            print('  %s' % r.stderr.strip())
            if joins != want_joins:
                print('FAIL: split into %d: %d joins reported, the plan cuts %d' %
                      (n, joins, want_joins))
                ok = False
            if read(got) != want and not (differ or realigned or assumed):
                print('FAIL: split into %d: the profile differs and the merge names no cause'
                      % n)
                ok = False
        if (abs(calls - want_calls) > MAX_CALLS_DIFF * want_calls or
                meth_agree < MIN_METHOD_AGREEMENT):
            print('FAIL: split into %d: calls %d vs %d (at most %.1f%% apart), per method '
                  '%.3f%% (at least %.1f%%)' %
                  (n, calls, want_calls, 100 * MAX_CALLS_DIFF, meth_agree, MIN_METHOD_AGREEMENT))
            ok = False

    # parts that do not belong together
    out = os.path.join(work, 'refused.json')
    p7, p2 = split_parts[7], split_parts[2]
    o1 = shards(ptdecode, other, 2, os.path.join(work, 'other'))
    refused(ptdecode, [p7[0], o1[1]], out, o1[1], 'another trace')
    refused(ptdecode, [p7[0], p2[1]], out, p2[1], 'another N')
    cs = shards(ptdecode, trace, 2, os.path.join(work, 'sites'), ['--call-sites', '--split'])
    refused(ptdecode, [p2[0], cs[1]], out, cs[1], 'other options')
    refused(ptdecode, [*p7, p7[3]], out, p7[3], 'a shard given twice')
    pair = os.path.join(work, 'pair.part')
    must([ptdecode, 'merge', p7[2], p7[3], '-o', pair, '--format', 'part'])
    refused(ptdecode, [*p7[:3], pair], out, pair, 'a shard given twice, in a merged part')
    r = run([ptdecode, 'merge', *p7[:6], '-o', out])
    if r.returncode != 1 or 'missing shards 6' not in r.stderr or os.path.exists(out):
        print('FAIL: a missing shard: status %d, %s' % (r.returncode, r.stderr))
        ok = False
    hostile(ptdecode, p7, work)

    print('PASS' if ok else 'FAIL')
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
