#!/usr/bin/env bash
# GET-fusion's GNN from the command line: `partition --split gnne|pg|rg` runs on the built-in models,
# `get-train-explainer` trains an explainer for a given classifier, and a missing, corrupt,
# wrong-kind, wrong-scheme or wrong-classifier model file is bad input (exit status 2, the file named).
# Usage: get_gnn.sh <mapfuse binary> <shared data dir>
set -eu
bin="$1"
export MAPFUSE_SHARED_DATA="$2"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
expect2() {  # expect2 <message fragment> <args...>
  local want="$1"; shift
  set +e
  "$bin" "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  set -e
  [ "$rc" -eq 2 ] || fail "exit $rc (expected 2) for: $*"
  grep -qF -- "$want" "$tmp/err" || fail "no '$want' in: $(cat "$tmp/err")"
}
# libtorch loads only with a GNN (docs/get.md): the binary does not link it; without its module a
# GNN run fails naming the module and where it looked, and a run without a GNN does not need it.
if ldd "$bin" | grep -q torch; then fail "the binary links libtorch"; fi
set +e
MAPFUSE_TORCH_MODULE="$tmp/none.so" "$bin" partition --workload resnet18 --split gnne --budget 1 >/dev/null 2>"$tmp/err"
rc=$?
set -e
[ "$rc" -ne 0 ] || fail "a GNN run without the libtorch module exited 0"
grep -qF "libmapfuse_torch.so" "$tmp/err" && grep -qF "$tmp/none.so: no such file" "$tmp/err" ||
  fail "no module message: $(cat "$tmp/err")"
MAPFUSE_TORCH_MODULE="$tmp/none.so" "$bin" partition --workload resnet18 --search rs --split cut --budget 5 --json \
  >/dev/null || fail "a run without a GNN needed the libtorch module"
"$bin" partition --workload resnet18 --search rs --split gnne --budget 5 --json >"$tmp/ok.json"
grep -q '"split": "gnne"' "$tmp/ok.json" || fail "no gnne run"
expect2 "$tmp/none.gnn" partition --workload resnet18 --split gnne --gnn-model "$tmp/none.gnn"
printf 'PK\003\004 not a model' >"$tmp/zip.gnn"
expect2 "$tmp/zip.gnn:1: not a mapfuse GNN model file" partition --workload resnet18 --split gnne --gnn-model "$tmp/zip.gnn"
"$bin" get-train --scheme brr --networks squeezenet1_0 --groups 10 --epochs 1 --hidden 8 --out "$tmp/m" >/dev/null
expect2 "trained for the brr scheme; this run needs a lbdf model" \
  partition --workload resnet18 --scheme lbdf --split gnne --gnn-model "$tmp/m/gnn_brr.gnn"
head -c 2000 "$tmp/m/gnn_brr.gnn" >"$tmp/cut.gnn"
expect2 "$tmp/cut.gnn" partition --workload resnet18 --scheme brr --split gnne --gnn-model "$tmp/cut.gnn"
for e in pg rg; do
  "$bin" partition --workload resnet18 --search rs --split $e --budget 5 --json >"$tmp/$e.json"
  grep -q "\"split\": \"$e\"" "$tmp/$e.json" || fail "no $e run"
done
"$bin" get-train-explainer --explainer pg --scheme brr --gnn-model "$tmp/m/gnn_brr.gnn" --networks squeezenet1_0 \
  --groups 10 --epochs 1 --out "$tmp/m" >/dev/null
"$bin" partition --workload resnet18 --scheme brr --search rs --split pg --budget 3 --gnn-model "$tmp/m/gnn_brr.gnn" \
  --pg-model "$tmp/m/pg_brr.gnn" >/dev/null || fail "pg with its own classifier"
expect2 "$tmp/m/pg_brr.gnn: the PGExplainer was trained against a 4-layer, 8-hidden classifier; this run's has 4 layers and 128 hidden" \
  partition --workload resnet18 --scheme brr --split pg --pg-model "$tmp/m/pg_brr.gnn"
expect2 "$tmp/m/pg_brr.gnn:1: this is a PGExplainer model ('mapfuse-pg 1'); expected a RG-Explainer model" \
  partition --workload resnet18 --scheme brr --split rg --gnn-model "$tmp/m/gnn_brr.gnn" --rg-model "$tmp/m/pg_brr.gnn"
expect2 "this is a GNN classifier model" \
  partition --workload resnet18 --scheme brr --split pg --gnn-model "$tmp/m/gnn_brr.gnn" --pg-model "$tmp/m/gnn_brr.gnn"
expect2 "trained for the brr scheme; this run needs a lbdf model" \
  partition --workload resnet18 --scheme lbdf --split pg --pg-model "$tmp/m/pg_brr.gnn"
expect2 "$tmp/none.pg" partition --workload resnet18 --split pg --pg-model "$tmp/none.pg"
expect2 "unknown explainer 'gnne'; expected pg or rg" get-train-explainer --explainer gnne --out "$tmp/x"
echo "get_gnn: ok"
