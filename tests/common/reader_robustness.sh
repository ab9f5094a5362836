#!/bin/bash
# Hostile metadata given to `ptdecode info`, with the outcomes docs/FORMAT.md
# ("Damage and loss") gives them: damage is fatal (exit 1, exactly one error
# line naming the file and the offset); a file cut short or a record that
# cannot be read is counted (exit 0, warnings naming the file and the
# offset). Never a crash or a sanitizer report (which would add lines).
#   usage: reader_robustness.sh MKMETA PTDECODE
set -u
mkmeta=$1 ptdecode=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0 cases=0

"$mkmeta" "$work/good" || { echo "mkmeta failed"; exit 1; }
meta="$work/good/jvm/meta.jpt"
size=$(stat -c %s "$meta")

# expect NAME WANT PATTERN DIR: runs info and checks the outcome. WANT 1:
# exit 1 and one stderr line matching PATTERN (an extended regex); 0: exit 0
# and no stderr; warn: exit 0, only warning lines, one matching PATTERN.
expect() {
    local name=$1 want=$2 pattern=$3 dir=$4
    cases=$((cases + 1))
    "$ptdecode" info "$dir" >"$work/out" 2>"$work/err"
    local rc=$? lines
    lines=$(wc -l <"$work/err")
    local want_rc=$want
    [ "$want" = warn ] && want_rc=0
    if [ "$rc" != "$want_rc" ]; then
        echo "FAIL $name: exit $rc, wanted $want_rc"; cat "$work/err"; fails=$((fails + 1)); return
    fi
    if [ "$want" = 0 ]; then
        if [ "$lines" != 0 ]; then echo "FAIL $name: unexpected stderr"; cat "$work/err"; fails=$((fails + 1)); fi
        return
    fi
    if [ "$want" = warn ]; then
        if [ "$lines" = 0 ] || grep -vq '^ptdecode: warning: ' "$work/err" ||
           ! grep -Eq -- "$pattern" "$work/err"; then
            echo "FAIL $name: wanted warnings, one matching /$pattern/, got:"; cat "$work/err"
            fails=$((fails + 1)); return
        fi
        echo "ok   $name: $(grep -E -- "$pattern" "$work/err" | head -1)"
        return
    fi
    if [ "$lines" != 1 ] || ! grep -Eq -- "$pattern" "$work/err"; then
        echo "FAIL $name: wanted one line matching /$pattern/, got:"; cat "$work/err"
        fails=$((fails + 1)); return
    fi
    echo "ok   $name: $(cat "$work/err")"
}

# variant NAME: a fresh copy of the good trace in $work/NAME
variant() { rm -rf "$work/$1"; cp -r "$work/good" "$work/$1"; echo "$work/$1/jvm/meta.jpt"; }

expect valid 0 "" "$work/good"
grep -q "codelets" "$work/out" || { echo "FAIL valid: no summary"; fails=$((fails + 1)); }

# Truncation at every record boundary and inside records: a header cut is
# fatal; a file cut after it is what a JVM killed while writing leaves.
for cut in 0 7 20 40 60 100 200 $((size / 2)) $((size - 17)) $((size - 1)); do
    [ "$cut" -lt "$size" ] || continue
    f=$(variant cut$cut)
    head -c "$cut" "$work/good/jvm/meta.jpt" >"$f"
    if [ "$cut" -lt 32 ]; then
        expect "cut$cut" 1 "meta.jpt: offset (0|12): " "$work/cut$cut"
    else
        expect "cut$cut" warn "meta.jpt: (offset [0-9]+: truncated (record header|[A-Z_]+ record) \(|no END record)" "$work/cut$cut"
    fi
done

f=$(variant random)
python3 -c 'import random, sys; random.seed(1); sys.stdout.buffer.write(bytes(random.randrange(256) for _ in range(4096)))' >"$f"
expect random 1 "meta.jpt: offset 0: not a jpt metadata file" "$work/random"

# A seeded random body after a good header: its first record header is damage.
f=$(variant random_body)
{ head -c 32 "$meta"; python3 -c 'import random, sys; random.seed(2); sys.stdout.buffer.write(bytes(random.randrange(256) for _ in range(4096)))'; } >"$f"
expect random_body 1 "meta.jpt: offset [0-9]+: " "$work/random_body"

f=$(variant version)
printf '\x07' | dd of="$f" bs=1 seek=8 conv=notrunc status=none
expect version 1 "meta.jpt: offset 8: format version 7\.0" "$work/version"

f=$(variant absurd_size)
printf '\xff\xff\xff\x7f' | dd of="$f" bs=1 seek=36 conv=notrunc status=none
expect absurd_size 1 "meta.jpt: offset 32: record size 2147483647 exceeds" "$work/absurd_size"

f=$(variant absurd_count)
# The CODE_CACHE record's heap count (third field) set to 2^31.
python3 - "$f" <<'PY'
import struct, sys
p = sys.argv[1]; b = bytearray(open(p, 'rb').read()); o = 32
while o + 16 <= len(b):
    t, _, n = struct.unpack_from('<HHI', b, o)
    if t == 2:
        struct.pack_into('<I', b, o + 16 + 16, 0x80000000); break
    o += 16 + n
open(p, 'wb').write(b)
PY
expect absurd_count warn "meta.jpt: offset [0-9]+: CODE_CACHE record: heap count exceeds.*\(record ignored\)" "$work/absurd_count"

f=$(variant code_short)
head -c 20 "$work/good/jvm/code.bin" >"$work/code_short/jvm/code.bin"
expect code_short warn "meta.jpt: offset [0-9]+: CODE_BLOB record's code bytes \[0, \+32\) lie past the end of .*code.bin \(20 bytes\): it was cut" "$work/code_short"

f=$(variant code_missing)
rm "$work/code_missing/jvm/code.bin"
expect code_missing 1 "code.bin: cannot read" "$work/code_missing"

f=$(variant bad_class)
python3 - "$f" <<'PY'
import sys
p = sys.argv[1]; b = bytearray(open(p, 'rb').read())
i = b.find(b'\xca\xfe\xba\xbe'); b[i + 10] = 99   # first constant-pool tag
open(p, 'wb').write(b)
PY
expect bad_class warn "meta.jpt: offset [0-9]+: class file of Tiny: offset 10: constant pool entry 1 has unknown tag 99" "$work/bad_class"

expect no_dir 1 "nonexistent: not a trace directory" "$work/nonexistent"
mkdir -p "$work/empty_dir"
expect empty_dir 1 "empty_dir/jvm/meta.jpt: cannot read: No such file" "$work/empty_dir"

# A FIFO in place of a file is refused at once, never read (it would block).
for file in jvm/meta.jpt jvm/code.bin; do
    name=fifo_$(basename "$file" | tr . _)
    f=$(variant "$name")
    rm -f "$work/$name/$file"
    mkfifo "$work/$name/$file"
    cases=$((cases + 1))
    if ! timeout 20 "$ptdecode" info "$work/$name" >"$work/out" 2>"$work/err"; then
        if [ "$(wc -l <"$work/err")" = 1 ] && grep -q "$file: cannot read: not a regular file" "$work/err"; then
            echo "ok   $name: $(cat "$work/err")"
            continue
        fi
    fi
    echo "FAIL $name: wanted exit 1 and one line naming $file"; cat "$work/err"; fails=$((fails + 1))
done

echo "$((cases - fails)) passed, $fails failed"
[ "$fails" = 0 ]
