#!/usr/bin/env bash
# Configures and builds mapfuse. Usage: scripts/build.sh [BUILD_DIR] [BUILD_TYPE]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build}"
type="${2:-Release}"
bash "$root/scripts/setup.sh"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE="$type" -DMAPFUSE_WERROR="${MAPFUSE_WERROR:-OFF}" >/dev/null
cmake --build "$build" -j "$(nproc)"
