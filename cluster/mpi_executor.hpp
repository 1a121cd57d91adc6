#pragma once
// The MPI executor: rank 0 is a master that only dispatches and collects; every other rank asks
// for a unit, computes it with the unit function, sends the result back and asks again (dynamic
// scheduling, largest cost hint first). Workers never call the sink and never write files. With
// one rank it runs everything locally (run_local with options.threads). No MPI header here.
#include <vector>

#include "cluster/executor.hpp"

namespace mapfuse {

// MPI_Init_thread / MPI_Finalize for the lifetime of the object (the program creates one in
// main). Requests MPI_THREAD_FUNNELED: only the main thread calls MPI; other threads may compute.
// Does nothing if MPI was already initialised by someone else (and then does not finalise).
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool is_master() const { return rank_ == 0; }
  bool funneled() const { return funneled_; }  // the library granted at least FUNNELED

 private:
  bool owns_ = false;
  bool funneled_ = false;
  int rank_ = 0;
  int size_ = 1;
};

// Collective over MPI_COMM_WORLD (every rank calls it; MPI must be initialised, e.g. by
// MpiSession). `units` matters on rank 0 only. The sink and progress hook run on rank 0 only.
// Rank 0's report counts all results; a worker's report has computed_here and its final status.
RunReport run_mpi(std::vector<WorkUnit> units, const UnitFunction& fn, const ResultSink& sink,
                  const RunOptions& options = {});

}  // namespace mapfuse
