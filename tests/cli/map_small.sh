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
# Bad input: an unknown objective is exit status 2 with a suggestion.
set +e
"$bin" map --arch "$fixtures/two_level.toml" --workload "$fixtures/mm.toml" --objective edpp 2>"$tmp/err"
rc=$?
set -e
[ "$rc" -eq 2 ] && grep -q "did you mean 'edp'" "$tmp/err"
