#!/usr/bin/env bash
# `mapfuse report`: the headline table, the unit table on request (layers in network order), the
# CSV with parameter columns, valid PNG plots, and clear refusals (exit 2, naming the file) of a
# file that is not a study, of a newer schema version and of a half-written file.
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
grep -q "^## Headline" "$tmp/report.md"
# The headline: one row per architecture (the random mapper, layer by layer, is its own baseline),
# pricing the three layers on the per-layer model.
[ "$(grep -c '^| resnet18 | [a-z_]* | random | 1 | 3 | per-layer | .* | 1.000x (random) | none (layer by layer) |$' "$tmp/report.md")" -eq 2 ]
[ "$(grep -c '^| resnet18/' "$tmp/report.md")" -eq 0 ]                 # no unit rows by default
grep -q -- "--csv" "$tmp/report.md"                                    # points to the full table
[ "$(grep -c '^| resnet18 | ' "$tmp/report.md")" -eq 4 ]              # headline + network totals
"$bin" report "$tmp/s.h5" --units --no-plots >"$tmp/units.md"
[ "$(grep -c '^| resnet18/' "$tmp/units.md")" -eq 6 ]                  # six units
# Network order, not name order ("fc" sorts before "layer2..." by name).
order=$(grep '^| resnet18/.* @ gemmini_default ' "$tmp/units.md" | sed 's/^| resnet18\/\([^ ]*\) .*/\1/' | tr '\n' ' ')
[ "$order" = "conv1 layer2.0.downsample fc " ] || { echo "unit order: $order"; exit 1; }
"$bin" report "$tmp/s.h5" --csv --no-plots >"$tmp/report.csv"
head -1 "$tmp/report.csv" | grep -q '^id,kind,label,workload,einsum,arch,method,seed,objective,einsum_index,einsum_count,status,message,rank,wall_seconds,energy_pj,cycles,edp,best_mapping$'
[ "$(wc -l <"$tmp/report.csv")" -eq 7 ]
# The parameters as columns: fc is the third layer the study lists, seed 1, one layer per unit.
grep -q '^[0-9a-f]*,map_layer,resnet18/fc @ fadiff_small seed 1,resnet18,fc,fadiff_small,random,1,edp,2,1,done,' "$tmp/report.csv"
for f in edp_by_layer energy_by_level_gemmini_default energy_by_level_fadiff_small; do
  png="$tmp/plots/$f.png"
  [ -s "$png" ] || { echo "missing $png"; exit 1; }
  [ "$(head -c 8 "$png" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] || { echo "not a PNG: $png"; exit 1; }
  [ "$(stat -c %s "$png")" -gt 5000 ]
done
# Bad input: exit 2, naming the file and what is wrong.
refused() {  # file, regex the message must match
  set +e
  "$bin" report "$1" --no-plots >/dev/null 2>"$tmp/err"; local rc=$?
  set -e
  [ "$rc" -eq 2 ] && grep -q "$(basename "$1")" "$tmp/err" && grep -Eq "$2" "$tmp/err" ||
    { echo "FAIL $1: status $rc"; cat "$tmp/err"; exit 1; }
}
printf 'nope' >"$tmp/bad.h5"
refused "$tmp/bad.h5" "not an HDF5 file"
/usr/bin/python3 -c 'import h5py, sys; h5py.File(sys.argv[1], "w").attrs["format"] = "something-else"' "$tmp/other.h5"
refused "$tmp/other.h5" "not a mapfuse study file"
cp "$tmp/s.h5" "$tmp/newer.h5"
/usr/bin/python3 -c 'import h5py, numpy, sys; h5py.File(sys.argv[1], "r+").attrs["schema_version"] = numpy.int32(99)' "$tmp/newer.h5"
refused "$tmp/newer.h5" "newer mapfuse: study file schema version 99"
head -c $(($(stat -c %s "$tmp/s.h5") / 2)) "$tmp/s.h5" >"$tmp/half.h5"
refused "$tmp/half.h5" "half-written or damaged"
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
