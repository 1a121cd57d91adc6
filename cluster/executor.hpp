#pragma once
// What every executor shares: the unit function (what computes a unit; the cluster never knows),
// the result sink (where results go, on the calling thread of rank 0 only), run options and the
// run report. No MPI and no cost-model headers here.
#include <atomic>
#include <cstddef>
#include <functional>
#include <string>

#include "partitioners/work_unit.hpp"
#include "results/unit_result.hpp"

namespace mapfuse {

// Computes one unit. May throw: the executor turns the exception into a Failed result carrying
// the message. The executor overwrites unit_id/kind/label (from the unit), rank and wall_seconds.
using UnitFunction = std::function<UnitResult(const WorkUnit&)>;

// Receives each result exactly once, in arrival order, on the thread that called the executor
// (rank 0 under MPI), never concurrently with itself.
using ResultSink = std::function<void(const UnitResult&)>;

// Progress after each result: units finished (done + failed) and units in the run.
using ProgressFunction = std::function<void(std::size_t done, std::size_t total)>;

struct RunOptions {
  // Units computed at once on one rank (local executor: worker threads; 0 = hardware threads).
  // An MPI worker rank computes one unit at a time; the unit function may use threads inside.
  int threads = 0;
  // When it becomes true (e.g. set by a SIGINT/SIGTERM handler, see StopSignals), no new unit is
  // started; units already running are finished and their results delivered.
  const std::atomic<bool>* stop = nullptr;
  ProgressFunction progress;  // optional; called on the sink's thread after the sink
};

enum class RunStatus { Completed, Interrupted };

struct RunReport {
  RunStatus status = RunStatus::Completed;  // Interrupted: the stop flag left units not started
  std::size_t total = 0;        // units handed to the executor
  std::size_t done = 0;         // results with status Done
  std::size_t failed = 0;       // results with status Failed
  std::size_t not_started = 0;  // total - done - failed (only when Interrupted)
  std::size_t computed_here = 0;  // units this process computed (0 on an MPI master)
};

const char* to_string(RunStatus s);

// Calls fn(unit) and never throws: an exception becomes a Failed result with its message (a fault
// that kills the process prints the unit's id and label to stderr first). Sets
// unit_id/kind/label from the unit, rank, and wall_seconds (measured around the call).
UnitResult run_unit_guarded(const UnitFunction& fn, const WorkUnit& unit, int rank);

// While alive, SIGINT, SIGTERM and SIGUSR1 set `flag` (async-signal-safe: a lock-free atomic store);
// the previous handlers come back on destruction. One instance at a time.
class StopSignals {
 public:
  explicit StopSignals(std::atomic<bool>& flag);
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
  // The last signal number received (0 if none).
  static int last_signal();

 private:
  struct Saved;
  Saved* saved_;
};

}  // namespace mapfuse
