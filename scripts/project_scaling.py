#!/usr/bin/python3
"""Projects the parallel efficiency of a study on many MPI ranks from one finished run.

The model is the MPI executor's own schedule (cluster/mpi_executor.cpp): rank 0 is a master that
only dispatches and collects; a worker that finishes a unit asks for the next one; the master
serves one request at a time and spends `overhead` seconds on each (dispatch + collect + journal,
measured by bench/bench_cluster.cpp); units go out in dispatch order, largest cost hint first
(approximated here by the recorded unit times, longest first: partitioners/work_unit.hpp).
Each unit takes the wall time it took in the measured run.

    scripts/project_scaling.py out/gemmini_scaleup.h5 --overhead-us 25 --ranks 2 3 256 1024

Efficiency at P ranks = serial time / (P x makespan), serial time = sum of unit times (what one
rank spends); "per worker" divides by the P - 1 worker ranks instead. The projection ignores
network contention and assumes unit times do not change with the machine: it shows what the
schedule itself (unit granularity, the longest unit, master overhead) allows.
"""
import argparse
import heapq
import sys

import h5py
import numpy as np


def makespan(times, workers, overhead):
    """Event simulation of the master/worker schedule; returns the finishing time of the last unit."""
    free = [0.0] * workers  # when each worker next asks for work
    heapq.heapify(free)
    master = 0.0  # when the master is next free to serve a request
    end = 0.0
    for t in times:
        ask = heapq.heappop(free)
        start = max(ask, master) + overhead  # the master serves requests one at a time
        master = start
        done = start + t
        end = max(end, done)
        heapq.heappush(free, done)
    return end + overhead  # the last result still has to be collected


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("study", help="a finished study's HDF5 file")
    ap.add_argument("--overhead-us", type=float, default=25.0, help="master time per unit, microseconds")
    ap.add_argument("--ranks", type=int, nargs="+", default=[2, 3, 256, 1024])
    ap.add_argument("--replicate", type=int, default=1,
                    help="project a study N times as large (N copies of every unit), e.g. more seeds or sweep points")
    args = ap.parse_args()
    try:
        with h5py.File(args.study, "r") as f:
            units = f["units"][...]
    except (OSError, KeyError) as e:
        sys.exit(f"error: {args.study}: not a mapfuse study file ({e})")
    times = np.sort(units["wall_seconds"].astype(float))[::-1]
    times = np.repeat(times, args.replicate)
    if len(times) == 0:
        sys.exit(f"error: {args.study}: the study has no units")
    serial = float(times.sum())
    overhead = args.overhead_us * 1e-6
    print(f"units {len(times)}  serial {serial:.1f} s  mean {times.mean():.3f} s  "
          f"median {np.median(times):.3f} s  longest {times.max():.3f} s  master overhead {args.overhead_us:.0f} us/unit")
    print("| ranks | workers | makespan (s) | speedup | efficiency | per worker |")
    print("|---:|---:|---:|---:|---:|---:|")
    for p in args.ranks:
        if p < 2:
            print(f"| {p} | (local) | {serial:.1f} | 1.00 | 100.0% | 100.0% |")
            continue
        m = makespan(times, p - 1, overhead)
        print(f"| {p} | {p - 1} | {m:.2f} | {serial / m:.2f} | {100 * serial / (p * m):.1f}% | "
              f"{100 * serial / ((p - 1) * m):.1f}% |")


if __name__ == "__main__":
    main()
