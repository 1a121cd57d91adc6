#!/usr/bin/env bash
# A schedule study ([[schedule]] entries, "schedule" units): Stream's 2-conv network fused and layer
# by layer on tpu_like_quad_core with Stream's allocation and mapfuse's tile costs. Totals land as
# metrics, each schedule under /schedules in the study file; `mpirun -np 2` gives the same file
# contents as the local run; the report prints the totals and draws the Gantt and memory plots;
# an unreadable workload fails its unit with the reason; a bad mode exits 2 naming the key.
set -eu
# Open MPI refuses to run as root (CI runs as root) unless told; shared memory between local ranks.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader
bin="$1"
data="$2"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
onnx="$data/stream/classic_cb9dfc52/testing/workload/2_conv.onnx"
cp "$(dirname "$0")/../fixtures/stream/2conv_k4_allocation.toml" "$tmp/alloc.toml"
cat >"$tmp/s.toml" <<TOML
name = "schedule_small"
[[schedule]]
workloads = ["$onnx", "$tmp/missing.onnx"]
architectures = ["tpu_like_quad_core"]
modes = ["fused", "lbl"]
allocation = "alloc.toml"
stacks = "0-1"
TOML
mkdir -p "$tmp/local" "$tmp/mpi"
# Exit status 1: two units fail (the missing workload), by design.
rc=0; "$bin" run "$tmp/s.toml" --output "$tmp/local/s.h5" --quiet >/dev/null || rc=$?
[ "$rc" -eq 1 ] || { echo "local run: expected exit 1 (failed units), got $rc"; exit 1; }
rc=0; mpirun --oversubscribe --bind-to none -np 2 "$bin" run "$tmp/s.toml" --output "$tmp/mpi/s.h5" --threads 1 --quiet \
  >/dev/null 2>"$tmp/mpi.err" || rc=$?
[ -f "$tmp/mpi/s.h5" ] || { echo "mpirun: no study file (exit $rc)"; exit 1; }
"$bin" schedule --arch tpu_like_quad_core --workload "$onnx" --mode fused --stacks 0-1 --allocation "$tmp/alloc.toml" \
  --json >"$tmp/cli.json"
/usr/bin/python3 - "$tmp/local/s.h5" "$tmp/mpi/s.h5" "$tmp/cli.json" <<'PY'
import h5py, json, sys
def load(path):
    f = h5py.File(path)
    units = f["units"][...]
    metrics = {}
    for m in f["metrics"][...]:
        metrics.setdefault(int(m["unit"]), {})[m["name"].decode()] = float(m["value"])
    out = {}
    for i, u in enumerate(units):
        # Timings, and the tile-cost cache's counters (what the process had mapped before), vary.
        m = {k: v for k, v in metrics.get(i, {}).items()
             if not k.endswith("seconds") and not k.startswith("tile_cost_cache_") and k != "tile_cost_mapper_calls"}
        out[u["label"].decode()] = (int(u["status"]), u["message"].decode(), u["energy_pj"], u["cycles"], m)
    sched = {}
    for name, g in f["schedules"].items():
        sched[name] = (g.attrs["latency_cc"], g.attrs["energy_pj"], g["tiles"][...].tolist(),
                       g["transfers"][...]["start"].tolist(), g["memory_trace"][...].tolist())
    return out, sched
local, ls = load(sys.argv[1])
mpi, ms = load(sys.argv[2])
assert local == mpi, "mpirun -np 2 differs from the local run"
assert ls == ms, "schedules differ between mpirun -np 2 and the local run"
assert len(local) == 4, sorted(local)
fused = local["schedule 2_conv fused @ tpu_like_quad_core"]
lbl = local["schedule 2_conv lbl @ tpu_like_quad_core"]
for st, msg, e, c, m in (fused, lbl):
    assert st == 0, msg
    parts = sum(v for k, v in m.items() if k.startswith("energy_") and k.endswith("_pj") and k != "energy_pj")
    assert abs(parts - e) <= 1e-9 * e and m["energy_pj"] == e and m["latency_cc"] == c > 0, m
bad = local["schedule missing fused @ tpu_like_quad_core"]
assert bad[0] != 0 and "missing.onnx" in bad[1], bad
# The study unit is `mapfuse schedule` with the same settings.
j = json.load(open(sys.argv[3]))
assert fused[3] == j["latency_cc"] and abs(fused[2] - j["energy_pj"]) <= 1e-9 * j["energy_pj"], (fused, j["latency_cc"])
assert fused[4]["cts"] == 448 and lbl[4]["cts"] == 2 * 4, (fused[4]["cts"], lbl[4]["cts"])
assert len(ls) == 2, sorted(ls)
for name, (lat, e, tiles, starts, mem) in ls.items():
    assert len(tiles) == (448 if "fused" in name else 8) and 0 < max(t[5] for t in tiles) <= lat, name
PY
"$bin" report "$tmp/local/s.h5" --plots "$tmp/plots" >"$tmp/report.md" 2>"$tmp/report.err"
grep -q "## Schedules (COALA)" "$tmp/report.md"
grep -q "| schedule 2_conv fused @ tpu_like_quad_core | done |" "$tmp/report.md"
grep -q "failed: .*missing.onnx" "$tmp/report.md"
grep -q "## Schedule 2_conv_fused_@_tpu_like_quad_core_" "$tmp/report.md"
ls "$tmp/plots"/gantt_2_conv_fused_*.png "$tmp/plots"/memory_2_conv_lbl_*.png >/dev/null
# Bad input: the key and the expected values.
sed 's/modes = \["fused", "lbl"\]/modes = ["fusd"]/' "$tmp/s.toml" >"$tmp/bad.toml"
set +e
"$bin" run "$tmp/bad.toml" --output "$tmp/bad.h5" --quiet >/dev/null 2>"$tmp/err"
rc=$?
set -e
[ "$rc" -eq 2 ] || { echo "expected exit 2, got $rc"; cat "$tmp/err"; exit 1; }
grep -q "bad.toml.*modes.*unknown mode 'fusd'.*did you mean 'fused'" "$tmp/err" || { cat "$tmp/err"; exit 1; }
echo "schedule_study: ok"
