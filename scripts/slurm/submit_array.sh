#!/usr/bin/env bash
# Submits a study as a job array of N slices (mapfuse_array.sbatch) and the merge of their parts
# into OUT (mapfuse_merge.sbatch), which starts only when every array task has succeeded
# (--dependency=afterok). Prints the two job ids.
#
#   scripts/slurm/submit_array.sh STUDY OUT N [sbatch options for the array tasks...]
#   scripts/slurm/submit_array.sh experiments/gemmini_scaleup.toml out/gemmini_scaleup.h5 8 --cpus-per-task=4 --time=1:00:00
#
# Environment: MAPFUSE (default <submit dir>/build/cli/mapfuse), WAIT=1 to wait for the merge job
# and exit with its status. A task that ends with failed units (exit 1) leaves the merge job
# unstartable; Slurm then cancels it (--kill-on-invalid-dep=yes), and `mapfuse merge` can be run
# by hand (it keeps failed units, as `mapfuse run` does).
set -euo pipefail
if [ $# -lt 3 ]; then
  echo "usage: $0 STUDY OUT N [sbatch options for the array tasks...]" >&2
  exit 2
fi
study=$1 out=$2 n=$3
shift 3
case $n in '' | *[!0-9]* | 0*) echo "N must be a positive integer, not '$n'" >&2; exit 2 ;; esac
[ -r "$study" ] || { echo "$study: cannot read the study" >&2; exit 2; }
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p "$(dirname "$out")"
export STUDY=$study OUT=$out SLICES=$n
# --parsable prints "<job id>[;<cluster>]".
array=$(sbatch --parsable --array="0-$((n - 1))" --export=ALL "$@" "$here/mapfuse_array.sbatch")
array=${array%%;*}
echo "array job $array: $n slices of $study"
merge_opts=(--parsable --dependency="afterok:$array" --kill-on-invalid-dep=yes --export=ALL)
if [ -n "${WAIT:-}" ]; then
  sbatch --wait "${merge_opts[@]}" "$here/mapfuse_merge.sbatch" | sed 's/^\([0-9]*\).*/merge job \1 -> '"${out//\//\\/}"'/'
  exit "${PIPESTATUS[0]}"
fi
merge=$(sbatch "${merge_opts[@]}" "$here/mapfuse_merge.sbatch")
echo "merge job ${merge%%;*} -> $out (after array job $array)"
