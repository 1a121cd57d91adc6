#!/usr/bin/env bash
# `report --csv` of a GET-fusion study carries each get_partition unit's named metrics (dram_mb,
# groups, valid_share, ...) as columns: read with pandas (Debian's /usr/bin/python3), every cell
# equals the unit's row in the HDF5 file's /metrics, and a metric a unit does not report (a sample
# unit's dram_mb, an undefined rectify rate) is an empty cell (NaN).
# Usage: get_csv_pandas.sh <mapfuse binary> <shared data dir>
set -eu
bin="$1"
export MAPFUSE_SHARED_DATA="$2"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/g.toml" <<'TOML'
name = "get_csv"
[[get]]
networks = ["resnet18"]
buffer_kb = 128
searches = ["ls", "exact", "sample"]
splits = ["random"]
budget = 50
seeds = [1]
TOML
"$bin" run "$tmp/g.toml" --output "$tmp/g.h5" --quiet >/dev/null
"$bin" report "$tmp/g.h5" --csv --no-plots >"$tmp/g.csv"
/usr/bin/python3 - "$tmp/g.h5" "$tmp/g.csv" <<'PY'
import h5py, math, pandas as pd, sys
f = h5py.File(sys.argv[1], "r")
units = f["units"][()]
want = {}
for m in f["metrics"][()]:
    want.setdefault(units[int(m["unit"])]["label"].decode(), {})[m["name"].decode()] = float(m["value"])
csv = pd.read_csv(sys.argv[2])
assert len(csv) == 3, csv
for col in ("dram_mb", "mbu_kb", "groups", "valid_share", "rectify_rate", "optimal"):
    assert col in csv.columns, (col, list(csv.columns))
names = set().union(*want.values())
for _, row in csv.iterrows():
    got = want[row["label"]]
    for name in names:
        if name in got and not math.isnan(got[name]):
            assert abs(row[name] - got[name]) <= 1e-12 * max(1.0, abs(got[name])), (row["label"], name, row[name], got[name])
        else:
            assert math.isnan(row[name]), (row["label"], name, row[name])
ls = csv[csv.label.str.contains(" ls\\+random ")].iloc[0]
exact = csv[csv.label.str.endswith(" exact")].iloc[0]
sample = csv[csv.label.str.contains(" sample ")].iloc[0]
# Real values: the heuristic never beats the optimum; a sample unit has a share and no DRAM figure.
assert ls.dram_mb > 0 and ls.groups >= 1 and ls.dram_mb >= exact.dram_mb - 1e-9 and exact.optimal == 1, (ls, exact)
assert 0 <= sample.valid_share <= 1 and math.isnan(sample.dram_mb), sample
print("ok   GET metrics as CSV columns:", ", ".join(c for c in csv.columns if c in names))
PY
echo "1 passed, 0 failed"
