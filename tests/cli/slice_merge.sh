#!/usr/bin/env bash
# `mapfuse run --slice i/n` and `mapfuse merge` without Slurm: slices are disjoint and balanced,
# a slice resumes like a run and keeps its first start time, the merged file equals a single run's
# (apart from times, ranks and wall times), and bad input (slice spec, another study, missing or
# duplicated units) exits with status 2 and writes nothing.
set -u
bin="$1"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fixtures="$(cd "$(dirname "$0")/../fixtures" && pwd)"
fail=0
check() { if "$@" >/dev/null; then echo "ok   $*"; else echo "FAIL $*"; fail=1; fi; }
# expect2 <regex> -- command...: exit status 2 and stderr matching the regex.
expect2() {
  local pattern="$1"; shift 2
  "$@" >"$tmp/stdout.txt" 2>"$tmp/stderr.txt"; local rc=$?
  if [ $rc -eq 2 ] && grep -Eq -- "$pattern" "$tmp/stderr.txt"; then echo "ok   $pattern"
  else echo "FAIL rc=$rc (want 2, /$pattern/): $(cat "$tmp/stderr.txt")"; fail=1; fi
}
cd "$tmp"
cp "$fixtures/resnet18_study.toml" s.toml   # 24 random-mapper units
cat >ex.toml <<EOF
name = "ex"
[[workload]]
spec = "$fixtures/mm.toml"
[[architecture]]
spec = "$fixtures/two_level.toml"
[[architecture]]
spec = "gemmini_default"
[[architecture]]
spec = "fadiff_small"
[method]
name = "exhaustive"
EOF

# Whole-study reference runs.
check "$bin" run s.toml --output ref/s.h5 --quiet
check "$bin" run ex.toml --output ref/ex.h5 --quiet
# Two slices of the random study.
check "$bin" run s.toml --slice 0/2 --output parts/s.part0of2.h5 --quiet
check "$bin" run s.toml --slice 1/2 --output parts/s.part1of2.h5 --quiet
# Resume of a slice: keep the header and 3 units of slice 1's journal, as if it had been killed.
start1=$(h5dump -a /study/start_time parts/s.part1of2.h5 | sed -n 's/.*(0): "\(.*\)"/\1/p')
head -n 4 parts/s.part1of2.h5.journal >j && mv j parts/s.part1of2.h5.journal && rm parts/s.part1of2.h5
sleep 1.2   # a later start time would show
"$bin" run s.toml --slice 1/2 --output parts/s.part1of2.h5 >"$tmp/resume.out" 2>&1
check test $? -eq 0
check grep -q "tiny slice 1/2: 12 units (9 computed now, 0 failed)" "$tmp/resume.out"
start1b=$(h5dump -a /study/start_time parts/s.part1of2.h5 | sed -n 's/.*(0): "\(.*\)"/\1/p')
check test -n "$start1" -a "$start1" = "$start1b"   # the first run's start time survives the resume
# The exhaustive study in 4 slices of its 3 units: one slice is empty.
for i in 0 1 2 3; do check "$bin" run ex.toml --slice $i/4 --output parts/ex.part${i}of4.h5 --quiet; done

check "$bin" merge s.toml parts/s.part1of2.h5 parts/s.part0of2.h5 --output merged/s.h5
check "$bin" merge ex.toml parts/ex.part{0,1,2,3}of4.h5 --output merged/ex.h5
# The merged output behaves like a finished run: its journal holds every unit.
mkdir rerun && cp merged/s.h5 merged/s.h5.journal rerun/
"$bin" run s.toml --output rerun/s.h5 --quiet >"$tmp/rerun.out" 2>&1
check grep -q "tiny: 24 units (0 computed now, 0 failed)" "$tmp/rerun.out"

/usr/bin/python3 - <<'PY' || fail=1
import h5py, numpy as np
per_run = {'start_time', 'end_time', 'ranks', 'threads'}
def same_content(a_path, b_path):
    a, b = h5py.File(a_path), h5py.File(b_path)
    assert set(a) == set(b) == {'study', 'units', 'levels', 'trace', 'pareto'}, (set(a), set(b))
    assert dict(a.attrs) == dict(b.attrs)
    sa, sb = dict(a['study'].attrs), dict(b['study'].attrs)
    assert set(sa) == set(sb), (set(sa) ^ set(sb))           # no slice attributes in the merged file
    for k in set(sa) - per_run:
        assert sa[k] == sb[k], (k, sa[k], sb[k])
    for d in ['units', 'levels', 'pareto']:
        x, y = a[d][...], b[d][...]
        assert x.dtype == y.dtype and len(x) == len(y), d
        for n in x.dtype.names:
            if d == 'units' and n in ('rank', 'wall_seconds'): continue
            assert np.array_equal(x[n], y[n]), (d, n)
    x, y = a['trace'][...], b['trace'][...]
    assert x.shape == y.shape and np.array_equal(x[:, 1:], y[:, 1:]), 'trace'
    return a, b
