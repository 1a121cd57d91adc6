#!/usr/bin/env bash
# `mapfuse ffm` on a chain of three small matmuls on a 3-level core: the optimum and its front,
# fixed fusion decisions, and each bad input (exit 2 with the reason).
set -eu
bin="$1"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fixtures="$(cd "$(dirname "${BASH_SOURCE[0]}")/../fixtures/ffm" && pwd)"
cp "$fixtures/small_core.toml" "$tmp/arch.toml"
cp "$fixtures/chain3.toml" "$tmp/chain3.toml"
# One Einsum alone: nothing to fuse.
head -n 6 "$fixtures/chain3.toml" | sed 's/name = "chain3"/name = "single"/' >"$tmp/single.toml"  # comment, name, MM0
"$bin" ffm --workload "$tmp/chain3.toml" --arch "$tmp/arch.toml" --json >"$tmp/fused.json"
"$bin" ffm --workload "$tmp/chain3.toml" --arch "$tmp/arch.toml" --json --no-fusion >"$tmp/unfused.json"
"$bin" ffm --workload "$tmp/chain3.toml" --arch "$tmp/arch.toml" --json --must-not-fuse T1 --must-fuse T2 >"$tmp/fixed.json"
"$bin" ffm --workload "$tmp/chain3.toml" --arch "$tmp/arch.toml" >"$tmp/text.txt"
# A chain has one order of its Einsums: joining in every order changes nothing.
"$bin" ffm --workload "$tmp/chain3.toml" --arch "$tmp/arch.toml" --json --all-orders >"$tmp/orders.json"
# Without storage above the split: never better, and no group keeps a resident tensor.
"$bin" ffm --workload "$tmp/chain3.toml" --arch "$tmp/arch.toml" --json --no-resident >"$tmp/no_resident.json"
# Gemmini's default levels keep outputs (accumulator) apart from inputs (scratchpad): the text says
# fusion is impossible there, and does not say so where it happened.
"$bin" ffm --workload "$tmp/chain3.toml" --arch gemmini_default >"$tmp/gemmini.txt"
grep -q "no fusion is possible on 'gemmini_default'" "$tmp/gemmini.txt" || { echo "no explanation:"; cat "$tmp/gemmini.txt"; exit 1; }
if grep -q "no fusion is possible" "$tmp/text.txt"; then echo "explanation where fusion is possible"; cat "$tmp/text.txt"; exit 1; fi
/usr/bin/python3 - "$tmp" <<'PY'
import json, sys
d = sys.argv[1]
f, u, x = (json.load(open(f'{d}/{n}.json')) for n in ('fused', 'unfused', 'fixed'))
for j in (f, u, x):
    assert j['found'], j
    assert abs(j['edp'] - j['energy_pj'] * j['cycles']) <= 1e-9 * j['edp']
    front = [(p['energy_pj'], p['cycles']) for p in j['front']]
    for a in front:   # non-dominated
        assert not any(b != a and b[0] <= a[0] and b[1] <= a[1] for b in front), front
    assert min(e * c for e, c in front) == j['edp']   # the EDP optimum is on the front
    assert j['generation_cpu_seconds'] >= 0 and j['join_seconds'] >= 0 and j['pmappings_kept'] > 0
