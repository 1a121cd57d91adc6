#!/usr/bin/env bash
# Sets up (if needed), builds Release and runs the main job: the default study
# experiments/quickstart.toml. It writes out/quickstart.h5 (and its journal), prints the summary
# table, and writes the plots to out/quickstart_plots/. Extra arguments go to `mapfuse run`
# (e.g. --threads N, --quiet).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${MAPFUSE_BUILD_DIR:-$root/build}"
bash "$root/scripts/build.sh" "$build" Release
cd "$root"
set +e
"$build/cli/mapfuse" run experiments/quickstart.toml --output out/quickstart.h5 "$@" >/dev/null
rc=$?
set -e
[ "$rc" -le 1 ] || exit "$rc"   # 2 bad input, 3 interrupted: nothing complete to report
"$build/cli/mapfuse" report out/quickstart.h5 --plots out/quickstart_plots
exit "$rc"
