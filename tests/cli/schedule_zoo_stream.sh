#!/usr/bin/env bash
# The zoo's Xception and first MobileBERT block (Stream's Figs. 14/15 workloads) through the whole
# `mapfuse schedule` pipeline on tpu_like_quad_core with the greedy allocation. CT counts by hand
# (stream_tiling: one CT per output row in fused stacks, MAC layers split in 4 over the cores):
#   mobilebert_block fused, one stack: 18 MAC layers x 128 tokens x 4 + (6 adds + softmax) x 128
#   = 10112; layer by layer: 18 x 4 + 7 = 79.
# Xception fused: 10385 CTs in 13 automatic stacks (measured when it was added).
set -eu
bin="$1"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for run in "mobilebert_block fused" "mobilebert_block lbl" "xception fused"; do
  set -- $run
  "$bin" schedule --arch tpu_like_quad_core --workload "$1" --mode "$2" --allocation greedy --json >"$tmp/$1_$2.json"
done
/usr/bin/python3 - "$tmp" <<'PY'
import json, sys
d = sys.argv[1]
expect = {"mobilebert_block_fused": (10112, 1), "mobilebert_block_lbl": (79, 25), "xception_fused": (10385, 13)}
for name, (cts, stacks) in expect.items():
    j = json.load(open(f"{d}/{name}.json"))
    assert j["cts"] == cts, (name, j["cts"])
    assert j["stacks"] == stacks, (name, j["stacks"])
    assert j["latency_cc"] > 0 and j["energy_pj"] > 0, name
    parts = j["energy_parts_pj"]
    assert abs(sum(parts.values()) - j["energy_pj"]) <= 1e-9 * j["energy_pj"], (name, parts)
    assert j["tile_costs"]["source"] == "mapper", name
PY
