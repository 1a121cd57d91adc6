#!/usr/bin/env bash
# Cut points as a study dimension (stacks = [...]): Stream's 2-conv network on two quad-core
# systems, fused with three cut points and layer by layer, in one study. Each fused unit builds the
# stacks its value names (both convs in one stack: 448 CTs; auto:1e-9 cuts before every weighted
# layer, so each conv is its own stack: the 8 CTs of layer by layer), lbl runs once per system,
# and the report's best point per workload is chosen over systems and cut points together.
set -eu
bin="$1"
data="$2"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
onnx="$data/stream/classic_cb9dfc52/testing/workload/2_conv.onnx"
cat >"$tmp/s.toml" <<TOML
name = "joint_small"
[[schedule]]
workloads = ["$onnx"]
architectures = ["tpu_like_quad_core", "stream_t3_4c_2ws"]
modes = ["fused", "lbl"]
allocation = "greedy"
stacks = ["0-1", "auto:1e-9", "auto:100"]
TOML
"$bin" run "$tmp/s.toml" --output "$tmp/s.h5" --threads 2 --quiet >/dev/null
/usr/bin/python3 - "$tmp/s.h5" <<'PY'
import h5py, sys
f = h5py.File(sys.argv[1])
units = f["units"][...]
cts = {}
for m in f["metrics"][...]:
    if m["name"].decode() == "cts":
        cts[units[int(m["unit"])]["label"].decode()] = int(m["value"])
labels = sorted(u["label"].decode() for u in units)
want = sorted(f"schedule 2_conv {m} @ {a}" for a in ("tpu_like_quad_core", "stream_t3_4c_2ws")
              for m in ("fused 0-1", "fused auto:1e-9", "fused auto:100", "lbl"))
assert labels == want, labels
assert all(int(u["status"]) == 0 for u in units), [u["message"] for u in units]
for a in ("tpu_like_quad_core", "stream_t3_4c_2ws"):
    assert cts[f"schedule 2_conv fused 0-1 @ {a}"] == 448, cts
    assert cts[f"schedule 2_conv fused auto:100 @ {a}"] == 448, cts
    assert cts[f"schedule 2_conv fused auto:1e-9 @ {a}"] == cts[f"schedule 2_conv lbl @ {a}"] == 8, cts
PY
"$bin" report "$tmp/s.h5" >"$tmp/report.md" 2>/dev/null
grep -q "| 2_conv | fused auto:1e-9 | greedy |" "$tmp/report.md" || { cat "$tmp/report.md"; exit 1; }
grep -q "## Best architecture per workload (least EDP over modes, stacks and methods)" "$tmp/report.md"
# Bad input: the key, the value and the accepted forms; exit 2.
sed -i 's/"auto:100"\]/"auto:-1"]/' "$tmp/s.toml"
rc=0; "$bin" run "$tmp/s.toml" --output "$tmp/bad.h5" --quiet >/dev/null 2>"$tmp/err" || rc=$?
[ "$rc" -eq 2 ] || { echo "bad stacks: expected exit 2, got $rc"; exit 1; }
grep -q "stacks" "$tmp/err" && grep -q "auto:-1" "$tmp/err" && grep -q "auto:F" "$tmp/err" || { cat "$tmp/err"; exit 1; }
[ ! -e "$tmp/bad.h5" ]
echo ok
