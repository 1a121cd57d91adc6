#!/usr/bin/env bash
# `mapfuse schedule` without --tile-costs: every unique (CT shape, core) is costed by mapfuse's own
# mapper (map_tile_costs). Stream's 2-conv network fused on tpu_like_quad_core with Stream's
# allocation (K over the four cores): 448 CTs, the mapper's statistics reported, a positive
# latency, energy parts that sum to the total, and the same JSON (timings aside) on a second run.
set -eu
bin="$1"
data="$2"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
onnx="$data/stream/classic_cb9dfc52/testing/workload/2_conv.onnx"
cp "$(dirname "$0")/../fixtures/stream/2conv_k4_allocation.toml" "$tmp/alloc.toml"
for run in a b; do
  "$bin" schedule --arch tpu_like_quad_core --workload "$onnx" --mode fused --stacks 0-1 --allocation "$tmp/alloc.toml" \
    --json >"$tmp/$run.json"
done
/usr/bin/python3 - "$tmp/a.json" "$tmp/b.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert a["cts"] == 448, a["cts"]
assert a["latency_cc"] > 0 and a["energy_pj"] > 0, (a["latency_cc"], a["energy_pj"])
parts = a["energy_parts_pj"]
assert abs(sum(parts.values()) - a["energy_pj"]) <= 1e-9 * a["energy_pj"], parts
assert parts["cn_onchip"] > 0, parts
tc = a["tile_costs"]
assert tc["source"] == "mapper", tc
assert tc["tiles"] == 448, tc
# Two conv layers, each cut into edge and inner row tiles: a handful of keys, far fewer than CTs.
assert 2 <= tc["unique_keys"] <= 16, tc
assert 1 <= tc["mapper_problems"] <= tc["unique_keys"] and tc["mapper_calls"] >= tc["mapper_problems"], tc
assert tc["mappings_evaluated"] > 0 and tc["seconds"] >= 0, tc
# The latency lies within 10 % of Stream's own (61004 cc on its ZigZag tile costs): same CTs,
# allocation and scheduler; only the per-tile model differs.
assert abs(a["latency_cc"] - 61004) <= 0.10 * 61004, a["latency_cc"]
for j in (a, b):
    del j["seconds"]
    del j["search_seconds"]
    del j["tile_costs"]["seconds"]
assert a == b, "two runs differ"
PY
# Text output names the mapper's figures.
"$bin" schedule --arch tpu_like_quad_core --workload "$onnx" --stacks 0-1 --allocation "$tmp/alloc.toml" |
  grep -q "tile costs: mapper, 448 CTs, .* unique (CT shape, core) keys"
echo "schedule_mapper: ok"
