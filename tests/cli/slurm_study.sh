#!/usr/bin/env bash
# A real single-node Slurm (munge + slurmctld + slurmd, started here, no systemd) runs a 2-rank
# study with `sbatch --wait` and scripts/slurm/mapfuse_study.sbatch; the HDF5 result is checked
# (24 units, computed by rank 1 only). Then the job-array variant: scripts/slurm/submit_array.sh
# submits 2 array tasks (one slice each) and the merge job that depends on them (afterok); the
# merged file must hold every unit with the metrics of a local run. The daemons are shut down.
set -u
bin=$(readlink -f "$1")
root=$(cd "$(dirname "$0")/../.." && pwd)
if [ "$(id -u)" -ne 0 ] || ! command -v slurmctld >/dev/null; then
  echo "needs root and slurm-wlm (scripts/setup.sh installs it)"; exit 1
fi
tmp=$(mktemp -d)
cleanup() { bash "$root/scripts/slurm/stop_single_node.sh"; rm -rf "$tmp"; }
trap cleanup EXIT
bash "$root/scripts/slurm/start_single_node.sh" || exit 1
cp "$root/tests/fixtures/resnet18_study.toml" "$tmp/study.toml"
cd "$tmp"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
timeout 300 sbatch --wait --export=ALL,MAPFUSE="$bin",STUDY="$tmp/study.toml",OUT="$tmp/out/s.h5" \
  --output="$tmp/job.out" "$root/scripts/slurm/mapfuse_study.sbatch"
rc=$?
cat "$tmp/job.out"
[ "$rc" -eq 0 ] || { echo "FAIL sbatch exit $rc"; tail -20 /var/log/slurm/slurmd.log; exit 1; }
/usr/bin/python3 - "$tmp/out/s.h5" <<'PY'
import h5py, sys
f = h5py.File(sys.argv[1])
u = f['units'][...]
assert len(u) == 24, len(u)
assert set(u['status']) == {0}, set(u['status'])
assert set(u['rank']) == {1}, set(u['rank'])      # rank 0 only dispatched
assert f['study'].attrs['ranks'] == 2
print('ok   MPI study')
PY
[ $? -eq 0 ] || exit 1

# The job-array variant: 2 tasks of one slice each, then the dependent merge (WAIT=1: sbatch
# --wait on the merge job, which can only succeed after both slices are written).
"$bin" run "$tmp/study.toml" --output "$tmp/local/l.h5" --quiet >/dev/null || { echo "FAIL local run"; exit 1; }
WAIT=1 MAPFUSE="$bin" timeout 300 bash "$root/scripts/slurm/submit_array.sh" "$tmp/study.toml" "$tmp/arr/a.h5" 2 \
  --output="$tmp/array-%a.out" >"$tmp/submit.out" 2>&1
rc=$?
cat "$tmp/submit.out" "$tmp"/array-*.out "$tmp"/mapfuse-merge-*.out 2>/dev/null
[ "$rc" -eq 0 ] || { echo "FAIL submit_array.sh exit $rc"; tail -20 /var/log/slurm/slurmctld.log; exit 1; }
grep -Eq '^array job [0-9]+: 2 slices' "$tmp/submit.out" && grep -Eq '^merge job [0-9]+ ->' "$tmp/submit.out" ||
  { echo "FAIL job ids not printed"; exit 1; }
/usr/bin/python3 - "$tmp" <<'PY'
import h5py, sys, numpy as np
t = sys.argv[1]
local, merged = h5py.File(t + '/local/l.h5'), h5py.File(t + '/arr/a.h5')
lu, mu = local['units'][...], merged['units'][...]
assert len(mu) == 24 and set(mu['status']) == {0}, (len(mu), set(mu['status']))
for n in ['id', 'label', 'energy_pj', 'cycles', 'edp', 'best_mapping', 'level_offset', 'level_count']:
    assert np.array_equal(lu[n], mu[n]), n
for n in ['name', 'energy_pj', 'cycles']:
    assert np.array_equal(local['levels'][n], merged['levels'][n]), n
s = merged['study'].attrs
assert 'slice_count' not in s and s['unit_count'] == 24 and s['toml'] == local['study'].attrs['toml']
ids = []
for i in range(2):
    p = h5py.File(f'{t}/arr/a.part{i}of2.h5')
    assert (p['study'].attrs['slice_index'], p['study'].attrs['slice_count']) == (i, 2)
    ids.append(set(p['units']['id']))
assert len(ids[0]) == len(ids[1]) == 12 and not ids[0] & ids[1]
print('ok   job array + dependent merge')
print('1 passed, 0 failed')
PY
