#!/usr/bin/env bash
# docs/results.md's three lines of pandas, run exactly as written (on this test's study file
# instead of out/quickstart.h5) under Debian's /usr/bin/python3: they load the unit table with its
# parameter columns and group it.
set -eu
bin="$1"
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sed -e '0,/^name = .*/s//name = "pandas_test"/' -e 's/^layers = .*/layers = ["conv1", "fc"]/' \
  -e 's/^budget = .*/budget = 1000/' "$root/tests/fixtures/resnet18_study.toml" >"$tmp/s.toml"
"$bin" run "$tmp/s.toml" --output "$tmp/s.h5" --quiet >/dev/null
# The python block after the marker, verbatim but for the file name.
sed -n '/<!-- pandas-snippet -->/,/^```$/p' "$root/docs/results.md" | sed '1,2d;$d' >"$tmp/snippet.py"
[ "$(wc -l <"$tmp/snippet.py")" -eq 3 ] || { cat "$tmp/snippet.py"; exit 1; }
sed -i "s#out/quickstart.h5#$tmp/s.h5#" "$tmp/snippet.py"
(cd "$tmp" && /usr/bin/python3 snippet.py) >"$tmp/out"
cat "$tmp/out"
# One group per architecture, indexed by the decoded columns, each the minimum of its units' EDP
# (checked against the CSV: the smallest edp of that architecture's rows).
for arch in gemmini_default fadiff_small; do
  line=$(grep -E "^resnet18 +$arch +random +" "$tmp/out" || grep -E "^ +$arch +random +" "$tmp/out")
  got=$(echo "$line" | awk '{print $NF}')
  want=$("$bin" report "$tmp/s.h5" --csv --no-plots | /usr/bin/python3 -c '
import csv, sys
print(min(float(r["edp"]) for r in csv.DictReader(sys.stdin) if r["arch"] == sys.argv[1] and r["status"] == "done"))' "$arch")
  /usr/bin/python3 -c "import sys; g, w = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if abs(g - w) <= 1e-5 * w else 1)" "$got" "$want" ||
    { echo "FAIL $arch: pandas $got, CSV minimum $want"; exit 1; }
done
echo "1 passed, 0 failed"
