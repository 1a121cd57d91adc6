#!/usr/bin/env bash
# A schedule study comparing allocation methods (Stream's Fig. 13 in small): Stream's 2-conv
# network fused on tpu_like_quad_core with a tile-cost table whose latency halves with K (that of
# schedule_waco.sh), allocated by the GA (2 generations x 4, seeds 1 and 2), WACO with p = 1 and
# WACO with variable p. Units per (method, seed); each records search_seconds and the allocation
# chosen; a unit equals `mapfuse schedule --json` with the same settings; WACO's MILPs are solved
# to optimality; `mpirun -np 2` gives the same units; the report prints the table per method; a
# zero time limit and a GA knob on a WACO entry exit 2 naming the key.
set -eu
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader
bin="$1"
data="$2"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
onnx="$data/stream/classic_cb9dfc52/testing/workload/2_conv.onnx"
# Per CT of conv1 / conv2 on each tpu core: 1000 / 600 cc whole, halved with each halving of K.
cp "$(dirname "$0")/../fixtures/stream/2conv_halving_k_costs.csv" "$tmp/costs.csv"
common='workloads = ["'"$onnx"'"]
architectures = ["tpu_like_quad_core"]
stacks = "0-1"
tile_costs = "costs.csv"'
cat >"$tmp/s.toml" <<TOML
name = "methods_small"
[[schedule]]
$common
allocation = "ga"
generations = 2
population = 4
seeds = [1, 2]
[[schedule]]
$common
allocation = "waco"
max_parallelism = 1
time_limit = 20
[[schedule]]
$common
allocation = "waco"
time_limit = 20
TOML
mkdir -p "$tmp/local" "$tmp/mpi"
"$bin" run "$tmp/s.toml" --output "$tmp/local/s.h5" --quiet >/dev/null
mpirun --oversubscribe --bind-to none -np 2 "$bin" run "$tmp/s.toml" --output "$tmp/mpi/s.h5" --threads 1 --quiet \
  >/dev/null 2>"$tmp/mpi.err" || { cat "$tmp/mpi.err"; exit 1; }
cli() { "$bin" schedule --arch tpu_like_quad_core --workload "$onnx" --stacks 0-1 --tile-costs "$tmp/costs.csv" --json "$@"; }
cli --allocation ga --generations 2 --population 4 --seed 2 >"$tmp/ga2.json"
cli --allocation waco --time-limit 20 >"$tmp/waco.json"
/usr/bin/python3 - "$tmp/local/s.h5" "$tmp/mpi/s.h5" "$tmp/ga2.json" "$tmp/waco.json" <<'PY'
import h5py, json, math, sys
def load(path):
    f = h5py.File(path)
    units = f["units"][...]
    metrics = {}
    for m in f["metrics"][...]:
        metrics.setdefault(int(m["unit"]), {})[m["name"].decode()] = float(m["value"])
    trace = f["trace"][...] if "trace" in f else []
    out = {}
    for i, u in enumerate(units):
        m = metrics.get(i, {})
        t = [tuple(trace[k][1:]) for k in range(int(u["trace_offset"]), int(u["trace_offset"] + u["trace_count"]))]
        out[u["label"].decode()] = dict(status=int(u["status"]), msg=u["message"].decode(), method=u["method"].decode(),
                                        seed=int(u["seed"]), cycles=float(u["cycles"]), energy=float(u["energy_pj"]),
                                        alloc=u["best_mapping"].decode(), trace=t, m=m)
    return out
local, mpi = load(sys.argv[1]), load(sys.argv[2])
def strip(d):
    return {k: {**v, "m": {n: x for n, x in v["m"].items() if not n.endswith("seconds")}} for k, v in d.items()}
assert strip(local) == strip(mpi), "mpirun -np 2 differs from the local run"
base = "schedule 2_conv fused @ tpu_like_quad_core "
assert sorted(local) == sorted(base + x for x in ["ga seed 1", "ga seed 2", "waco_p1 seed 1", "waco seed 1"]), sorted(local)
for label, u in local.items():
    assert u["status"] == 0, (label, u["msg"])
    assert u["m"]["search_seconds"] >= 0 and u["cycles"] > 0, (label, u["m"])
    assert u["alloc"].startswith("conv1: tpu_like_") and "; conv2: tpu_like_" in u["alloc"], u["alloc"]
