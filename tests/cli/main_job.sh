#!/usr/bin/env bash
# The main job (scripts/run.sh): experiments/quickstart.toml as shipped, but for FADiff's time
# budget (1 s instead of 5), run and reported. The headline compares like with like: every row
# says how many Einsums its price covers and on which cost model, and a ratio is only ever taken
# against the unfused run on the same Einsums and model (FFM against FFM with fusion off on every
# Einsum; FADiff against its own mappings with every edge unfused, on the MAC layers). The fused
# optimum must save EDP (a measured property of this study: with `fusion = false` the ffm row
# equals ffm_unfused and this test fails, tried 2026-11-24).
# Usage: main_job.sh <mapfuse binary> [shared data dir]
set -eu
bin="$1"
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sed -e 's/^time_budget_s = .*/time_budget_s = 1/' -e "s#\"\.\./presets/#\"$root/presets/#" \
  "$root/experiments/quickstart.toml" >"$tmp/q.toml"
grep -q '^time_budget_s = 1$' "$tmp/q.toml"
"$bin" run "$tmp/q.toml" --output "$tmp/q.h5" --quiet >/dev/null
"$bin" report "$tmp/q.h5" --no-plots >"$tmp/report.md"
"$bin" workload mobilenet_v2 >"$tmp/w.txt"
/usr/bin/python3 - "$tmp/report.md" "$tmp/w.txt" <<'PY'
import re, sys
md = open(sys.argv[1]).read().splitlines()
w = open(sys.argv[2]).read()
einsums = int(re.search(r"(\d+) Einsums", w).group(1))
macs = len(re.findall(r"^\s*\d+\s+\S+\s+mac\s", w, re.M))
assert 0 < macs < einsums, (macs, einsums)
start = md.index(next(l for l in md if l.startswith("## Headline")))
head = md[start + 2].split(" | ")
assert [c.strip("| ") for c in head] == ["workload", "architecture", "method", "runs", "Einsums", "cost model", "energy_pj",
                                         "cycles", "EDP", "EDP vs layer by layer", "fused groups"], head
rows = {}
for l in md[start + 4:]:
    if not l.startswith("| "):
        break
    c = [x.strip() for x in l.strip("|").split("|")]
    rows[c[2]] = dict(workload=c[0], arch=c[1], runs=int(c[3]), einsums=int(c[4]), model=c[5], energy=float(c[6]),
                      cycles=float(c[7]), edp=float(c[8]), ratio=c[9], groups=c[10])
assert list(rows) == ["fadiff_unfused", "fadiff", "ffm_unfused", "ffm"], list(rows)
for m, r in rows.items():
    assert r["workload"] == "mobilenet_v2" and r["arch"] == "gemmini_fusable" and r["runs"] == 1, (m, r)
    assert abs(r["edp"] - r["energy"] * r["cycles"]) <= 1e-3 * r["edp"], (m, r)  # 4 digits printed
# Like with like: the Einsums and the model each price covers, and the baseline each ratio names.
for m in ("fadiff_unfused", "fadiff"):
    assert (rows[m]["einsums"], rows[m]["model"]) == (macs, "fadiff-exact"), rows[m]
for m in ("ffm_unfused", "ffm"):
    assert (rows[m]["einsums"], rows[m]["model"]) == (einsums, "ffm-fused"), rows[m]
assert rows["fadiff_unfused"]["ratio"] == "1.000x (fadiff_unfused)" and rows["ffm_unfused"]["ratio"] == "1.000x (ffm_unfused)", rows
assert rows["fadiff_unfused"]["groups"] == "none (fadiff's mappings)" and rows["ffm_unfused"]["groups"] == "none", rows
assert rows["fadiff"]["ratio"].endswith("x (fadiff_unfused)"), rows["fadiff"]
# The fusion saving: FFM's fused optimum below its own unfused optimum on the same Einsums.
ratio = float(rows["ffm"]["ratio"].split("x")[0])
assert rows["ffm"]["ratio"].endswith("x (ffm_unfused)") and ratio < 1, rows["ffm"]
assert rows["ffm"]["edp"] < rows["ffm_unfused"]["edp"] and rows["ffm"]["groups"] != "none", rows["ffm"]
print(f"ok   main job headline: ffm {ratio:.3f}x of ffm_unfused on {einsums} Einsums, fused {rows['ffm']['groups']}")
PY
echo "1 passed, 0 failed"
