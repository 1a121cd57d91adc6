#!/usr/bin/env bash
# The tile-cost cache of a schedule study (docs/studies.md, "Tile-cost cache"): Stream's 2-conv
# network with mapper costs on tpu_like_quad_core and on a copy whose cores are renamed (the same
# cores: their entries are shared), greedy and WACO. Four runs, local and `mpirun -np 2`, each
# cold (no cache file) and warm (the first run's file): the same units, metrics (timings and cache
# counters aside) and schedules in all four study files; the cold runs' cache files are the same
# bytes; a warm run maps nothing; WACO's phases and the renamed system hit the cache even cold. A
# cache of another mapper version is replaced with a warning; a corrupt one exits 2 naming the
# file and line; `mapfuse schedule --tile-cache` finds everything on its second run. A run killed
# during a unit keeps the per-tile searches that unit finished (--tile-cache-every).
set -eu
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader
bin="$1"
data="$2"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
onnx="$data/stream/classic_cb9dfc52/testing/workload/2_conv.onnx"
"$bin" arch tpu_like_quad_core --toml | sed 's/tpu_like_quad_core/renamed_quad/; s/"tpu_like_\([0-9]\)"/"renamed_\1"/g' >"$tmp/renamed.toml"
grep -q '"renamed_0"' "$tmp/renamed.toml"
cat >"$tmp/s.toml" <<TOML
name = "tile_cache"
[[schedule]]
workloads = ["$onnx"]
architectures = ["tpu_like_quad_core", "renamed.toml"]
allocation = "greedy"
stacks = "0-1"
[[schedule]]
workloads = ["$onnx"]
architectures = ["tpu_like_quad_core"]
allocation = "waco"
time_limit = 20
stacks = "0-1"
TOML
mkdir -p "$tmp/cold" "$tmp/warm" "$tmp/mpi_cold" "$tmp/mpi_warm"
mpi() { mpirun --oversubscribe --bind-to none -np 2 "$bin" run "$tmp/s.toml" --threads 1 --quiet "$@" >/dev/null 2>"$tmp/mpi.err" \
  || { cat "$tmp/mpi.err"; exit 1; }; }
"$bin" run "$tmp/s.toml" --output "$tmp/cold/s.h5" --threads 1 --quiet >/dev/null
cp "$tmp/cold/s.h5.tilecache" "$tmp/warm.tilecache"
"$bin" run "$tmp/s.toml" --output "$tmp/warm/s.h5" --tile-cache "$tmp/warm.tilecache" --quiet >/dev/null
mpi --output "$tmp/mpi_cold/s.h5"
cp "$tmp/cold/s.h5.tilecache" "$tmp/mpi_warm/s.h5.tilecache"
mpi --output "$tmp/mpi_warm/s.h5"
cmp "$tmp/cold/s.h5.tilecache" "$tmp/mpi_cold/s.h5.tilecache"   # the same entries, sorted: the same bytes
cmp "$tmp/cold/s.h5.tilecache" "$tmp/warm.tilecache"            # a warm run adds nothing
head -1 "$tmp/cold/s.h5.tilecache" | grep -q "^mapfuse-tile-cost-cache format=1 mapper=[0-9]* model=[0-9a-f]\{16\}$"
/usr/bin/python3 - "$tmp" <<'PY'
import h5py, sys
tmp = sys.argv[1]
def load(run):
    f = h5py.File(f"{tmp}/{run}/s.h5")
    metrics = {}
    for m in f["metrics"][...]:
        metrics.setdefault(int(m["unit"]), {})[m["name"].decode()] = float(m["value"])
    units, counters = {}, {}
    for i, u in enumerate(f["units"][...]):
        m = metrics.get(i, {})
        label = u["label"].decode()
        assert int(u["status"]) == 0, (run, label, u["message"])
        counters[label] = (m["tile_cost_cache_hits"], m["tile_cost_cache_misses"])
        keep = {k: v for k, v in m.items()
                if not k.endswith("seconds") and not k.startswith("tile_cost_cache_") and k != "tile_cost_mapper_calls"}
        units[label] = (u["energy_pj"], u["cycles"], u["best_mapping"].decode(), keep)
    sched = {name: (g.attrs["latency_cc"], g.attrs["energy_pj"], g["tiles"][...].tolist(), g["transfers"][...].tolist())
             for name, g in f["schedules"].items()}
    return units, sched, counters
runs = {r: load(r) for r in ("cold", "warm", "mpi_cold", "mpi_warm")}
for r in ("warm", "mpi_cold", "mpi_warm"):
    assert runs[r][0] == runs["cold"][0], f"{r}: units differ from the cold local run"
    assert runs[r][1] == runs["cold"][1], f"{r}: schedules differ from the cold local run"
assert len(runs["cold"][0]) == 3, sorted(runs["cold"][0])
cold, warm = runs["cold"][2], runs["warm"][2]
# Warm: every mapping problem of every unit (all of WACO's phases) found, none mapped.
for c in (warm, runs["mpi_warm"][2]):
    assert all(m == 0 and h > 0 for h, m in c.values()), c