ga = local[base + "ga seed 2"]
assert (ga["method"], ga["seed"]) == ("ga", 2)
# The GA's best-so-far trace: generations + 1 rows, non-increasing, ending at the unit's EDP.
assert len(ga["trace"]) == 3, ga["trace"]
assert all(b[1] <= a[1] for a, b in zip(ga["trace"], ga["trace"][1:])), ga["trace"]
assert abs(ga["trace"][-1][1] - ga["cycles"] * ga["energy"]) <= 1e-12 * ga["trace"][-1][1]
assert 1 <= ga["m"]["ga_evaluations"] <= 4 + 2 * 4, ga["m"]
# The unit is `mapfuse schedule` with the same settings: totals and the allocation chosen.
for u, path in ((ga, sys.argv[3]), (local[base + "waco seed 1"], sys.argv[4])):
    j = json.load(open(path))
    assert u["cycles"] == j["latency_cc"] and abs(u["energy"] - j["energy_pj"]) <= 1e-9 * j["energy_pj"], (u, j["latency_cc"])
    want = "; ".join(l + ": " + ",".join(c) for l, c in j["allocation"].items())
    assert u["alloc"] == want, (u["alloc"], want)
# WACO: both stacks' MILPs optimal; variable p splits both convs four ways (schedule_waco.sh's
# 21,600 cc by hand), p = 1 puts each conv whole on one core.
w, p1 = local[base + "waco seed 1"], local[base + "waco_p1 seed 1"]
for u in (w, p1):
    assert u["m"]["waco_optimal_stacks"] == u["m"]["waco_stacks"] == 1 and u["m"]["waco_max_gap"] == 0, u["m"]
assert w["alloc"].count("tpu_like_") == 8 and p1["alloc"].count("tpu_like_") == 2, (w["alloc"], p1["alloc"])
assert w["cycles"] < p1["cycles"], (w["cycles"], p1["cycles"])
# Where the latency goes, recomputed from the stored schedules: the union of the CTs' intervals and
# the time only link-occupying transfers run.
f = h5py.File(sys.argv[1])
def union(iv):
    out = []
    for s, e in sorted(iv):
        if e <= s: continue
        if out and s <= out[-1][1]: out[-1][1] = max(out[-1][1], e)
        else: out.append([s, e])
    return out
for label, u in local.items():
    [name] = [n for n in f["schedules"] if n.startswith(label.split(" ", 1)[1].replace(" ", "_") + "_")]
    g = f["schedules"][name]
    busy = union([(t["start"], t["end"]) for t in g["tiles"][...]])
    moving = union([(t["start"], t["end"]) for t in g["transfers"][...] if t["occupies_links"]])
    only = sum(e - s for s, e in moving) - sum(max(0, min(e, b) - max(s, a)) for s, e in moving for a, b in busy)
    assert abs(u["m"]["compute_busy_cc"] - sum(e - s for s, e in busy)) <= 1e-6, (label, u["m"])
    assert abs(u["m"]["comm_only_cc"] - only) <= 1e-6 and 0 <= only <= u["cycles"], (label, only, u["m"])
    assert u["m"]["compute_busy_cc"] + only <= u["cycles"] + 1e-6, (label, u["m"])
PY
"$bin" report "$tmp/local/s.h5" >"$tmp/report.md"
grep -q "## Allocation methods per workload, architecture and mode" "$tmp/report.md"
grep -q "| 2_conv | tpu_like_quad_core | fused | ga | 2/2 |" "$tmp/report.md" || { cat "$tmp/report.md"; exit 1; }
grep -q "| 2_conv | tpu_like_quad_core | fused | waco_p1 | 1/1 |" "$tmp/report.md"
# Tile costs from a table: no mapper seconds ("-"); each row's EDP over the group's least.
/usr/bin/python3 - "$tmp/report.md" <<'PY'
import re, sys
rows = [l.split("|")[1:-1] for l in open(sys.argv[1]) if l.startswith("| 2_conv | tpu_like_quad_core | fused |")]
rows = [[c.strip() for c in r] for r in rows if len(r) == 12]
assert len(rows) == 3, rows
least = min(float(r[5]) for r in rows)
for r in rows:
    assert r[10] == "-", r
    assert abs(float(r[11].rstrip("x")) - float(r[5]) / least) < 2e-3, r
assert sum(r[11] == "1.000x" for r in rows) == 1, rows
PY
. "$(dirname "$0")/lib/expect.sh"
fail=0
set +e
sed 's/^time_limit = 20$/time_limit = 0/' "$tmp/s.toml" >"$tmp/bad1.toml"
expect time-limit 2 "bad1.toml.*time_limit.*positive number of seconds" -- "$bin" run "$tmp/bad1.toml" --output "$tmp/b1.h5" --quiet
sed 's/^max_parallelism = 1$/population = 8/' "$tmp/s.toml" >"$tmp/bad2.toml"
expect ga-knob 2 "bad2.toml.*population.*a knob of allocation = \"ga\"" -- "$bin" run "$tmp/bad2.toml" --output "$tmp/b2.h5" --quiet
exit $fail
