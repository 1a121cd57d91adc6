#!/usr/bin/env bash
# `mapfuse eval --json` on the 2-level matmul of tests/unit/test_cost_model.cpp: the JSON carries
# energy_pj, cycles and per-level access counts with the hand-computed values.
set -eu
bin="$1"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fixtures="$(cd "$(dirname "$0")/../fixtures" && pwd)"
"$bin" eval --arch "$fixtures/two_level.toml" --workload "$fixtures/mm.toml" \
  --mapping "DRAM[A,B,Z] M=4 | Buffer[A,B,Z] N=2 K=3" --json >"$tmp/out.json"
/usr/bin/python3 - "$tmp/out.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["valid"] is True, j
assert abs(j["energy_pj"] - (12 + 64 + 36 + 72 + 2600)) < 1e-9, j["energy_pj"]
assert j["cycles"] == 27, j["cycles"]
lv = {l["name"]: l for l in j["levels"]}
assert lv["DRAM"]["tensors"]["A"]["reads"] == 12
assert lv["DRAM"]["tensors"]["Z"]["updates"] == 8
assert lv["Buffer"]["tensors"]["Z"]["reads"] == 16
assert lv["Buffer"]["accesses"]["total"] == 106
print("1 passed, 0 failed")
PY
# Human-readable output names the bound and the levels.
"$bin" eval --arch "$fixtures/two_level.toml" --workload "$fixtures/mm.toml" \
  --mapping "DRAM[A,B,Z] M=4 | Buffer[A,B,Z] N=2 K=3" | grep -q "Buffer-bound"
