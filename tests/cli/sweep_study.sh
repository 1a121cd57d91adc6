#!/usr/bin/env bash
# A swept study end to end: 2 x 2 x 2 Gemmini points (pe, scratchpad, accumulator) x two tiny
# matmul networks, exhaustive mapper; identical layers share a unit; `mapfuse report` gives the best
# point per network (checked against sums computed from the HDF5 file with h5py) and one valid PNG
# heat map per network. A bad sweep exits 2 naming file, line and key.
set -eu
bin="$1"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
mm() {  # name M N K input weight output
  printf '[[einsum]]\nname = "%s"\nranks = { M = %s, N = %s, K = %s }\n' "$1" "$2" "$3" "$4"
  printf 'tensors = [\n  { name = "%s", role = "input", dims = ["m", "k"] },\n' "$5"
  printf '  { name = "%s", role = "weight", dims = ["k", "n"] },\n  { name = "%s", role = "output", dims = ["m", "n"] },\n]\n' "$6" "$7"
}
{ echo 'name = "neta"'; mm mm1 8 8 8 A W1 Z1; mm mm2 8 8 8 Z1 W2 Z2; mm mm3 8 4 8 Z2 W3 Z3; } >neta.toml
{ echo 'name = "netb"'; mm fc 4 4 4 X W Y; } >netb.toml
cat >s.toml <<'TOML'
name = "sweep_test"
[[workload]]
spec = "neta.toml"
[[workload]]
spec = "netb.toml"
[[architecture]]
spec = "gemmini_default"
name = "g"
[architecture.sweep]
pe = [2, 4]
scratchpad_kib = [1, 4]
accumulator_kib = [0.25, 1]
[method]
name = "exhaustive"
objective = "edp"
TOML
"$bin" run s.toml --output out/s.h5 --quiet --threads 2 >run.txt
grep -q "^sweep_test: 24 units (24 computed now, 0 failed)" run.txt   # 8 points x (2 + 1) units
grep -q "^| neta.toml/{mm1,mm2} @ g_pe4_sp4_acc1 | " run.txt            # mm1 and mm2 share a unit
"$bin" report out/s.h5 --plots plots >report.md 2>err.txt
/usr/bin/python3 - out/s.h5 report.md <<'PY'
import re, sys
import h5py
f = h5py.File(sys.argv[1], "r")
units = f["units"][...]
assert len(units) == 24, len(units)
tot = {}
for u in units:
    assert u["status"] == 0
    m = re.match(r"^([^/]+)/(.+) @ (\S+)$", u["label"].decode())
    layer = m[2]
    n = len(layer[1:-1].split(",")) if layer.startswith("{") else 1
    e, c, L = tot.get((m[1], m[3]), (0.0, 0.0, 0))
    tot[(m[1], m[3])] = (e + n * u["energy_pj"], c + n * u["cycles"], L + n)
assert len(tot) == 16
md = open(sys.argv[2]).read()
rows = [l.split("|")[1:-1] for l in md.splitlines() if l.startswith("| g | ")]
assert len(rows) == 2, rows
for r in rows:
    r = [x.strip() for x in r]
    wl, arch = r[1], r[3]
    lowest = min(tot[k][0] * tot[k][1] for k in tot if k[0] == wl)
    ties = [k[1] for k in tot if k[0] == wl and tot[k][0] * tot[k][1] == lowest]
    assert arch in ties, (wl, arch, ties)  # ties go to the first point in sweep order
    e, c, L = tot[(wl, arch)]
    assert int(r[5]) == L == {"neta.toml": 3, "netb.toml": 1}[wl], r
    for got, want in ((r[6], e), (r[7], c), (r[8], e * c)):
        assert abs(float(got) - want) <= 1e-5 * want, (got, want)
    assert int(r[9]) == 8
    p = dict(kv.split("=") for kv in r[4].split(", "))
    assert arch == "g_pe%s_sp%s_acc%s" % (p["pe"], p["scratchpad_kib"], p["accumulator_kib"]), (arch, p)
# Every point's network total is in the networks table.
for (wl, arch), (e, c, L) in tot.items():
    line = [l for l in md.splitlines() if l.startswith("| %s | %s | - | %d | " % (wl, arch, L))]
    assert len(line) == 1, (wl, arch)
    assert abs(float(line[0].split("|")[7]) - e * c) <= 1e-5 * e * c
print("best points and totals match the HDF5 file")
PY
for f in sweep_edp_g_neta.toml sweep_edp_g_netb.toml edp_by_layer; do
  png="plots/$f.png"
  [ -s "$png" ] || { echo "missing $png"; ls plots; exit 1; }
  [ "$(head -c 8 "$png" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] || { echo "not a PNG: $png"; exit 1; }
  [ "$(stat -c %s "$png")" -gt 5000 ]
done
# Per-architecture energy plots only for the best points, not for all 8.
[ "$(ls plots/energy_by_level_*.png | wc -l)" -le 2 ]
grep -q "^g,neta.toml,,g_pe2_sp1_acc0.25,pe=2;scratchpad_kib=1;accumulator_kib=0.25,3,1," plots/sweep_networks.csv
# Bad sweeps: exit 2 with file:line and key.
sed 's/^pe = .*/pe = []/' s.toml >bad.toml
set +e
"$bin" run bad.toml --output out/bad.h5 --quiet 2>err.txt; rc=$?
set -e
[ "$rc" -eq 2 ] && grep -q "bad.toml:10:.*architecture\[0\].sweep.pe.*empty" err.txt || { cat err.txt; exit 1; }
sed 's/^scratchpad_kib = .*/scratchpad_kb = [1, 4]/' s.toml >bad.toml
set +e
"$bin" run bad.toml --output out/bad.h5 --quiet 2>err.txt; rc=$?
set -e
[ "$rc" -eq 2 ] && grep -q "bad.toml:11:.*did you mean 'scratchpad_kib'" err.txt || { cat err.txt; exit 1; }
echo "1 passed, 0 failed"
