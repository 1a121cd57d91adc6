#!/usr/bin/env bash
# An FFM study: pmapping generation cut into units (2 context slices per Einsum), joined by the
# master; the joined optimum and front are identical on 1, 2 and 3 MPI ranks, after a resume, and
# equal to `mapfuse ffm`; baselines get their percent above the optimum in the report; bad input.
set -eu
bin="$1"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader OMP_NUM_THREADS=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fixtures="$(cd "$(dirname "${BASH_SOURCE[0]}")/../fixtures/ffm" && pwd)"
cp "$fixtures/small_core.toml" "$tmp/arch.toml"
cp "$fixtures/chain3.toml" "$tmp/chain3.toml"
cd "$tmp"   # workload files are read relative to the working directory
cat >"$tmp/s.toml" <<'TOML'
name = "ffm_test"
[[workload]]
spec = "chain3.toml"
[[architecture]]
spec = "arch.toml"
[method]
name = ["ffm", "ffm_sa", "ffm_random"]
context_slices = 2
time_budget_s = 60
max_evaluations = 300
seeds = [1, 2]
TOML
"$bin" run "$tmp/s.toml" --output "$tmp/np1/s.h5" --quiet >/dev/null
for np in 2 3; do
  mpirun --oversubscribe --bind-to none -np $np "$bin" run "$tmp/s.toml" --output "$tmp/np$np/s.h5" --threads 1 --quiet >/dev/null
done
# Resume: drop the join and two generation results from the journal (as a kill would leave it).
cp -r "$tmp/np1" "$tmp/resume"
grep -v '"kind":"ffm_join"' "$tmp/resume/s.h5.journal" | head -n -2 >"$tmp/j" && mv "$tmp/j" "$tmp/resume/s.h5.journal"
rm "$tmp/resume/s.h5"
"$bin" run "$tmp/s.toml" --output "$tmp/resume/s.h5" --quiet >/dev/null
"$bin" ffm --workload "$tmp/chain3.toml" --arch "$tmp/arch.toml" --json >"$tmp/ffm.json"
"$bin" report "$tmp/np1/s.h5" --plots "$tmp/plots" >"$tmp/report.md"
/usr/bin/python3 - "$tmp" <<'PY'
import h5py, json, sys
d = sys.argv[1]
def units(path):
    f = h5py.File(path)
    u, p = f['units'][...], f['pareto'][...]
    out = {}
    for x in u:
        front = [tuple(r) for r in p[x['pareto_offset']:x['pareto_offset'] + x['pareto_count']][['energy_pj', 'cycles']]]
        out[x['label'].decode()] = (x['kind'].decode(), int(x['status']), x['energy_pj'], x['cycles'], x['edp'], front)
    return out
runs = {n: units(f'{d}/{n}/s.h5') for n in ('np1', 'np2', 'np3', 'resume')}
base = runs['np1']
assert len(base) == 6 + 4 + 1, sorted(base)   # 3 Einsums x 2 slices, 2 baselines x 2 seeds, the join
join = base['chain3.toml @ arch ffm']
assert join[0] == 'ffm_join' and join[1] == 0 and join[4] > 0 and len(join[5]) >= 1
for n, r in runs.items():
    assert set(r) == set(base), n
    for label in base:
        if base[label][0] in ('ffm_join', 'ffm_baseline'):
            assert r[label] == base[label], (n, label, r[label], base[label])   # bit-identical
j = json.load(open(f'{d}/ffm.json'))
assert (j['energy_pj'], j['cycles']) == (join[2], join[3]), (j['energy_pj'], j['cycles'], join)
assert [(p['energy_pj'], p['cycles']) for p in j['front']] == join[5]
# Baselines never beat the optimum; the report's percentages are >= 0.
for label, x in base.items():
    if x[0] == 'ffm_baseline':
        assert x[4] >= join[4] * (1 - 1e-12), (label, x[4], join[4])
