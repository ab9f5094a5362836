#!/bin/bash
# Runs every test: Criterion units, hostile-input and fuzz runs, and the
# integration tests that run real java (JDK 17, and Temurin 25 when it is
# installed) natively and under the emulated PT backend.
#   ./test.sh                 all suites
#   ./test.sh --suite unit    only the fast unit suite
set -uo pipefail
cd "$(dirname "$0")"
build=${JPT_BUILD:-build}
[ -f "$build/build.ninja" ] || { echo "test: no build in $build yet: run ./setup.sh first" >&2; exit 2; }
ninja -C "$build" || exit 1
meson test -C "$build" --print-errorlogs --num-processes 2 "$@"
rc=$?
# One plain closing line for whoever reads the output.
python3 - "$build/meson-logs/testlog.json" <<'PY'
import json, sys
ok = bad = skip = 0
for line in open(sys.argv[1]):
    r = json.loads(line).get("result")
    if r in ("OK", "EXPECTEDFAIL"):
        ok += 1
    elif r == "SKIP":
        skip += 1
    else:
        bad += 1
print(f"{ok} passed, {bad} failed" + (f", {skip} skipped" if skip else ""))
PY
exit $rc
