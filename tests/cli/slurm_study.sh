#!/usr/bin/env bash
# A real single-node Slurm (munge + slurmctld + slurmd, started here, no systemd) runs a 2-rank
# study with `sbatch --wait` and scripts/slurm/mapfuse_study.sbatch; the HDF5 result is checked
# (24 units, computed by rank 1 only) and the daemons are shut down.
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
print('1 passed, 0 failed')
PY
