#!/usr/bin/env bash
# Sets up (if needed), builds and runs every test with CTest.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${MAPFUSE_BUILD_DIR:-$root/build}"
bash "$root/scripts/build.sh" "$build" Release
cd "$build"
ctest --output-on-failure -j "$(nproc)" "$@"
