#!/usr/bin/env bash
# Branch and bound (`mapfuse map`'s default) finds, on every MAC layer of ResNet-18 under DOSA's
# Gemmini mapspace, the optimum the whole-mapspace search found: the same EDP to the bit and the
# same mapping (tests/fixtures/resnet18_gemmini_dosa_optima.json, recorded with --no-bound, which
# takes about 4x longer), evaluating fewer mappings; repeated layers are searched once. About 2.5
# CPU-s.
set -eu
bin="$1"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
here="$(cd "$(dirname "$0")" && pwd)"
OMP_NUM_THREADS=2 "$bin" map --workload resnet18 --constraints "$here/../../presets/constraints/gemmini_dosa.toml" \
  --json >"$tmp/bb.json"
/usr/bin/python3 - "$tmp/bb.json" "$here/../fixtures/resnet18_gemmini_dosa_optima.json" <<'PY'
import json, sys
got = json.load(open(sys.argv[1]))["layers"]
ref = json.load(open(sys.argv[2]))["layers"]
assert [g["layer"] for g in got] == [r["layer"] for r in ref], "layers differ"
failed = 0
for g, r in zip(got, ref):
    ok = g["edp"] == r["edp"] and g["mapping"] == r["mapping"] and g["evaluated"] < r["evaluated"]
    if not ok:
        failed += 1
        print("FAIL", g["layer"], g["edp"], r["edp"], g["mapping"], r["mapping"], g["evaluated"], r["evaluated"])
# Repeated layers are searched once: the 21 MAC layers are 12 problems (docs/mapper.md).
same = {g["layer"]: g["same_as"] for g in got if g["same_as"]}
expect = {"layer1.0.conv2": "layer1.0.conv1", "layer1.1.conv1": "layer1.0.conv1", "layer1.1.conv2": "layer1.0.conv1",
          "layer2.1.conv1": "layer2.0.conv2", "layer2.1.conv2": "layer2.0.conv2",
          "layer3.1.conv1": "layer3.0.conv2", "layer3.1.conv2": "layer3.0.conv2",
          "layer4.1.conv1": "layer4.0.conv2", "layer4.1.conv2": "layer4.0.conv2"}
if same != expect:
    failed += 1
    print("FAIL same_as", same)
print(f"{len(got) - failed} passed, {failed} failed")
sys.exit(1 if failed else 0)
PY
