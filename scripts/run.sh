#!/usr/bin/env bash
# Sets up (if needed), builds Release and runs the main job: the default study
# experiments/quickstart.toml (writes out/quickstart.h5 and prints its summary table).
# Extra arguments go to `mapfuse run` (e.g. --output, --threads, --quiet).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${MAPFUSE_BUILD_DIR:-$root/build}"
bash "$root/scripts/build.sh" "$build" Release
cd "$root"
exec "$build/cli/mapfuse" run experiments/quickstart.toml "$@"