ref, m = same_content('ref/s.h5', 'merged/s.h5')
assert len(m['units']) == 24 and set(m['units']['status']) == {0}
assert m['study'].attrs['unit_count'] == 24 and m['study'].attrs['ranks'] == 2
p = [h5py.File(f'parts/s.part{i}of2.h5') for i in (0, 1)]
for i, f in enumerate(p):
    assert f['study'].attrs['slice_index'] == i and f['study'].attrs['slice_count'] == 2
    assert len(f['units']) == 12, len(f['units'])         # equal cost hints: an even split
ids = [set(f['units']['id']) for f in p]
assert not (ids[0] & ids[1]) and ids[0] | ids[1] == set(ref['units']['id'])
assert m['study'].attrs['start_time'] == min(f['study'].attrs['start_time'] for f in p)
ref, m = same_content('ref/ex.h5', 'merged/ex.h5')
assert len(m['units']) == 3 and len(m['pareto']) >= 3 and len(m['levels']) == 10, (len(m['pareto']), len(m['levels']))
sizes = sorted(len(h5py.File(f'parts/ex.part{i}of4.h5')['units']) for i in range(4))
assert sizes == [0, 1, 1, 1], sizes
print('1 passed, 0 failed')
PY

# Bad input.
for spec in 2/2 -1/2 1/0 a/b 1 '' 0/ 1/2/3; do
  expect2 "--slice: '$spec'" -- "$bin" run s.toml --slice "$spec" --output bad/x.h5 --quiet
done
check test ! -e bad/x.h5.journal
sed 's/seeds = \[3, 4\]/seeds = [5, 6]/' s.toml >other.toml
check "$bin" run other.toml --slice 1/2 --output other/o.part1of2.h5 --quiet
expect2 "o.part1of2.h5: part belongs to a different study \('tiny', study id [0-9a-f]+; this study is [0-9a-f]+\)" -- \
  "$bin" merge s.toml parts/s.part0of2.h5 other/o.part1of2.h5 --output out/m.h5
# Missing units: every unit of slice 1 is listed by label.
expect2 "^mapfuse: error: 12 of 24 units of the study are in no part; missing:" -- \
  "$bin" merge s.toml parts/s.part0of2.h5 --output out/m.h5
/usr/bin/python3 - "$tmp/stderr.txt" <<'PY' || fail=1
import h5py, sys
err = open(sys.argv[1]).read()
labels = [l.decode() for l in h5py.File('parts/s.part1of2.h5')['units']['label']]
for l in labels:
    assert f'  {l}  (slice 1/2)\n' in err, (l, err)
print('ok   the 12 missing units of slice 1/2 are listed by label')
PY
expect2 "s.part0of2.h5: part is slice 0/2, and so is .*s.part0of2.h5" -- \
  "$bin" merge s.toml parts/s.part0of2.h5 parts/s.part0of2.h5 parts/s.part1of2.h5 --output out/m.h5
expect2 "s.part0of2.h5: unit '[^']+' \(id [0-9a-f]{16}\) is also in 'ref/s.h5'" -- \
  "$bin" merge s.toml ref/s.h5 parts/s.part0of2.h5 --output out/m.h5
expect2 "--output: 'parts/s.part0of2.h5' is one of the parts" -- \
  "$bin" merge s.toml parts/s.part0of2.h5 parts/s.part1of2.h5 --output parts/s.part0of2.h5
expect2 "nope.h5: cannot open study file" -- "$bin" merge s.toml parts/s.part0of2.h5 parts/nope.h5 --output out/m.h5
check test ! -e out   # nothing written by a refused merge
# A slice's journal is not resumed as another slice or as the whole study.
expect2 "journal holds slice 0/2, this run is slice 0/3; refusing to mix results" -- \
  "$bin" run s.toml --slice 0/3 --output parts/s.part0of2.h5 --quiet
expect2 "journal holds slice 0/2, this run is the whole study" -- \
  "$bin" run s.toml --output parts/s.part0of2.h5 --quiet
exit $fail
