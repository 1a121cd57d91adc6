#!/usr/bin/env bash
# `mapfuse map` finds the optimum of a small matmul on the two-level test architecture and the
# optimum can be re-evaluated with `mapfuse eval` to the same cost.
set -eu
bin="$1"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fixtures="$(cd "$(dirname "$0")/../fixtures" && pwd)"
"$bin" map --arch "$fixtures/two_level.toml" --workload "$fixtures/mm.toml" --objective edp --pareto >"$tmp/out"
grep -q "^mm: [0-9]* mappings evaluated" "$tmp/out"
mapping=$(sed -n 's/^  mapping  //p' "$tmp/out")
edp=$(sed -n 's/.*EDP \([0-9.e+]*\).*/\1/p' "$tmp/out" | head -1)
[ -n "$mapping" ] && [ -n "$edp" ]
"$bin" eval --arch "$fixtures/two_level.toml" --workload "$fixtures/mm.toml" --mapping "$mapping" --json >"$tmp/eval.json"
/usr/bin/python3 - "$tmp/eval.json" "$edp" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["valid"], j
edp = float(sys.argv[2])
assert abs(j["edp_pj_cycles"] - edp) <= 1e-5 * edp, (j["edp_pj_cycles"], edp)
print("1 passed, 0 failed")
PY
grep -q "^  pareto  " "$tmp/out"
# --json: per layer the optimum and the counts; branch and bound (the default) finds the same EDP
# as the whole mapspace (here it cuts nothing: no SIMD bucket fills before the end, so there is no
# incumbent; tests/cli/map_bound_resnet18.sh has real cuts).
"$bin" map --arch "$fixtures/two_level.toml" --workload "$fixtures/mm.toml" --json >"$tmp/bb.json"
"$bin" map --arch "$fixtures/two_level.toml" --workload "$fixtures/mm.toml" --json --no-bound >"$tmp/all.json"
/usr/bin/python3 - "$tmp/bb.json" "$tmp/all.json" "$edp" <<'PY'
import json, sys
bb, full = (json.load(open(f))["layers"][0] for f in sys.argv[1:3])
edp = float(sys.argv[3])
assert bb["edp"] == full["edp"] and abs(bb["edp"] - edp) <= 1e-5 * edp, (bb, full, edp)
assert bb["mapping"] == full["mapping"], (bb, full)
for k in ("evaluated", "valid", "capacity_pruned", "bound_pruned", "cpu_seconds", "energy_pj", "cycles"):
    assert k in bb, k
assert bb["evaluated"] <= full["evaluated"] and sum(full["bound_pruned"]) == 0, (bb, full)
print("1 passed, 0 failed")
PY
# Bad input: an unknown objective is exit status 2 with a suggestion.
set +e
"$bin" map --arch "$fixtures/two_level.toml" --workload "$fixtures/mm.toml" --objective edpp 2>"$tmp/err"
rc=$?
set -e
[ "$rc" -eq 2 ] && grep -q "did you mean 'edp'" "$tmp/err"
# --energy-tiebreak (Stream's per-tile criterion): the fewest cycles, then the least energy. Here
# several mappings reach the fewest cycles; the tie-break must give the front's fastest point, and
# plain `cycles` one no cheaper.
"$bin" map --arch "$fixtures/two_level.toml" --workload "$fixtures/mm.toml" --objective cycles --pareto >"$tmp/front"
"$bin" map --arch "$fixtures/two_level.toml" --workload "$fixtures/mm.toml" --objective cycles --json >"$tmp/plain.json"
"$bin" map --arch "$fixtures/two_level.toml" --workload "$fixtures/mm.toml" --objective cycles --energy-tiebreak --json >"$tmp/tie.json"
/usr/bin/python3 - "$tmp/front" "$tmp/plain.json" "$tmp/tie.json" <<'PY'
import json, re, sys
front = [(float(c), float(e)) for e, c in re.findall(r"^  pareto  energy (\S+) pJ  cycles (\S+)", open(sys.argv[1]).read(), re.M)]
fastest = min(front)
plain, tie = (json.load(open(f))["layers"][0] for f in sys.argv[2:4])
assert tie["cycles"] == fastest[0] and abs(tie["energy_pj"] - fastest[1]) <= 1e-6 * fastest[1], (tie, fastest)
assert plain["cycles"] == tie["cycles"] and plain["energy_pj"] > tie["energy_pj"], (plain, tie)
print("1 passed, 0 failed")
PY
set +e
"$bin" map --arch "$fixtures/two_level.toml" --workload "$fixtures/mm.toml" --objective energy --energy-tiebreak 2>"$tmp/err"
rc=$?
set -e
[ "$rc" -eq 2 ] && grep -q -- "--energy-tiebreak.*needs --objective cycles" "$tmp/err"
