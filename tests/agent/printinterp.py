#!/usr/bin/env python3
"""Cross-checks the agent's interpreter codelets against HotSpot's own table.

usage: printinterp.py LIBJPT PTDECODE JAVA CLASSES [JVM-OPTION...]

CLASSES is a directory holding Hello.class, or Hello.java (compiled here with
the javac next to JAVA). Runs

    JAVA -agentpath:LIBJPT=out=DIR -XX:+UnlockDiagnosticVMOptions
         -XX:+PrintInterpreter [JVM-OPTION...] -cp CLASSES Hello

parses the codelet table HotSpot prints (InterpreterCodelet::print_on:
"description  [bytecode name  ][0xBEGIN, 0xEND]  N bytes") and compares it
with the CODELET records of `PTDECODE dump DIR --type CODELET`
("CODELET tsc=<n> begin=0x<hex> end=0x<hex> bytecode=<int> desc=<text>"):
same count, descriptions, bytecodes and ranges. Prints "codelets compared: N"
and exits 0, or prints a diff and exits 1. Set JPT_KEEP=1 to keep DIR.

Without a disassembler plugin HotSpot also prints each codelet's bytes as hex
([MachCode] blocks); those are compared with the interpreter CODE_BLOB's bytes
in jvm/code.bin ("code bytes compared: N"), and the non-nmethod code-heap
CODE_BLOB must cover the interpreter buffer.
"""
import difflib
import os
import re
import shutil
import subprocess
import sys
import tempfile

# "return entry points  [0x00007f..., 0x00007f...]  2912 bytes"
# "iload  21 iload  [0x00007f..., 0x00007f...]  96 bytes"
# HotSpot prints the description (when it has one) and the bytecode number and
# name (when >= 0), each followed by two spaces, then the code range.
PRINT_RE = re.compile(
    r'^(?:(?P<desc>.*?)  )??(?:(?P<bc>\d+) (?P<name>\S+)  )?'
    r'\[(?P<begin>0x[0-9a-fA-F]+), (?P<end>0x[0-9a-fA-F]+)\]  (?P<size>\d+) bytes$')
COUNT_RE = re.compile(r'^# of codelets\s*=\s*(\d+)\s*$')
# "  0x00007fc1a8940ba0: 488b cc48 | 83ec 70e8 | ..." inside [MachCode] blocks
HEX_RE = re.compile(r'^\s*0x([0-9a-fA-F]+):((?:\s+\|?\s*[0-9a-fA-F]{2,})+)\s*$')
BLOB_RE = re.compile(r'^CODE_BLOB .*\bvaddr=0x([0-9a-fA-F]+) size=(\d+) code_offset=(\d+) '
                     r'kind=(\d+)')
DUMP_RE = re.compile(
    r'^CODELET tsc=(?P<tsc>\d+) begin=0x(?P<begin>[0-9a-fA-F]+) '
    r'end=0x(?P<end>[0-9a-fA-F]+) bytecode=(?P<bc>-?\d+) desc=(?P<desc>.*)$')


def fail(msg):
    print('printinterp: FAIL: ' + msg, file=sys.stderr)
    sys.exit(1)


def parse_printed(text):
    """Codelets (desc, bytecode, begin, end) from -XX:+PrintInterpreter."""
    rows, announced, bad = [], None, []
    for line in text.splitlines():
        line = line.rstrip('\r')
        m = COUNT_RE.match(line)
        if m:
            announced = int(m.group(1))
            continue
        m = PRINT_RE.match(line)
        if not m:
            continue
        begin, end = int(m.group('begin'), 16), int(m.group('end'), 16)
        if end - begin != int(m.group('size')):
            bad.append(line)
        bc = int(m.group('bc')) if m.group('bc') is not None else -1
        rows.append((m.group('desc') or '', bc, begin, end))
    if bad:
        fail('printed sizes disagree with printed ranges:\n  ' + '\n  '.join(bad[:10]))
    return rows, announced


def parse_machcode(text):
    """{address: bytes} of the hex lines of every [MachCode] block."""
    chunks, inside = {}, False
    for line in text.splitlines():
        if line.startswith('[MachCode]'):
            inside = True
        elif line.startswith('[/MachCode]'):
            inside = False
        elif inside:
            m = HEX_RE.match(line)
            if m:
                chunks[int(m.group(1), 16)] = bytes.fromhex(
                    m.group(2).replace('|', '').replace(' ', ''))
    return chunks


