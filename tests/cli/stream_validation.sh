#!/usr/bin/env bash
# Stream Table 2 (docs/validation.md): the smallest of the three silicon-validation cases, the
# ResNet-50 segment on the 4x4 AiMC preset, fused, with mapfuse's own tile costs, gives a well-formed
# schedule. Checks the JSON's structure and invariants, not the match with the chip.
set -eu
bin="$1"
root="$(cd "$(dirname "$0")/../.." && pwd)"
val="$root/experiments/stream_validation"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin" schedule --arch stream_val_aimc4x4 --workload "$val/resnet50_segment.toml" --mode fused --stacks 0-3 \
  --granularity stream:4 --allocation "$val/aimc4x4_resnet50_allocation.toml" --json >"$tmp/a.json"
/usr/bin/python3 - "$tmp/a.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["arch"] == "stream_val_aimc4x4", j["arch"]
assert j["tile_costs"]["source"] == "mapper", j["tile_costs"]
# 28 output rows; the three convs split in 4 over their CIMUs, the add whole
assert j["cts"] == 28 * (3 * 4 + 1), j["cts"]
assert j["stacks"] == 1, j["stacks"]
assert j["allocation"]["layer2.1.conv2"] == ["cimu4", "cimu5", "cimu6", "cimu7"], j["allocation"]
assert j["allocation"]["layer2.1.add"] == ["cimu12"], j["allocation"]
# a conv2 CIMU reads 28 x 28 input vectors of 1152 bytes at 144 bytes per cycle (bit-serial)
assert j["latency_cc"] >= 28 * 28 * 8, j["latency_cc"]
parts = j["energy_parts_pj"]
assert abs(sum(parts.values()) - j["energy_pj"]) <= 1e-9 * j["energy_pj"], parts
assert j["energy_pj"] > 0
mem = j["peak_memory_bits"]
assert len(mem) == 17, len(mem)  # 16 CIMUs and the DRAM
# on chip, no CIMU holds more than its activation buffer and its array (128 KiB + 36 KiB)
assert all(0 <= m <= (128 + 36) * 1024 * 8 for m in mem[:16]), mem
assert max(mem[:12]) > 0, mem
PY
echo "stream_validation: ok"
