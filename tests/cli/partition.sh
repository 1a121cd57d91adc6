#!/usr/bin/env bash
# `mapfuse partition` (GET-fusion): bad input exits 2 with a clear message; a small search prints
# DRAM, MBU and the fused groups, deterministically per seed; the exact optimum is no worse.
# Usage: partition.sh <mapfuse binary> <shared data dir>
set -u
bin="$1"
net="$2/get/onnx/resnet18.onnx"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

. "$(dirname "$0")/lib/expect.sh"

run() { "$bin" partition --workload "$net" "$@"; }
expect "buffer 0" 2 'buffer-kb.*positive' -- run --buffer-kb 0
expect "buffer below every operator" 2 'buffer-kb.*unfuseable' -- run --buffer-kb 0.01
expect "unknown scheme" 2 'lbd' -- run --scheme lbd
expect "unknown search" 2 "search.*unknown search 'nsga'.*did you mean 'nsga2'" -- run --search nsga
expect "unknown explainer" 2 "split.*unknown explainer 'gradcam'" -- run --split gradcam
expect "budget 0" 2 'budget.*at least 1' -- run --budget 0
expect "unknown network" 2 "workload.*neither an ONNX file" -- "$bin" partition --workload no_such_net
# Every operator unfuseable: at 1 KB not even ResNet-18's smallest operator fits, under BRR either.
expect "every operator unfuseable (brr)" 2 'buffer-kb.*no operator.*fits a 1 KB buffer.*brr.*every operator would be unfuseable' \
  -- run --scheme brr --buffer-kb 1
# An operator the graph cannot read: the message names the node and the operator.
python3 - "$net" "$tmp/relx.onnx" <<'PY'
import sys
b = open(sys.argv[1], "rb").read()
open(sys.argv[2], "wb").write(b.replace(b"Relu", b"Relx"))
PY
expect "unreadable operator" 2 "relx.onnx.*node '[^']+' \\(Relx\\).*unsupported ONNX operator 'Relx' \\(did you mean 'Relu'\\?\\)" \
  -- "$bin" partition --workload "$tmp/relx.onnx"

"$bin" partition --workload "$net" --scheme lbdf --buffer-kb 128 --search ls --split cut --budget 300 --seed 3 --json \
  >"$tmp/a.json" || { echo "FAIL ls run"; fail=1; }
"$bin" partition --workload "$net" --scheme lbdf --buffer-kb 128 --search ls --split cut --budget 300 --seed 3 --json \
  >"$tmp/b.json" || { echo "FAIL ls rerun"; fail=1; }
"$bin" partition --workload "$net" --scheme lbdf --buffer-kb 128 --search exact --json >"$tmp/x.json" ||
  { echo "FAIL exact run"; fail=1; }
python3 - "$tmp" <<'PY' || fail=1
import json, sys
d = sys.argv[1]
a, b, x = (json.load(open(f"{d}/{n}.json")) for n in ("a", "b", "x"))
for k in ("dram_mb", "mbu_kb", "groups", "plans", "rectify_rate", "fuseable_nodes", "seconds"):
    assert k in a, f"missing {k}"
assert a["plans"] == 300, a["plans"]
assert a["dram_mb"] > 0 and 0 < a["mbu_kb"] < 128, (a["dram_mb"], a["mbu_kb"])
assert a["invalid_groups"] > 0 and 0 <= a["rectify_rate"] <= 1, (a["invalid_groups"], a["rectify_rate"])
assert 0 < a["fuseable_nodes"] <= a["nodes"]
names = [n for g in a["groups"] for n in g]
assert len(names) == a["fuseable_nodes"] == len(set(names)), "groups must cover the fuseable operators once"
assert a["dram_mb"] == b["dram_mb"] and a["groups"] == b["groups"], "same seed, same plan"
assert x["optimal"] and x["dram_mb"] <= a["dram_mb"] + 1e-9, (x["dram_mb"], a["dram_mb"])
print(f"ok   ls {a['dram_mb']:.3f} MB, exact {x['dram_mb']:.3f} MB, {a['fuseable_nodes']} fuseable")
PY
# Decimal units: 131.072 KB of 1000 B is the same 131,072-byte buffer, so the same plan and bytes.
expect "kb base neither 1024 nor 1000" 2 'kb-bytes.*1001.*expected 1024.*or 1000' -- run --kb-bytes 1001
"$bin" partition --workload "$net" --buffer-kb 131.072 --kb-bytes 1000 --search exact --json >"$tmp/d.json" ||
  { echo "FAIL decimal exact run"; fail=1; }
python3 - "$tmp" <<'PY' || fail=1
import json, sys
x = json.load(open(sys.argv[1] + "/x.json")); d = json.load(open(sys.argv[1] + "/d.json"))
assert d["groups"] == x["groups"], "same buffer in bytes, same optimum"
assert abs(d["dram_mb"] * 1e6 - x["dram_mb"] * 2**20) < 1e-3, (d["dram_mb"], x["dram_mb"])
assert abs(d["mbu_kb"] * 1e3 - x["mbu_kb"] * 2**10) < 1e-6, (d["mbu_kb"], x["mbu_kb"])
print(f"ok   --kb-bytes 1000: {d['dram_mb']} MB = {x['dram_mb']} MiB")
PY
"$bin" partition --workload "$net" --buffer-kb 128 --search rs --budget 50 >"$tmp/text" 2>&1 &&
  grep -q '^  group: ' "$tmp/text" && grep -q 'DRAM' "$tmp/text" || { echo "FAIL text output"; cat "$tmp/text"; fail=1; }
exit $fail
