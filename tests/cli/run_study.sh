#!/usr/bin/env bash
# `mapfuse run`: a study's HDF5 file, resume after SIGKILL equal to an uninterrupted run, the
# same results on 1, 2 and 4 MPI ranks, and bad studies rejected with exit status 2.
set -u
bin="$1"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader
fail=0
check() { if "$@"; then echo "ok   $*"; else echo "FAIL $*"; fail=1; fi; }

# The shared test study with a larger budget, so that a unit takes long enough to be killed mid-run.
sed 's/^budget = .*/budget = 30000/' "$(dirname "$0")/../fixtures/resnet18_study.toml" >"$tmp/study.toml"

# Uninterrupted reference run.
check "$bin" run "$tmp/study.toml" --output "$tmp/ref/ref.h5" --quiet
# Killed mid-way, then resumed with the same command.
"$bin" run "$tmp/study.toml" --output "$tmp/killed/k.h5" --threads 1 --quiet >/dev/null 2>&1 &
pid=$!
# Kill it once a few units are journaled (mid-run whatever the machine's speed).
for _ in $(seq 1 300); do
  [ -f "$tmp/killed/k.h5.journal" ] && [ "$(wc -l <"$tmp/killed/k.h5.journal")" -ge 4 ] && break
  sleep 0.05
done
kill -9 $pid 2>/dev/null
wait $pid 2>/dev/null
lines=$(wc -l <"$tmp/killed/k.h5.journal")
check test "$lines" -lt 25     # it was really interrupted (header + fewer than 24 units)
check test ! -e "$tmp/killed/k.h5"
check "$bin" run "$tmp/study.toml" --output "$tmp/killed/k.h5" --quiet
# The same study over MPI ranks (rank 0 only dispatches).
for np in 2 4; do
  check mpirun --oversubscribe --bind-to none -np $np "$bin" run "$tmp/study.toml" --output "$tmp/np$np/r.h5" --threads 1 --quiet
done
/usr/bin/python3 - "$tmp" <<'PY' || fail=1
import h5py, sys
t = sys.argv[1]
def table(p):
    u = h5py.File(p)['units'][...]
    return [(r['id'], r['status'], r['energy_pj'], r['cycles'], r['best_mapping']) for r in u], set(u['rank'])
ref, _ = table(t + '/ref/ref.h5')
assert len(ref) == 24, len(ref)
for other in ['/killed/k.h5', '/np2/r.h5', '/np4/r.h5']:
    got, ranks = table(t + other)
    assert got == ref, other
    if 'np' in other: assert 0 not in ranks, (other, ranks)
f = h5py.File(t + '/ref/ref.h5')
assert f['study'].attrs['name'] == 'tiny'
print('1 passed, 0 failed')
PY

# Bad studies: file, key and exit status 2.
expect2() { "$@" >/dev/null 2>"$tmp/err"; rc=$?; if [ $rc -eq 2 ] && grep -Eq "$pattern" "$tmp/err"; then echo "ok   $pattern"; else echo "FAIL rc=$rc $(cat "$tmp/err")"; fail=1; fi; }
printf 'name = "x"\n[[architecture]]\nspec = "gemmini_default"\n' >"$tmp/empty.toml"
pattern='empty.toml.*workload.*nothing to run'; expect2 "$bin" run "$tmp/empty.toml" --output "$tmp/e/e.h5"
sed 's/name = "random"/name = "randm"/' "$tmp/study.toml" >"$tmp/method.toml"
pattern="method.toml:[0-9]+.*method.name: unknown method 'randm'.*did you mean 'random'"; expect2 "$bin" run "$tmp/method.toml" --output "$tmp/m/m.h5"
pattern="cannot write"; expect2 "$bin" run "$tmp/study.toml" --output /proc/nope/x.h5
sed 's/seeds = \[3, 4\]/seeds = [5]/' "$tmp/study.toml" >"$tmp/other.toml"
pattern='different study'; expect2 "$bin" run "$tmp/other.toml" --output "$tmp/ref/ref.h5"
# A journal whose units this study does not have (as another version's unit parameters would
# leave it): refused, not kept beside recomputed twins.
mkdir -p "$tmp/stale" && sed '2s/"unit_id":"[^"]*"/"unit_id":"not-a-unit-of-this-study"/' "$tmp/killed/k.h5.journal" >"$tmp/stale/s.h5.journal"
pattern='s.h5.journal.*holds 1 results of units this study does not have'; expect2 "$bin" run "$tmp/study.toml" --output "$tmp/stale/s.h5"
# A journal another build wrote (another version or cost-model fingerprint): refused with both
# producers named; --recompute-stale computes those units again and the file equals the reference.
mkdir -p "$tmp/other"
sed '2,3s/"producer":"[^"]*"/"producer":"mapfuse 0.0.9\/0123456789abcdef"/' "$tmp/ref/ref.h5.journal" >"$tmp/other/o.h5.journal"
check test "$(grep -c 'mapfuse 0.0.9' "$tmp/other/o.h5.journal")" -eq 2
pattern='o.h5.journal.*another mapfuse version or cost model \(2 by mapfuse 0.0.9/0123456789abcdef\).*--recompute-stale'
expect2 "$bin" run "$tmp/study.toml" --output "$tmp/other/o.h5"
check test ! -e "$tmp/other/o.h5"
"$bin" run "$tmp/study.toml" --output "$tmp/other/o.h5" --recompute-stale 2>"$tmp/err"; rc=$?
check test $rc -eq 0
check grep -q 'resuming tiny: 22 of 24 units already journaled' "$tmp/err"
/usr/bin/python3 - "$tmp" <<'PY' || fail=1
import h5py, sys
t = sys.argv[1]
key = lambda p: sorted((r['id'], r['energy_pj'], r['cycles']) for r in h5py.File(p)['units'][...])
assert key(t + '/other/o.h5') == key(t + '/ref/ref.h5')
v = h5py.File(t + '/other/o.h5')['study'].attrs['mapfuse_version']
assert v.startswith('mapfuse ') and '/' in v, v
print('1 passed, 0 failed')
PY
exit $fail
