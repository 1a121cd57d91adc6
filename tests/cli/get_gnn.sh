#!/usr/bin/env bash
# GET-fusion's GNN from the command line: `partition --split gnne` runs on the built-in model, and a
# missing, corrupt or wrong-scheme model file is bad input (exit status 2, the file named).
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
echo "get_gnn: ok"
