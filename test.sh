#!/bin/bash
# Runs every test: Criterion units, hostile-input and fuzz runs, and the
# integration tests that run real java (JDK 17, and Temurin 25 when it is
# installed) natively and under the emulated PT backend.
#   ./test.sh                 all suites
#   ./test.sh --suite unit    only the fast unit suite
set -euo pipefail
cd "$(dirname "$0")"
[ -f build/build.ninja ] || { echo "test: no build yet: run ./setup.sh first" >&2; exit 2; }
ninja -C build
exec meson test -C build --print-errorlogs --num-processes 2 "$@"
