#!/usr/bin/env bash
# `mapfuse schedule --allocation ga`: Stream's 2-conv network fused on tpu_like_quad_core, tile
# costs from the mapper for every (CT, core), a small NSGA-II (4 generations x 8 individuals). The
# JSON has the allocation chosen, its latency, energy and EDP (equal to the trace's best EDP: a
# fitness is a full COALA schedule of the same allocation), the budget, seed and per-generation
# trace; a second run with the same seed gives the same JSON (timings aside); a population of 1 and
# negative generations are refused with exit status 2.
set -eu
bin="$1"
data="$2"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
onnx="$data/stream/classic_cb9dfc52/testing/workload/2_conv.onnx"
for run in a b; do
  "$bin" schedule --arch tpu_like_quad_core --workload "$onnx" --stacks 0-1 --allocation ga --generations 4 \
    --population 8 --seed 3 --json >"$tmp/$run.json"
done
/usr/bin/python3 - "$tmp/a.json" "$tmp/b.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert a["cts"] == 448, a["cts"]
assert a["edp"] == a["latency_cc"] * a["energy_pj"], a
assert a["search_seconds"] >= 0
ga = a["ga"]
assert (ga["generations"], ga["population"], ga["seed"]) == (4, 8, 3), ga
assert 1 <= ga["evaluations"] <= 8 + 4 * 8, ga
assert len(ga["trace"]) == 5 and [t["generation"] for t in ga["trace"]] == list(range(5)), ga["trace"]
for p, q in zip(ga["trace"], ga["trace"][1:]):
    assert q["best_edp"] <= p["best_edp"] and q["evaluations"] >= p["evaluations"], (p, q)
assert abs(ga["trace"][-1]["best_edp"] - a["edp"]) <= 1e-12 * a["edp"], (ga["trace"][-1], a["edp"])
front = ga["front"]
assert any(abs(p["edp"] - a["edp"]) <= 1e-12 * a["edp"] for p in front), front
for p in front:
    for q in front:
        assert not (q["latency_cc"] <= p["latency_cc"] and q["energy_pj"] <= p["energy_pj"] and
                    (q["latency_cc"] < p["latency_cc"] or q["energy_pj"] < p["energy_pj"])), (p, q)
# Every layer's four K groups on tpu_like cores.
assert set(len(v) for v in a["allocation"].values()) == {4}, a["allocation"]
assert all(c.startswith("tpu_like_") for v in a["allocation"].values() for c in v), a["allocation"]
for j in (a, b):
    del j["seconds"], j["search_seconds"], j["tile_costs"]["seconds"]
assert a == b, "two runs with the same seed differ"
PY
set +e
fail=0
. "$(dirname "$0")/lib/expect.sh"
expect population_1 2 "--population.*at least 2" -- "$bin" schedule --arch tpu_like_quad_core --workload "$onnx" \
  --stacks 0-1 --allocation ga --population 1
expect generations_negative 2 "--generations" -- "$bin" schedule --arch tpu_like_quad_core --workload "$onnx" \
  --stacks 0-1 --allocation ga --generations -1
[ "$fail" -eq 0 ] || exit 1
echo "schedule_ga: ok"
