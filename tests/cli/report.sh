#!/usr/bin/env bash
# `mapfuse report`: Markdown and CSV tables of a study file and valid PNG plots.
set -eu
bin="$1"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The shared test study, cut to three layers and one seed.
sed -e '0,/^name = .*/s//name = "report_test"/' -e 's/^layers = .*/layers = ["conv1", "layer2.0.downsample", "fc"]/' \
  -e 's/^budget = .*/budget = 2000/' -e 's/^seeds = .*/seeds = [1]/' \
  "$(dirname "$0")/../fixtures/resnet18_study.toml" >"$tmp/s.toml"
"$bin" run "$tmp/s.toml" --output "$tmp/s.h5" --quiet >/dev/null
"$bin" report "$tmp/s.h5" --plots "$tmp/plots" >"$tmp/report.md" 2>"$tmp/err"
grep -q "^# Study report_test" "$tmp/report.md"
[ "$(grep -c '^| resnet18/' "$tmp/report.md")" -eq 6 ]                 # six units
[ "$(grep -c '^| resnet18 | ' "$tmp/report.md")" -eq 2 ]              # two network totals
"$bin" report "$tmp/s.h5" --csv --no-plots >"$tmp/report.csv"
head -1 "$tmp/report.csv" | grep -q '^id,kind,label,status,message,rank,wall_seconds,energy_pj,cycles,edp,best_mapping$'
[ "$(wc -l <"$tmp/report.csv")" -eq 7 ]
for f in edp_by_layer energy_by_level_gemmini_default energy_by_level_fadiff_small; do
  png="$tmp/plots/$f.png"
  [ -s "$png" ] || { echo "missing $png"; exit 1; }
  [ "$(head -c 8 "$png" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] || { echo "not a PNG: $png"; exit 1; }
  [ "$(stat -c %s "$png")" -gt 5000 ]
done
# A file that is not a study: exit 2 with the reason.
printf 'nope' >"$tmp/bad.h5"
set +e
"$bin" report "$tmp/bad.h5" 2>"$tmp/err"; rc=$?
set -e
[ "$rc" -eq 2 ] && grep -q "bad.h5" "$tmp/err"
# Projected scaling from the recorded unit times: without master overhead one worker does
# everything in exactly the serial time (speedup 1.00, half of two ranks); three workers share it.
root=$(cd "$(dirname "$0")/../.." && pwd)
/usr/bin/python3 "$root/scripts/project_scaling.py" "$tmp/s.h5" --overhead-us 0 --ranks 1 2 4 >"$tmp/scaling.md"
grep -q '^| 2 | 1 | .* | 1.00 | 50.0% | 100.0% |$' "$tmp/scaling.md" || { cat "$tmp/scaling.md"; exit 1; }
grep -q '^| 4 | 3 |' "$tmp/scaling.md"
set +e
/usr/bin/python3 "$root/scripts/project_scaling.py" "$tmp/bad.h5" 2>"$tmp/err"; rc=$?
set -e
[ "$rc" -ne 0 ] && grep -q "not a mapfuse study file" "$tmp/err"
echo "1 passed, 0 failed"
