#!/usr/bin/env bash
# GET-fusion's classifier data as a study ([[get_dataset]], get_dataset units): the study file's
# /get_dataset on 1 rank and on `mpirun -np 2` are equal and equal the CSV the single-process
# get-train writes; get-train --dataset (the study file or that CSV) trains the same model bytes as
# get-train sampling in-process with the same seed; bad input exits 2 naming file and key.
# Usage: get_dataset.sh <mapfuse binary> <shared data dir>
set -u
bin="$1"
export MAPFUSE_SHARED_DATA="$2"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
. "$(dirname "$0")/lib/expect.sh"

nets=resnet18,squeezenet1_0,vgg16
cat >"$tmp/d.toml" <<'TOML'
name = "d"
[[get_dataset]]
schemes = ["brr", "lbdf"]
networks = ["resnet18", "squeezenet1_0", "vgg16"]
groups = 24
seed = 3
shards = 3
TOML
"$bin" run "$tmp/d.toml" --output "$tmp/one/d.h5" --threads 1 --quiet >/dev/null || { echo "FAIL run 1 rank"; fail=1; }
mpirun --oversubscribe --bind-to none -np 2 "$bin" run "$tmp/d.toml" --output "$tmp/two/d.h5" --threads 1 --quiet \
  >/dev/null || { echo "FAIL run mpirun -np 2"; fail=1; }
"$bin" get-train --scheme lbdf --networks "$nets" --groups 24 --seed 3 --epochs 1 --out "$tmp/direct" \
  >/dev/null || { echo "FAIL get-train"; fail=1; }
"$bin" get-train --scheme lbdf --dataset "$tmp/two/d.h5" --seed 3 --epochs 1 --out "$tmp/from_h5" \
  >/dev/null || { echo "FAIL get-train --dataset h5"; fail=1; }
"$bin" get-train --scheme lbdf --dataset "$tmp/direct/get_lbdf_dataset.csv" --seed 3 --epochs 1 --out "$tmp/from_csv" \
  >/dev/null || { echo "FAIL get-train --dataset csv"; fail=1; }
for d in from_h5 from_csv; do
  for f in gnn_lbdf.gnn get_lbdf_dataset.csv; do
    cmp -s "$tmp/direct/$f" "$tmp/$d/$f" && echo "ok   $d/$f equals the in-process get-train's" \
      || { echo "FAIL $d/$f differs from the in-process get-train's"; fail=1; }
  done
done
/usr/bin/python3 - "$tmp/one/d.h5" "$tmp/two/d.h5" "$tmp/direct/get_lbdf_dataset.csv" <<'PY' || fail=1
import csv, h5py, sys
def rows(path):
    t = h5py.File(path)["get_dataset"][...]
    return [tuple(x.decode() if isinstance(x, bytes) else x.item() for x in r) for r in t]
one, two = rows(sys.argv[1]), rows(sys.argv[2])
assert one == two, "1 rank and mpirun -np 2 differ"
names = h5py.File(sys.argv[1])["get_dataset"].dtype.names
lbdf = [dict(zip(names, r)) for r in one if r[0] == "lbdf"]
split = {0: "train", 1: "validation", 2: "test"}
want = list(csv.DictReader(open(sys.argv[3])))
assert len(lbdf) == len(want) == 3 * 24 * 5, (len(lbdf), len(want))
for a, b in zip(lbdf, want):
    assert (a["network"], split[a["split"]], a["buffer_kb"], a["buffer_need_bytes"], a["valid"], a["group"]) == \
        (b["network"], b["split"], float(b["buffer_kb"]), float(b["buffer_need_bytes"]), int(b["valid"]), b["group"]), (a, b)
assert {r[0] for r in one} == {"brr", "lbdf"} and sorted({r[3] for r in one}) == [0, 1, 2]
print(f"ok   /get_dataset: {len(one)} rows, 1 rank = mpirun -np 2 = the in-process CSV ({len(want)} lbdf rows)")
PY

expect "dataset file missing" 2 "no-such.h5.*cannot open the dataset file" -- \
  "$bin" get-train --scheme lbdf --dataset "$tmp/no-such.h5" --epochs 1 --out "$tmp/x"
expect "a model file as dataset" 2 "gnn_lbdf.gnn.*not an HDF5 file; expected a study file of get_dataset units or a CSV" -- \
  "$bin" get-train --scheme lbdf --dataset "$tmp/from_h5/gnn_lbdf.gnn" --epochs 1 --out "$tmp/x"
/usr/bin/python3 -c "import h5py, sys; h5py.File(sys.argv[1], 'w')" "$tmp/empty.h5"
expect "an HDF5 file without /get_dataset" 2 "empty.h5.*has no /get_dataset table" -- \
  "$bin" get-train --scheme lbdf --dataset "$tmp/empty.h5" --epochs 1 --out "$tmp/x"
sed -i 's/schemes = \["brr", "lbdf"\]/schemes = ["brr"]/; s/name = "d"/name = "b"/' "$tmp/d.toml"
"$bin" run "$tmp/d.toml" --output "$tmp/brr.h5" --threads 1 --quiet >/dev/null || { echo "FAIL run brr"; fail=1; }
expect "dataset of the other scheme" 2 "holds no lbdf samples \(it has: brr\)" -- \
  "$bin" get-train --scheme lbdf --dataset "$tmp/brr.h5" --epochs 1 --out "$tmp/x"
/usr/bin/python3 - "$tmp/direct/get_lbdf_dataset.csv" "$tmp/bad.csv" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
rows[1][-1] = rows[1][-1].split(";")[0] + ";/no/such/op"
csv.writer(open(sys.argv[2], "w"), lineterminator="\n").writerows(rows)
PY
expect "unknown operator in a CSV group" 2 "bad.csv.*'/no/such/op' is no operator of" -- \
  "$bin" get-train --scheme lbdf --dataset "$tmp/bad.csv" --epochs 1 --out "$tmp/x"
sed '2s/,train,/,training,/; 2s/,validation,/,training,/; 2s/,test,/,training,/' "$tmp/direct/get_lbdf_dataset.csv" >"$tmp/bad2.csv"
expect "bad split in a CSV" 2 "bad2.csv:2.*'training'; expected train, validation or test" -- \
  "$bin" get-train --scheme lbdf --dataset "$tmp/bad2.csv" --epochs 1 --out "$tmp/x"
printf 'name = "e"\n[[get_dataset]]\nschemes = ["lbdf"]\nshards = 0\n' >"$tmp/e.toml"
expect "shards = 0" 2 "e.toml.*shards.*must be an integer in \[1, 10000\]" -- "$bin" run "$tmp/e.toml" --output "$tmp/e.h5"
printf 'name = "e"\n[[get_dataset]]\nschemes = ["lbdf"]\n[[get]]\nnetworks = ["resnet18"]\nbuffer_kb = 128\n' >"$tmp/e.toml"
expect "[[get_dataset]] beside [[get]]" 2 "e.toml.*a dataset study" -- "$bin" run "$tmp/e.toml" --output "$tmp/e.h5"
exit $fail
