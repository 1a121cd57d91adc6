#!/usr/bin/env bash
# The MPI executor gives byte-identical results on 1, 2 and 4 ranks.
#   compare_ranks.sh <mpiexec> <mapfuse_mpi_executor_test>
set -euo pipefail
mpiexec=$1 prog=$2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for np in 1 2 4; do
  "$mpiexec" --oversubscribe --bind-to none -np "$np" "$prog" >"$tmp/np$np.out" 2>"$tmp/np$np.err" || {
    echo "FAIL: -np $np exited with $?"; cat "$tmp/np$np.err"; exit 1; }
  grep -q '^checksum=' "$tmp/np$np.out" || { echo "FAIL: -np $np printed no checksum"; cat "$tmp/np$np.err"; exit 1; }
  if grep -q 'FAIL' "$tmp/np$np.err"; then echo "FAIL: -np $np"; cat "$tmp/np$np.err"; exit 1; fi
done
lines=$(wc -l <"$tmp/np1.out")
[ "$lines" -ge 201 ] || { echo "FAIL: only $lines lines on -np 1"; exit 1; }
for np in 2 4; do
  cmp "$tmp/np1.out" "$tmp/np$np.out" || { echo "FAIL: -np $np differs from -np 1"; diff "$tmp/np1.out" "$tmp/np$np.out" | head; exit 1; }
done
echo "identical on 1, 2 and 4 ranks: $(tail -n 1 "$tmp/np1.out")"