md = open(f'{d}/report.md').read()
assert '| chain3.toml | arch | ffm (edp) |' in md, md
assert '| chain3.toml | arch | ffm_sa | 2 |' in md and '| chain3.toml | arch | ffm_random | 2 |' in md
print('ffm study ok')
PY
png="$tmp/plots/fused_chain3.toml_arch.png"
[ "$(head -c 8 "$png" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ]
# A real SIGKILL mid-run: baselines on a 2 s wall budget keep the run busy after the generation
# units are journaled; the resumed run's join and generation results equal the uninterrupted ones.
sed 's/^max_evaluations = 300$//; s/^time_budget_s = 60$/time_budget_s = 2/' "$tmp/s.toml" >"$tmp/slow.toml"
"$bin" run "$tmp/slow.toml" --output "$tmp/killed/s.h5" --threads 1 --quiet >/dev/null 2>&1 &
pid=$!
for _ in $(seq 1 400); do
  [ -f "$tmp/killed/s.h5.journal" ] && [ "$(wc -l <"$tmp/killed/s.h5.journal")" -ge 4 ] && break
  sleep 0.05
done
kill -9 $pid 2>/dev/null || true
wait $pid 2>/dev/null || true
[ ! -e "$tmp/killed/s.h5" ] || { echo "a killed run left an HDF5 file"; exit 1; }
! grep -q '"kind":"ffm_join"' "$tmp/killed/s.h5.journal" || { echo "the run was not interrupted before the join"; exit 1; }
"$bin" run "$tmp/slow.toml" --output "$tmp/killed/s.h5" --quiet >/dev/null
/usr/bin/python3 - "$tmp" <<'PY'
import h5py, sys
d = sys.argv[1]
def rows(path, kinds):
    u = h5py.File(path)['units'][...]
    # best_mapping's first line carries the timings; the LoopTree below it must match
    return {x['label'].decode(): (int(x['status']), x['energy_pj'], x['cycles'], x['best_mapping'].split(b'\n', 1)[1])
            for x in u if x['kind'].decode() in kinds}
a, b = rows(f'{d}/np1/s.h5', ('ffm_join',)), rows(f'{d}/killed/s.h5', ('ffm_join',))
assert a == b and len(a) == 1, (a, b)
assert len(rows(f'{d}/killed/s.h5', ('ffm_baseline',))) == 4
print('ffm study resumed after SIGKILL ok')
PY
# The architecture's mapspace constraints reach the ffm units and the baselines (here: the Buffer
# keeps weights only, so nothing can be fused there): the study's join equals `mapfuse ffm
# --constraints` and is worse than the free optimum; the baselines never beat it.
cat >"$tmp/c.toml" <<'TOML'
[[constraint]]
level = "Buffer"
keep = ["weight"]
TOML
sed 's|^spec = "arch.toml"$|spec = "arch.toml"\nconstraints = "c.toml"|' "$tmp/s.toml" >"$tmp/sc.toml"
"$bin" run "$tmp/sc.toml" --output "$tmp/sc/s.h5" --quiet >/dev/null
"$bin" ffm --workload "$tmp/chain3.toml" --arch "$tmp/arch.toml" --constraints "$tmp/c.toml" --json >"$tmp/ffm_c.json"
/usr/bin/python3 - "$tmp" <<'PY'
import h5py, json, sys
d = sys.argv[1]
def rows(path):
    u = h5py.File(path)['units'][...]
    return {x['label'].decode(): (x['kind'].decode(), int(x['status']), x['energy_pj'], x['cycles'], x['edp']) for x in u}
c, free = rows(f'{d}/sc/s.h5'), rows(f'{d}/np1/s.h5')
join = c['chain3.toml @ arch ffm']
j = json.load(open(f'{d}/ffm_c.json'))
assert (j['energy_pj'], j['cycles']) == (join[2], join[3]), (j, join)
assert join[4] > free['chain3.toml @ arch ffm'][4], (join, free['chain3.toml @ arch ffm'])
base = [x for x in c.values() if x[0] == 'ffm_baseline' and x[1] == 0]
assert base and all(x[4] >= join[4] * (1 - 1e-12) for x in base), (base, join)
print('ffm study with constraints ok')
PY
# Nested fusion in a study (`nested_loops`): the units generate the nested contexts, and the join
# over 2 MPI ranks equals `mapfuse ffm --nested-loops 1`, which is no worse than without. The same
# without storage above the split (`resident = false`) equals `--no-resident`, never better.
cat >"$tmp/sn.toml" <<'TOML'
name = "ffm_nested"
[[workload]]
spec = "chain3.toml"
[[architecture]]
spec = "arch.toml"
[method]
name = "ffm"
context_slices = 2
nested_loops = 1
TOML
sed 's/^nested_loops = 1$/nested_loops = 1\nresident = false/' "$tmp/sn.toml" >"$tmp/snr.toml"
for s in sn snr; do
  mpirun --oversubscribe --bind-to none -np 2 "$bin" run "$tmp/$s.toml" --output "$tmp/$s/s.h5" --threads 1 --quiet >/dev/null
done
"$bin" ffm --workload "$tmp/chain3.toml" --arch "$tmp/arch.toml" --nested-loops 1 --json >"$tmp/sn.json"
"$bin" ffm --workload "$tmp/chain3.toml" --arch "$tmp/arch.toml" --nested-loops 1 --no-resident --json >"$tmp/snr.json"
/usr/bin/python3 - "$tmp" <<'PY'
import h5py, json, sys
d = sys.argv[1]
j = {}
for s in ('sn', 'snr'):
    u = {x['label'].decode(): x for x in h5py.File(f'{d}/{s}/s.h5')['units'][...]}
    join = u['chain3.toml @ arch ffm']
    j[s] = json.load(open(f'{d}/{s}.json'))
    assert (j[s]['energy_pj'], j[s]['cycles']) == (join['energy_pj'], join['cycles']), (s, j[s], join)
free = json.load(open(f'{d}/ffm.json'))
assert j['sn']['contexts'] > free['contexts'] and j['sn']['edp'] <= free['edp'], (j['sn']['contexts'], free['contexts'])
n, r = j['snr'], j['sn']
assert n['contexts'] < r['contexts'] and n['edp'] >= r['edp'] and 'resident:' not in n['looptree'], (n['edp'], r['edp'])
print('ffm study with nested fusion, with and without resident tensors, ok')
PY
# Bad input.
expect_exit() {  # status, message, then the arguments
  local want="$1" msg="$2"; shift 2
  set +e
  "$bin" "$@" >"$tmp/out" 2>"$tmp/err"; local rc=$?
  set -e
  [ "$rc" -eq "$want" ] || { echo "exit $rc, expected $want: $*"; cat "$tmp/err" "$tmp/out"; exit 1; }
  grep -q "$msg" "$tmp/err" "$tmp/out" || { echo "expected '$msg' in:"; cat "$tmp/err" "$tmp/out"; exit 1; }
}
sed 's/"ffm_sa"/"ffm_sx"/' "$tmp/s.toml" >"$tmp/bad.toml"
expect_exit 2 "bad.toml:7.*unknown method 'ffm_sx'" run "$tmp/bad.toml" --output "$tmp/bad/b.h5" --quiet
sed 's/^seeds = \[1, 2\]$/seeds = [1, 2]\nnested_loops = 9/' "$tmp/s.toml" >"$tmp/bad3.toml"
expect_exit 2 "bad3.toml:.*nested_loops.*must be 0" run "$tmp/bad3.toml" --output "$tmp/bad3/b.h5" --quiet
sed 's/^seeds = \[1, 2\]$/seeds = [1, 2]\nresident = 3/' "$tmp/s.toml" >"$tmp/bad4.toml"
expect_exit 2 "bad4.toml:.*resident: expected true or false" run "$tmp/bad4.toml" --output "$tmp/bad4/b.h5" --quiet
expect_exit 2 "distribute an ffm study over MPI" run "$tmp/s.toml" --slice 0/2 --output "$tmp/bad/c.h5" --quiet
# A fixed decision naming a tensor the workload lacks: every unit fails with the reason, the run exits 1.
sed 's/^seeds = \[1, 2\]$/seeds = [1]\nmust_not_fuse = ["T7"]/' "$tmp/s.toml" >"$tmp/bad2.toml"
expect_exit 1 "no tensor 'T7'" run "$tmp/bad2.toml" --output "$tmp/bad2/b.h5" --quiet
echo "1 passed, 0 failed"