o = json.load(open(f'{d}/orders.json'))
assert o['orders_joined'] == 1 and o['edp'] == f['edp'] and o['front'] == f['front'], (o['orders_joined'], o['edp'], f['edp'])
# The free search is never worse than its restrictions; here fusion pays.
assert f['edp'] <= x['edp'] and f['edp'] <= u['edp'], (f['edp'], x['edp'], u['edp'])
assert f['edp'] < u['edp'], (f['edp'], u['edp'])
assert all(len(g) == 1 for g in u['groups'])
n = json.load(open(f'{d}/no_resident.json'))
assert n['found'] and n['edp'] >= f['edp'] and 'resident:' not in n['looptree'], (n['edp'], f['edp'])
# Fixed decisions: T1 through DRAM (MM0 alone), T2 on chip (MM1 and MM2 together).
assert x['groups'] == [['MM0'], ['MM1', 'MM2']], x['groups']
print('ffm cli ok')
PY
grep -q "optimum (edp)" "$tmp/text.txt" && grep -q "^group 1: " "$tmp/text.txt"
# Mapspace constraints (--constraints, as for `map`): AccelForge's pmapping template for its eyeriss
# optimum (docs/validation.md). Unfused, the fused search must agree with the exhaustive mapper
# under the same constraints, Einsum by Einsum, and lands on AccelForge's mapping; mapfuse's own
# mapspace holds a cheaper one.
cat >"$tmp/af_template.toml" <<'T'
[[constraint]]
level = "MainMemory"
temporal_order = ["K", "N"]
[[constraint]]
level = "GlobalBuffer"
temporal_order = ["M"]
keep = ["weight"]
spatial_x = ["M"]
spatial_y = ["K"]
[[constraint]]
level = "InputScratchpad"
temporal_order = ["N"]
[[constraint]]
level = "WeightScratchpad"
temporal_order = ["M"]
[[constraint]]
level = "OutputScratchpad"
temporal_order = ["K"]
T
{
  echo 'name = "matmuls"'
  for i in 0 1; do
    echo "[[einsum]]"
    echo "name = \"Matmul$i\""
    echo 'ranks = { M = 64, N = 64, K = 64 }'
    echo "tensors = [ { name = \"T$i\", role = \"input\", dims = [\"m\", \"k\"] }, { name = \"W$i\", role = \"weight\", dims = [\"k\", \"n\"] }, { name = \"T$((i + 1))\", role = \"output\", dims = [\"m\", \"n\"] } ]"
  done
} >"$tmp/matmuls.toml"
"$bin" ffm --workload "$tmp/matmuls.toml" --arch accelforge_eyeriss --no-fusion --constraints "$tmp/af_template.toml" --json >"$tmp/c.json"
"$bin" ffm --workload "$tmp/matmuls.toml" --arch accelforge_eyeriss --no-fusion --json >"$tmp/free.json"
"$bin" map --workload "$tmp/matmuls.toml" --arch accelforge_eyeriss --layer Matmul0 --constraints "$tmp/af_template.toml" >"$tmp/map.txt"
/usr/bin/python3 - "$tmp" <<'PY'
import json, re, sys
d = sys.argv[1]
c, free = json.load(open(f'{d}/c.json')), json.load(open(f'{d}/free.json'))
m = re.search(r'best \(edp\)\s+energy ([0-9.e+]+) pJ\s+cycles ([0-9]+)', open(f'{d}/map.txt').read())
assert m, open(f'{d}/map.txt').read()
assert abs(c['energy_pj'] - 2 * float(m.group(1))) <= 1e-5 * c['energy_pj'], (c['energy_pj'], m.group(1))
assert c['cycles'] == 2 * int(m.group(2)), (c['cycles'], m.group(2))
assert 'GlobalBuffer[W0] M=4 M=8@x K=8@y | InputScratchpad[T0] N=64 | WeightScratchpad[W0] M=2 | OutputScratchpad[T1] K=8' in c['looptree'], c['looptree']
assert free['energy_pj'] < 0.95 * c['energy_pj'] and free['cycles'] == c['cycles'], (free['energy_pj'], c['energy_pj'])
PY
expect_error() {  # message, then the command's arguments
  local msg="$1"; shift
  set +e
  "$bin" ffm "$@" 2>"$tmp/err" >/dev/null; local rc=$?
  set -e
  [ "$rc" -eq 2 ] || { echo "exit $rc, expected 2: $*"; cat "$tmp/err"; exit 1; }
  grep -q "$msg" "$tmp/err" || { echo "expected '$msg' in:"; cat "$tmp/err"; exit 1; }
}
expect_error "unknown objective 'latncy'.*did you mean 'latency'" --workload "$tmp/chain3.toml" --arch "$tmp/arch.toml" --objective latncy
expect_error "no producer/consumer pair" --workload "$tmp/single.toml" --arch "$tmp/arch.toml"
printf '[[constraint]]\nlevel = "Buffer"\nlayer = "MM7"\ntemporal_order = ["M"]\n' >"$tmp/bad_layer.toml"
expect_error "bad_layer.toml:1: layer: no Einsum 'MM7'" --workload "$tmp/chain3.toml" --arch "$tmp/arch.toml" --constraints "$tmp/bad_layer.toml"
expect_error "no tensor 'T9'" --workload "$tmp/chain3.toml" --arch "$tmp/arch.toml" --must-fuse T9
expect_error "tensor 'W0' is not exchanged.*no Einsum produces it" --workload "$tmp/chain3.toml" --arch "$tmp/arch.toml" --must-fuse W0
# A core whose outermost level is bounded and smaller than a tensor: no level can hold it.
sed 's/^energy_pj = 100$/energy_pj = 100\nentries = 8/' "$tmp/arch.toml" >"$tmp/small.toml"
expect_error "tensor 'T0'.*16 words do not fit any level" --workload "$tmp/chain3.toml" --arch "$tmp/small.toml"
# Every intermediate forced on chip (--must-fuse others) with a 4-word Buffer and a 1-word Reg:
# MM1's T1 and T2 tiles (4 words each: the shared loops can only split M) fit neither, so no
# fused mapping exists; exit 1, saying where the join ends empty.
sed 's/^entries = 64$/entries = 4/; s/^entries = 8$/entries = 1/' "$tmp/arch.toml" >"$tmp/tiny.toml"
grep -q "^entries = 4$" "$tmp/tiny.toml" && grep -q "^entries = 1$" "$tmp/tiny.toml"
set +e
"$bin" ffm --workload "$tmp/chain3.toml" --arch "$tmp/tiny.toml" --must-fuse others >"$tmp/out" 2>&1; rc=$?
set -e
[ "$rc" -eq 1 ] || { echo "exit $rc, expected 1"; cat "$tmp/out"; exit 1; }
grep -q "no fused mapping fits core" "$tmp/out" && grep -q "the join ends empty at Einsum 'MM0'" "$tmp/out" || { cat "$tmp/out"; exit 1; }
echo "1 passed, 0 failed"
