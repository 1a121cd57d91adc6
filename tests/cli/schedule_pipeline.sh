#!/usr/bin/env bash
# `mapfuse schedule --arch --workload --allocation --tile-costs`: Stream's 2-conv run rebuilt from
# its ONNX, the tpu_like_quad_core preset, its allocation and its own tile costs (the dump folder,
# then the table written from it) gives Stream's latency and energy; bad input exits 2 naming the
# file and key.
set -eu
bin="$1"
data="$2"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
onnx="$data/stream/classic_cb9dfc52/testing/workload/2_conv.onnx"
run="$data/stream/derived/coala/2conv_fused_fixed_k4"
cp "$(dirname "$0")/../fixtures/stream/2conv_k4_allocation.toml" "$tmp/alloc.toml"
check() {  # json-file
  /usr/bin/python3 - "$1" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["cts"] == 448, j["cts"]
assert j["edges"] == 3096, j["edges"]
assert j["latency_cc"] == 61004, j["latency_cc"]
assert abs(j["energy_pj"] - 43296172.624) <= 1e-9 * 43296172.624, j["energy_pj"]
assert abs(j["edp"] - 61004 * j["energy_pj"]) <= 1e-6 * j["edp"], j["edp"]
parts = j["energy_parts_pj"]
assert abs(sum(parts.values()) - j["energy_pj"]) <= 1e-9 * j["energy_pj"], parts
assert j["allocation"]["conv1"] == ["tpu_like_0", "tpu_like_1", "tpu_like_2", "tpu_like_3"], j["allocation"]
for stage in ("load", "tiles", "allocation", "tile_costs", "problem", "schedule"):
    assert j["seconds"][stage] >= 0, stage
PY
}
"$bin" schedule --arch tpu_like_quad_core --workload "$onnx" --mode fused --stacks 0-1 --allocation "$tmp/alloc.toml" \
  --tile-costs "$run" --write-tile-costs "$tmp/costs.csv" --json >"$tmp/a.json"
check "$tmp/a.json"
"$bin" schedule --arch tpu_like_quad_core --workload "$onnx" --mode fused --stacks 0-1 --allocation "$tmp/alloc.toml" \
  --tile-costs "$tmp/costs.csv" --json >"$tmp/b.json"
check "$tmp/b.json"
# The schedule file (--output) holds the 448 CTs.
"$bin" schedule --arch tpu_like_quad_core --workload "$onnx" --stacks 0-1 --allocation "$tmp/alloc.toml" \
  --tile-costs "$tmp/costs.csv" --output "$tmp/s.h5" >/dev/null
"$bin" report "$tmp/s.h5" --plots "$tmp/plots" | grep -q "448 CTs, 904 transfers and blocks"
# Text output.
"$bin" schedule --arch tpu_like_quad_core --workload "$onnx" --stacks 0-1 --allocation "$tmp/alloc.toml" \
  --tile-costs "$tmp/costs.csv" | grep -q "latency  61004 cc"
expect2() {  # pattern, then the command
  local pattern="$1"
  shift
  set +e
  "$@" 2>"$tmp/err" >/dev/null
  local rc=$?
  set -e
  [ "$rc" -eq 2 ] || { echo "expected exit 2, got $rc: $*"; cat "$tmp/err"; exit 1; }
  grep -q -- "$pattern" "$tmp/err" || { echo "missing '$pattern'"; cat "$tmp/err"; exit 1; }
}
# An unknown core in the allocation: file, line, key and a suggestion.
printf '[ops]\nmac = ["tpu_like_0", "tpu_like_1", "tpu_like_2", "tpu_like_9"]\n' >"$tmp/bad.toml"
expect2 "bad.toml:2.*ops.mac.*unknown core 'tpu_like_9'" "$bin" schedule --arch tpu_like_quad_core --workload "$onnx" \
  --stacks 0-1 --allocation "$tmp/bad.toml" --tile-costs "$tmp/costs.csv"
# A malformed cell in the table: file:line:column and the column's name.
/usr/bin/python3 - "$tmp/costs.csv" "$tmp/bad.csv" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
rows[2][rows[0].index("latency_cc")] = "fast"
csv.writer(open(sys.argv[2], "w"), lineterminator="\n").writerows(rows)
print(rows[0].index("latency_cc") + 1, file=open(sys.argv[2] + ".col", "w"))
PY
col=$(cat "$tmp/bad.csv.col")
expect2 "bad.csv:3:$col: latency_cc" "$bin" schedule --arch tpu_like_quad_core --workload "$onnx" --stacks 0-1 \
  --allocation "$tmp/alloc.toml" --tile-costs "$tmp/bad.csv"
expect2 "--mode" "$bin" schedule --arch tpu_like_quad_core --workload "$onnx" --mode fusd --allocation greedy \
  --tile-costs "$tmp/costs.csv"
echo "schedule_pipeline: ok"
