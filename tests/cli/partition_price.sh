#!/usr/bin/env bash
# `mapfuse partition --price-on ARCH`: the GET plan's groups priced by FADiff's exact network
# evaluator on FADiff's own mapping, beside FADiff's fusion and no fusion (docs/get_search.md).
# On ResNet-18: every row positive; the all-singleton plan priced through the bridge equals the
# unfused network; FADiff's row is the EDP its own run reported.
# Usage: partition_price.sh <mapfuse binary> <shared data dir>
set -u
bin="$1"
net="$2/get/onnx/resnet18.onnx"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

. "$(dirname "$0")/lib/expect.sh"

run() { "$bin" partition --workload "$net" "$@"; }
expect "price a sample" 2 'price-on.*sample has none' -- run --search sample --price-on fadiff_large
expect "unknown architecture" 2 'fadiff_larg' -- run --price-on fadiff_larg
expect "evaluation budget 0" 2 'fadiff-evaluations.*> 0' -- run --price-on fadiff_large --fadiff-evaluations 0

run --search exact --buffer-kb 256 --price-on fadiff_large --fadiff-evaluations 150 --json >"$tmp/p.json" || { echo "FAIL priced run"; fail=1; }
python3 - "$tmp/p.json" <<'PY' || fail=1
import json, sys
p = json.load(open(sys.argv[1]))["priced"]
for row in ("get", "fadiff", "unfused", "get_singletons"):
    for k in ("energy_pj", "cycles", "edp", "dram_words"):
        assert p[row][k] > 0, (row, k, p[row][k])
    assert p[row]["groups"] + p[row]["fused_edges"] == p["layers"], (row, p[row])
s, u = p["get_singletons"], p["unfused"]
assert s == u, ("all-singleton plan must price as the unfused network", s, u)
assert u["fused_edges"] == 0 and u["groups"] == p["layers"]
assert p["get"]["fused_edges"] > 0, "the optimal LBDF 256 KB plan of ResNet-18 fuses a conv -> conv edge"
assert abs(p["fadiff"]["edp"] - p["fadiff_edp"]) <= 1e-9 * p["fadiff_edp"], (p["fadiff"]["edp"], p["fadiff_edp"])
print(f"ok   priced: get EDP {p['get']['edp']:.4g} ({p['get']['fused_edges']} fused), "
      f"fadiff {p['fadiff']['edp']:.4g} ({p['fadiff']['fused_edges']} fused), unfused {u['edp']:.4g}")
PY
run --search ls --budget 50 --price-on fadiff_large --fadiff-evaluations 50 >"$tmp/text" 2>&1 &&
  grep -q '^  get_singletons ' "$tmp/text" && grep -q 'priced on' "$tmp/text" ||
  { echo "FAIL text output"; cat "$tmp/text"; fail=1; }
exit $fail
