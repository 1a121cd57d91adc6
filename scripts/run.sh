#!/usr/bin/env bash
# Sets up (if needed), builds Release and runs the main job on the embedded default experiment.
# Until the study runtime lands this evaluates the default workload on the default architecture
# and validates the cost model against a sample of DOSA's Timeloop dataset.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${MAPFUSE_BUILD_DIR:-$root/build}"
bash "$root/scripts/build.sh" "$build" Release
exec "$build/cli/mapfuse" demo "$@"
