#!/usr/bin/env bash
# A network-optimizer study (FADiff and DOSA-style on ResNet-18, evaluation budgets so that the
# run is reproducible): one optimize_network unit per (network, architecture, method, seed), the
# report's Table-1 rows recomputed from the HDF5 file, the convergence plot, and bad method input.
set -eu
bin="$1"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/s.toml" <<'TOML'
name = "fadiff_test"
[[workload]]
spec = "resnet18"
[[architecture]]
spec = "fadiff_small"
[method]
name = ["dosa", "fadiff"]
time_budget_s = 60
max_evaluations = 1500
seeds = [1, 2]
TOML
"$bin" run "$tmp/s.toml" --output "$tmp/s.h5" --quiet >/dev/null
"$bin" report "$tmp/s.h5" --plots "$tmp/plots" >"$tmp/report.md"
# Reproducible: a second run (no journal) gives the same EDPs.
"$bin" run "$tmp/s.toml" --output "$tmp/again.h5" --quiet >/dev/null
/usr/bin/python3 - "$tmp/s.h5" "$tmp/again.h5" "$tmp/report.md" <<'PY'
import h5py, math, re, sys
def units(path):
    u = h5py.File(path)['units'][...]
    return {x['label'].decode(): x for x in u}
a, b = units(sys.argv[1]), units(sys.argv[2])
assert len(a) == 4, sorted(a)
for label, x in a.items():
    assert x['kind'].decode() == 'optimize_network', x['kind']
    assert x['status'] == 0, (label, x['message'])
    assert x['energy_pj'] > 0 and x['cycles'] > 0
    assert abs(x['edp'] - x['energy_pj'] * x['cycles']) <= 1e-9 * x['edp']
    assert x['edp'] == b[label]['edp'], (label, x['edp'], b[label]['edp'])   # same seed, same result
# The report's rows: geometric mean over the two seeds and the ratio to FADiff.
g = {m: math.exp(sum(math.log(a[f'resnet18 @ fadiff_small {m} seed {s}']['edp']) for s in (1, 2)) / 2) for m in ('dosa', 'fadiff')}
md = open(sys.argv[3]).read()
rows = dict((r[0], (float(r[1]), r[2])) for r in re.findall(r'^\| resnet18 \| fadiff_small \| (\w+) \| 2 \| (\S+) \| (\S+) \|$', md, re.M))
assert set(rows) == {'dosa', 'fadiff'}, md
for m in rows:
    assert abs(rows[m][0] - g[m]) <= 1e-3 * g[m], (m, rows[m], g[m])
assert rows['fadiff'][1] == '1.00x'
assert abs(float(rows['dosa'][1].rstrip('x')) - g['dosa'] / g['fadiff']) < 0.006, rows
# Traces: best-so-far EDP never rises and ends at the unit's EDP.
f = h5py.File(sys.argv[1])
t, u = f['trace'][...], f['units'][...]
for x in u:
    tr = t[x['trace_offset']:x['trace_offset'] + x['trace_count']]
    assert len(tr) > 0
    assert all(tr[i + 1, 2] <= tr[i, 2] for i in range(len(tr) - 1))
    assert tr[-1, 2] == x['edp']
print('optimizer study ok')
PY
for png in "$tmp/plots/convergence.png" "$tmp/plots/optimizers_resnet18_fadiff_small.png"; do   # Figure 4
  [ "$(head -c 8 "$png" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ]
done
# A unit that cannot run (a one-word scratchpad: no mapping of conv1 fits) fails with its reason
# while the other units finish; the run exits 1 and the file records both.
cat >"$tmp/fail.toml" <<'TOML'
name = "fadiff_fail"
[[workload]]
spec = "resnet18"
[[architecture]]
spec = "fadiff_small"
[[architecture]]
spec = "fadiff_small"
name = "tiny"
[architecture.sweep]
"Scratchpad.entries" = [1]
[method]
name = ["fadiff"]
time_budget_s = 60
max_evaluations = 200
TOML
set +e
"$bin" run "$tmp/fail.toml" --output "$tmp/fail.h5" --quiet >/dev/null 2>&1; rc=$?
set -e
[ "$rc" -eq 1 ] || { echo "failed-unit study: exit $rc, expected 1"; exit 1; }
/usr/bin/python3 - "$tmp/fail.h5" <<'PY'
import h5py, sys
u = {x['label'].decode(): x for x in h5py.File(sys.argv[1])['units'][...]}
assert u['resnet18 @ fadiff_small fadiff seed 1']['status'] == 0
bad = u['resnet18 @ tiny_scratchpad_entries1 fadiff seed 1']
assert bad['status'] != 0
msg = bad['message'].decode()
assert "einsum 'conv1'" in msg and "'Scratchpad' (1 words) is too small" in msg, msg
PY
# The command-line twin: bad input exits 2 with the reason; a run prints the exact EDP.
set +e
"$bin" optimize --workload resnet18 --arch fadiff_small --method gradient 2>"$tmp/err"; rc=$?
set -e
[ "$rc" -eq 2 ] && grep -q "unknown method 'gradient'" "$tmp/err"
set +e
"$bin" optimize --workload resnet18 --time-budget 0 2>"$tmp/err"; rc=$?
set -e
[ "$rc" -eq 2 ] && grep -q "time budget must be a positive" "$tmp/err"
"$bin" optimize --workload resnet18 --arch fadiff_small --method dosa --max-evaluations 300 --json >"$tmp/opt.json"
/usr/bin/python3 - "$tmp/opt.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert j['found'] and j['stopped_by'] == 'evaluations' and j['evaluations'] >= 300, j['stopped_by']
assert abs(j['edp'] - j['energy_pj'] * j['cycles']) <= 1e-9 * j['edp']
assert len(j['mappings']) == 21 and sum(len(g) for g in j['groups']) == 21
PY
# Bad input: an unknown method in the list and a zero budget name the file and line.
expect_error() {
  set +e
  "$bin" run "$tmp/bad.toml" --output "$tmp/bad.h5" --quiet 2>"$tmp/err"; rc=$?
  set -e
  [ "$rc" -eq 2 ] || { echo "exit $rc, expected 2"; cat "$tmp/err"; exit 1; }
  grep -q "$1" "$tmp/err" || { echo "expected '$1' in:"; cat "$tmp/err"; exit 1; }
  [ ! -e "$tmp/bad.h5" ]
}
sed 's/name = \["dosa", "fadiff"\]/name = ["dosa", "fadif"]/' "$tmp/s.toml" >"$tmp/bad.toml"
expect_error "bad.toml:7.*unknown method 'fadif'.*fadiff"
sed 's/time_budget_s = 60/time_budget_s = 0/' "$tmp/s.toml" >"$tmp/bad.toml"
expect_error "bad.toml:8.*time_budget_s.*positive"
# Families may be mixed in one study (layer by layer, network optimizers, fused mappers), but
# not two layer mappers.
sed 's/name = \["dosa", "fadiff"\]/name = ["exhaustive", "random", "fadiff"]/' "$tmp/s.toml" >"$tmp/bad.toml"
expect_error "bad.toml:7.*random and exhaustive (layer mappers) cannot be listed together"
echo "1 passed, 0 failed"