assert {k: v[0] for k, v in warm.items()} == {k: sum(v) for k, v in cold.items()}, (warm, cold)
# Cold, one thread: every mapping problem of the study is mapped once (one line of the file each);
# the greedy units' cores are each other's renamed, so the later of the two maps nothing; WACO's
# unrolled graph finds its candidates' problems.
entries = sum(1 for _ in open(f"{tmp}/cold/s.h5.tilecache")) - 1
assert sum(m for h, m in cold.values()) == entries > 0, (cold, entries)
g = [v for k, v in cold.items() if "waco" not in k]
assert len(g) == 2 and min(m for h, m in g) == 0, g
[w] = [v for k, v in cold.items() if "waco" in k]
assert w[0] > 0, w
print("tile cache: cold", cold, "warm", warm)
PY
# Another mapper version's cache: a warning, not used, replaced by this run's entries.
sed '1s/mapper=[0-9]*/mapper=0/' "$tmp/cold/s.h5.tilecache" >"$tmp/stale.tilecache"
"$bin" run "$tmp/s.toml" --output "$tmp/stale/s.h5" --tile-cache "$tmp/stale.tilecache" --quiet >/dev/null 2>"$tmp/stale.err"
grep -q "warning: .*stale.tilecache: written by another format, mapper or cost model" "$tmp/stale.err" || { cat "$tmp/stale.err"; exit 1; }
cmp "$tmp/cold/s.h5.tilecache" "$tmp/stale.tilecache"
. "$(dirname "$0")/lib/expect.sh"
fail=0
set +e
# A corrupt cache: a digit of a cost changed (the line's checksum no longer matches).
awk 'NR == 3 { sub(/ [0-9]/, " 7") } { print }' "$tmp/cold/s.h5.tilecache" >"$tmp/bad.tilecache"
cmp -s "$tmp/bad.tilecache" "$tmp/cold/s.h5.tilecache" && { echo "the corruption changed nothing"; fail=1; }
expect corrupt 2 "bad.tilecache:3:.*checksum mismatch.*byte offset" -- \
  "$bin" run "$tmp/s.toml" --output "$tmp/bad/s.h5" --tile-cache "$tmp/bad.tilecache" --quiet
printf 'not a cache\n' >"$tmp/other.tilecache"
expect not-a-cache 2 "other.tilecache:1:.*not a tile-cost cache" -- \
  "$bin" run "$tmp/s.toml" --output "$tmp/other/s.h5" --tile-cache "$tmp/other.tilecache" --quiet
set -e
# `mapfuse schedule --tile-cache`: the second run finds every problem.
for run in a b; do
  "$bin" schedule --arch tpu_like_quad_core --workload "$onnx" --stacks 0-1 --allocation greedy \
    --tile-cache "$tmp/cli.tilecache" --json >"$tmp/$run.json"
done
/usr/bin/python3 - "$tmp/a.json" "$tmp/b.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
ta, tb = a["tile_costs"], b["tile_costs"]
assert ta["cache_misses"] > 0 and ta["cache_hits"] == 0, ta
assert tb["cache_misses"] == 0 and tb["cache_hits"] == ta["cache_misses"] and tb["mapper_calls"] == 0, tb
assert (a["latency_cc"], a["energy_pj"], a["allocation"]) == (b["latency_cc"], b["energy_pj"], b["allocation"])
PY
# Saved while a unit runs (--tile-cache-every): MobileNetV2 layer by layer (~50 mapping problems,
# ~2 s) killed as soon as the file holds an entry keeps the searches it finished; the resumed run
# finds them and ends with the same file as an uninterrupted run.
cat >"$tmp/long.toml" <<TOML
name = "long"
[[schedule]]
workloads = ["$data/zigzag/head_3d12a96e/workload/mobilenetv2.onnx"]
architectures = ["tpu_like_quad_core"]
allocation = "greedy"
modes = ["lbl"]
TOML
mkdir -p "$tmp/whole" "$tmp/killed"
"$bin" run "$tmp/long.toml" --output "$tmp/whole/l.h5" --threads 1 --quiet >/dev/null
OMP_NUM_THREADS=1 "$bin" run "$tmp/long.toml" --output "$tmp/killed/l.h5" --threads 1 --quiet --tile-cache-every 0.1 \
  >/dev/null 2>&1 &
pid=$!
for _ in $(seq 600); do
  [ -f "$tmp/killed/l.h5.tilecache" ] && [ "$(wc -l <"$tmp/killed/l.h5.tilecache")" -ge 2 ] && break
  sleep 0.05
done
kill -9 $pid
wait $pid 2>/dev/null || true
kept=0
[ -f "$tmp/killed/l.h5.tilecache" ] && kept=$(($(wc -l <"$tmp/killed/l.h5.tilecache") - 1))
whole=$(($(wc -l <"$tmp/whole/l.h5.tilecache") - 1))
if grep -q '"status":"done"' "$tmp/killed/l.h5.journal" 2>/dev/null; then
  echo "the unit finished before the kill: nothing to check"; fail=1
fi
[ "$kept" -ge 1 ] && [ "$kept" -lt "$whole" ] || { echo "kept $kept of $whole entries"; fail=1; }
"$bin" run "$tmp/long.toml" --output "$tmp/killed/l.h5" --threads 1 --quiet >/dev/null
cmp "$tmp/whole/l.h5.tilecache" "$tmp/killed/l.h5.tilecache" || fail=1
/usr/bin/python3 - "$tmp/killed/l.h5" "$kept" <<'PY' || fail=1
import h5py, sys
f = h5py.File(sys.argv[1])
m = {x["name"].decode(): float(x["value"]) for x in f["metrics"][...]}
assert m["tile_cost_cache_hits"] == int(sys.argv[2]) and m["tile_cost_cache_misses"] > 0, m
PY
exit $fail