def check_code_bytes(printed, ptdecode, trace, text):
    d = subprocess.run([ptdecode, 'dump', trace, '--type', 'CODE_BLOB'],
                       capture_output=True, text=True, errors='replace', timeout=300)
    if d.returncode != 0:
        fail('ptdecode dump --type CODE_BLOB exited with %d:\n%s'
             % (d.returncode, d.stderr[-4000:]))
    blobs = [tuple(int(g, 16) if i == 0 else int(g) for i, g in enumerate(m.groups()))
             for m in map(BLOB_RE.match, d.stdout.splitlines()) if m]
    interp = [b for b in blobs if b[3] == 1]
    if len(interp) != 1:
        fail('expected one interpreter CODE_BLOB (kind 1), found %d' % len(interp))
    vaddr, size, off, _ = interp[0]
    lo, hi = min(r[2] for r in printed), max(r[3] for r in printed)
    if lo < vaddr or hi > vaddr + size:
        fail('codelets [%#x, %#x) lie outside the interpreter blob [%#x, %#x)'
             % (lo, hi, vaddr, vaddr + size))
    if not any(b[3] == 2 and b[0] <= vaddr and vaddr + size <= b[0] + b[1] for b in blobs):
        fail('no non-nmethod code-heap CODE_BLOB (kind 2) covers the interpreter buffer')
    with open(os.path.join(trace, 'jvm', 'code.bin'), 'rb') as f:
        f.seek(off)
        code = f.read(size)
    if len(code) != size:
        fail('code.bin holds %d of the interpreter blob\'s %d bytes' % (len(code), size))
    compared = 0
    for addr, want in sorted(parse_machcode(text).items()):
        if addr < vaddr or addr + len(want) > vaddr + size:
            fail('printed code at %#x lies outside the interpreter blob' % addr)
        got = code[addr - vaddr:addr - vaddr + len(want)]
        if got != want:
            fail('interpreter bytes differ at %#x:\n  printed %s\n  recorded %s'
                 % (addr, want.hex(), got.hex()))
        compared += len(want)
    return compared


def parse_dump(text):
    rows = []
    for line in text.splitlines():
        if not line.startswith('CODELET'):
            continue
        m = DUMP_RE.match(line)
        if not m:
            fail('unparsable dump line: ' + line)
        rows.append((m.group('desc'), int(m.group('bc')),
                     int(m.group('begin'), 16), int(m.group('end'), 16)))
    return rows


def fmt(row):
    desc, bc, begin, end = row
    return '%#x-%#x bytecode=%d desc=%s' % (begin, end, bc, desc)


def class_dir(java, classes, tmp):
    if not classes.endswith('.java'):
        if not os.path.isfile(os.path.join(classes, 'Hello.class')):
            fail('no Hello.class in ' + classes)
        return classes
    javac = os.path.join(os.path.dirname(os.path.realpath(java)), 'javac')
    out = os.path.join(tmp, 'classes')
    r = subprocess.run([javac, '-d', out, classes], capture_output=True, text=True)
    if r.returncode != 0:
        fail('javac failed:\n' + r.stderr)
    return out


def main():
    if len(sys.argv) < 5:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    libjpt, ptdecode, java, classes = sys.argv[1:5]
    extra = sys.argv[5:]
    tmp = tempfile.mkdtemp(prefix='jpt-printinterp-')
    keep = bool(os.environ.get('JPT_KEEP'))
    ok = False
    try:
        cp = class_dir(java, os.path.abspath(classes), tmp)
        trace = os.path.join(tmp, 'trace')
        os.mkdir(trace)
        cmd = [java, '-agentpath:%s=out=%s' % (os.path.abspath(libjpt), trace),
               '-XX:+UnlockDiagnosticVMOptions', '-XX:+PrintInterpreter'] + extra + \
              ['-cp', cp, 'Hello']
        r = subprocess.run(cmd, capture_output=True, text=True, errors='replace', timeout=300)
        if r.returncode != 0:
            fail('java exited with %d:\n%s\n%s' % (r.returncode, ' '.join(cmd), r.stderr[-4000:]))
        printed, announced = parse_printed(r.stdout)
        if not printed:
            fail('java printed no codelet table (is -XX:+PrintInterpreter supported?)')
        if announced is not None and announced != len(printed):
            fail('HotSpot announced %d codelets but %d lines were parsed'
                 % (announced, len(printed)))

        d = subprocess.run([ptdecode, 'dump', trace, '--type', 'CODELET'],
                           capture_output=True, text=True, errors='replace', timeout=300)
        if d.returncode != 0:
            fail('ptdecode dump exited with %d:\n%s' % (d.returncode, d.stderr[-4000:]))
        recorded = parse_dump(d.stdout)

        # Both lists are in queue order already; sort anyway so that a writer
        # which reorders records does not matter, only their content.
        want = [fmt(x) for x in sorted(printed, key=lambda x: (x[2], x[3]))]
        got = [fmt(x) for x in sorted(recorded, key=lambda x: (x[2], x[3]))]
        if want != got:
            diff = difflib.unified_diff(want, got, 'PrintInterpreter', 'agent CODELET records',
                                        lineterm='', n=1)
            lines = list(diff)
            print('\n'.join(lines[:200]), file=sys.stderr)
            if len(lines) > 200:
                print('... (%d more diff lines)' % (len(lines) - 200), file=sys.stderr)
            fail('%d codelets printed by HotSpot, %d recorded by the agent; tables differ'
                 % (len(want), len(got)))
        print('codelets compared: %d' % len(want))
        nbytes = check_code_bytes(printed, ptdecode, trace, r.stdout)
        if nbytes:
            print('code bytes compared: %d' % nbytes)
        else:
            print('code bytes not compared: HotSpot printed no [MachCode] hex')
        ok = True
    finally:
        if keep or not ok:
            print('printinterp: files kept in ' + tmp, file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == '__main__':
    main()
