#!/usr/bin/env bash
# Rebuilds GET-fusion's shipped GNN models (presets/get/gnn_<scheme>.gnn, pg_<scheme>.gnn,
# rg_<scheme>.gnn): the classifier with `mapfuse get-train`, then PGExplainer and RG-Explainer
# against it with `mapfuse get-train-explainer`, seeded and on one thread (docs/get.md).
#
#   scripts/rebuild_get_models.sh [--check] [lbdf] [brr]     (both schemes when none is named)
#
# The shipped files were trained under Debian's reference BLAS; OpenBLAS, which setup installs for
# speed, rounds libtorch's sums differently and trains other (equally accurate) weights. So the
# training runs with the reference BLAS first on the library path, and then gives the shipped bytes.
# Without --check the models are written to presets/get (rebuild afterwards: they are embedded in
# the binary); with --check they go to a temporary directory and are compared with the shipped
# ones byte for byte (exit 1 on a difference). Needs the ONNX networks ($MAPFUSE_SHARED_DATA, by
# default ../shared/data) and the build (MAPFUSE_BUILD_DIR, default build/). About 6 CPU-minutes
# for LBDF and 15 for BRR on this machine.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${MAPFUSE_BUILD_DIR:-$root/build}/cli/mapfuse"
check=0
schemes=()
for a in "$@"; do
  case "$a" in
    --check) check=1 ;;
    lbdf|brr) schemes+=("$a") ;;
    *) echo "rebuild_get_models.sh: unknown argument '$a' (expected --check, lbdf or brr)" >&2; exit 2 ;;
  esac
done
[ ${#schemes[@]} -gt 0 ] || schemes=(lbdf brr)
[ -x "$bin" ] || { echo "rebuild_get_models.sh: $bin not found; build first (scripts/build.sh)" >&2; exit 2; }
blas=/usr/lib/x86_64-linux-gnu/blas
lapack=/usr/lib/x86_64-linux-gnu/lapack
[ -e "$blas/libblas.so.3" ] || { echo "rebuild_get_models.sh: the reference BLAS ($blas/libblas.so.3, package libblas3) is missing" >&2; exit 2; }
export MAPFUSE_SHARED_DATA="${MAPFUSE_SHARED_DATA:-$root/../shared/data}"
export OMP_NUM_THREADS=1
export LD_LIBRARY_PATH="$blas:$lapack${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
if [ "$check" = 1 ]; then
  out="$(mktemp -d)"
  trap 'rm -rf "$out"' EXIT
else
  out="$root/presets/get"
fi
status=0
for s in "${schemes[@]}"; do
  "$bin" get-train --scheme "$s" --out "$out"
  # The explainers are trained against this scheme's classifier: the one just written.
  for ex in pg rg; do
    "$bin" get-train-explainer --explainer "$ex" --scheme "$s" --gnn-model "$out/gnn_$s.gnn" --out "$out"
  done
  if [ "$check" = 1 ]; then
    for f in "gnn_$s.gnn" "pg_$s.gnn" "rg_$s.gnn"; do
      if cmp -s "$out/$f" "$root/presets/get/$f"; then echo "$f: identical to the shipped file"
      else echo "$f: DIFFERS from the shipped file" >&2; status=1; fi
    done
  fi
done
[ "$check" = 1 ] || echo "wrote the models to $out; rebuild (cmake --build build) to embed them"
exit "$status"
