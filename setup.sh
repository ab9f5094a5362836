#!/bin/bash
# Installs the Debian packages jpt needs and builds it into ./build.
# Run as root or with sudo available. Idempotent: rerun after pulling changes.
#   ./setup.sh            packages + build
#   ./setup.sh --no-apt   build only
set -euo pipefail
cd "$(dirname "$0")"

# Build and test dependencies; rhino, libxalan2-java and liblucene4.10-java are the workloads the
# integration tests run (the rest of ../shared/workloads install on demand);
# chromium runs the ring chart's browser test; lcov's genhtml checks the coverage export;
# slurm-wlm and munge run the sharded decoding's job array on a one-node cluster (scale/).
packages=(
    gcc meson ninja-build pkg-config python3
    libipt-dev libcapstone-dev libelf-dev libglib2.0-dev libcriterion-dev
    openjdk-17-jdk-headless qemu-user
    rhino libxalan2-java liblucene4.10-java lcov
    chromium slurm-wlm munge
)

if [ "${1:-}" != "--no-apt" ]; then
    missing=()
    for p in "${packages[@]}"; do
        dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' \
            || missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        sudo=""
        [ "$(id -u)" = 0 ] || sudo="sudo"
        echo "setup: installing ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        $sudo apt-get update -qq
        $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
    fi
fi

# The Debian JDK 17 provides jvmti.h unless JAVA_HOME says otherwise.
export JAVA_HOME=${JAVA_HOME:-/usr/lib/jvm/java-17-openjdk-amd64}
if [ -d build ]; then
    meson setup --reconfigure build
else
    meson setup build
fi
ninja -C build

# The browser tests drive Chromium with playwright-core: the ring chart's, and
# speedscope reading the folded stacks; pinned in each folder's
# package-lock.json (npm registry).
if command -v npm >/dev/null; then
    for d in tests/profile/ringchart tests/profile/flamegraph; do
        npm ci --prefix "$d" --no-audit --no-fund --loglevel=error
    done
else
    echo "setup: npm not found: the browser tests (ring chart, flame graph) cannot run"
fi
echo "setup: built into ./build (tools: build/collector/ptrec, build/ptdecode/ptdecode, agent: build/jvm-agent/libjpt.so)"
