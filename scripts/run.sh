#!/usr/bin/env bash
# Sets up (if needed), builds Release and runs the main job: the default study
# experiments/quickstart.toml, MobileNetV2 on gemmini_fusable jointly mapped and fused by FFM
# (exact) and FADiff, each against the unfused run on the same Einsums and cost model. It writes
# out/quickstart.h5 (and its journal), prints the report's headline table (how much fusion saves,
# and which method finds it: FFM 0.951x of its unfused optimum, 13 groups fused) and writes the
# plots to out/quickstart_plots/. Extra arguments go to `mapfuse run` (e.g. --threads N, --quiet).
# The study alone: 60 CPU-s, 109 s wall on this 2-core machine under a load average of 9.5
# (README, "The main job").
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${MAPFUSE_BUILD_DIR:-$root/build}"
bash "$root/scripts/build.sh" "$build" Release
cd "$root"
# A fresh run each time: a journal left by an older checkout or build belongs to another study
# text or cost model, and `run` rightly refuses to resume it (docs/results.md).
rm -f out/quickstart.h5 out/quickstart.h5.journal
set +e
"$build/cli/mapfuse" run experiments/quickstart.toml --output out/quickstart.h5 "$@" >/dev/null
rc=$?
set -e
[ "$rc" -le 1 ] || exit "$rc"   # 2 bad input, 3 interrupted: nothing complete to report
"$build/cli/mapfuse" report out/quickstart.h5 --plots out/quickstart_plots
exit "$rc"
