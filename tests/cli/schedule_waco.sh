#!/usr/bin/env bash
# `mapfuse schedule --allocation waco`: Stream's 2-conv network fused on tpu_like_quad_core with a
# tile-cost table whose latency halves with each halving of K. The steady state (one row of each
# conv, 54 iterations) is best split four ways: lat = 54 * (250 + 150) = 21,600 cc by hand; with
# --max-parallelism 1 the two rows pipeline on two cores: 54 * 1600 - 53 * 600 = 54,600 cc.
set -eu
bin="$1"
data="$2"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
onnx="$data/stream/classic_cb9dfc52/testing/workload/2_conv.onnx"
# Per CT of conv1 / conv2 on each tpu core: 1000 / 600 cc whole, halved with each halving of K.
cp "$(dirname "$0")/../fixtures/stream/2conv_halving_k_costs.csv" "$tmp/costs.csv"
run() { "$bin" schedule --arch tpu_like_quad_core --workload "$onnx" --stacks 0-1 --allocation waco \
  --tile-costs "$tmp/costs.csv" "$@"; }
run --json >"$tmp/a.json"
run --json --max-parallelism 1 --time-limit 20 --seed 3 >"$tmp/b.json"
/usr/bin/python3 - "$tmp/a.json" "$tmp/b.json" <<'PY'
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
for j in (a, b):
    assert j["latency_cc"] > 0 and j["energy_pj"] > 0, j
    assert abs(j["edp"] - j["latency_cc"] * j["energy_pj"]) <= 1e-9 * j["edp"]
    assert j["search_seconds"] >= 0
    st = j["waco"]["stacks"]
    assert len(st) == 1 and st[0]["optimal"] and st[0]["gap"] == 0, st
    assert st[0]["steady_tiles"] == 2 and st[0]["iterations"] == 54, st
ss = a["waco"]["steady_state"]
assert ss["tiles"] == 112 and ss["steady_tiles"] == 2, ss
assert a["waco"]["stacks"][0]["objective_cc"] == 21600, a["waco"]["stacks"][0]
assert a["waco"]["stacks"][0]["parallelism"] == {"conv1": 4, "conv2": 4}
assert sorted(a["allocation"]["conv1"]) == ["tpu_like_0", "tpu_like_1", "tpu_like_2", "tpu_like_3"], a["allocation"]
assert a["cts"] == 448, a["cts"]
assert b["waco"]["stacks"][0]["objective_cc"] == 54600, b["waco"]["stacks"][0]
assert b["waco"]["stacks"][0]["parallelism"] == {"conv1": 1, "conv2": 1}
assert b["cts"] == 112 and len(b["allocation"]["conv1"]) == 1, b["allocation"]
assert b["allocation"]["conv1"] != b["allocation"]["conv2"], b["allocation"]
PY
run | grep -q "^waco: steady states 2 of 112 CTs"
. "$(dirname "$0")/lib/expect.sh"
fail=0
set +e
expect time-limit 2 "--time-limit.*positive" -- run --time-limit 0
expect max-parallelism 2 "--max-parallelism" -- run --max-parallelism -1
exit $fail
