#pragma once
// Runs work units on this machine: options.threads worker threads take the next unit (largest
// cost hint first) as they become free; results reach the sink on the calling thread.
#include <vector>

#include "cluster/executor.hpp"

namespace mapfuse {

// With more than one thread, fn runs concurrently on several threads (it must be thread-safe and
// must not call MPI); with one thread everything runs on the calling thread.
// `rank` is written into every result (the MPI executor passes the world rank when it falls back
// to local execution). Rethrows an exception from the sink or progress hook after the worker
// threads have finished the units they had started.
RunReport run_local(std::vector<WorkUnit> units, const UnitFunction& fn, const ResultSink& sink,
                    const RunOptions& options = {}, int rank = 0);

}  // namespace mapfuse
