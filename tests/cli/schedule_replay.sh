#!/usr/bin/env bash
# `mapfuse schedule --replay-stream`: both shipped Stream runs reproduced to the cycle (every CN,
# latency, energy to 1e-9), the mapfuse semantics differs, and a malformed folder exits 2 naming
# file and line.
set -eu
bin="$1"
data="$2"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
check() {  # run cns latency energy
  "$bin" schedule --replay-stream "$data/stream/derived/coala/$1" --json >"$tmp/out.json"
  /usr/bin/python3 - "$tmp/out.json" "$2" "$3" "$4" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
cns, lat, en = int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
assert j["cns"] == cns, j["cns"]
assert j["cn_mismatches"] == 0, j["differences"]
assert j["transfer_mismatches"] == 0, j["transfer_mismatches"]
assert j["latency_cc"] == lat, j["latency_cc"]
assert abs(j["energy_pj"] - en) <= 1e-9 * en, j["energy_pj"]
PY
}
check 2conv_fused_fixed_k4 448 61004 43296172.624
check resnet18_lbl_fixed_k4 162 5563353.5 4607092175.552
# mapfuse semantics is another schedule (multicast, no synchronisation): it is not compared strictly.
"$bin" schedule --replay-stream "$data/stream/derived/coala/2conv_fused_fixed_k4" --semantics mapfuse --json >"$tmp/m.json"
/usr/bin/python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['cn_mismatches'] > 0 and j['latency_cc'] < 61004, j['latency_cc']" "$tmp/m.json"
# Text output names the match.
"$bin" schedule --replay-stream "$data/stream/derived/coala/resnet18_lbl_fixed_k4" | grep -q "CNs whose start or end differ: 0 of 162"
# A malformed folder: exit 2, file:line:column and the column's name.
mkdir "$tmp/bad"
cp "$data/stream/derived/coala/2conv_fused_fixed_k4/"* "$tmp/bad/"
chmod u+w "$tmp/bad/"*
sed -i '3s/,514,/,fast,/' "$tmp/bad/cns.csv"
set +e
"$bin" schedule --replay-stream "$tmp/bad" 2>"$tmp/err"
rc=$?
set -e
[ "$rc" -eq 2 ] || { echo "expected exit 2, got $rc"; exit 1; }
grep -q "cns.csv:3:.*runtime" "$tmp/err" || { cat "$tmp/err"; exit 1; }
"$bin" schedule --replay-stream "$tmp/missing" 2>/dev/null && exit 1
"$bin" schedule --replay-stream "$data/stream/derived/coala/2conv_fused_fixed_k4" --set nonsense=1 2>/dev/null && exit 1
echo "schedule_replay: ok"
