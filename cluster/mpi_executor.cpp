#include "cluster/mpi_executor.hpp"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <stdexcept>
#include <string>
#include <thread>

#include "cluster/local_executor.hpp"
#include "cluster/wire.hpp"

namespace mapfuse {

// ---- session --------------------------------------------------------------------------------

MpiSession::MpiSession(int* argc, char*** argv) {
  int initialised = 0;
  MPI_Initialized(&initialised);
  int provided = MPI_THREAD_SINGLE;
  if (!initialised) {
    MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    owns_ = true;
  } else {
    MPI_Query_thread(&provided);
  }
  funneled_ = provided >= MPI_THREAD_FUNNELED;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

MpiSession::~MpiSession() {
  if (!owns_) return;
  int finalised = 0;
  MPI_Finalized(&finalised);
  if (!finalised) MPI_Finalize();
}

// ---- protocol -------------------------------------------------------------------------------
//
//   worker -> master  kReady   (empty)             first request for work
//   master -> worker  kUnit    encode_unit(unit)   compute this
//   worker -> master  kResult  to_json(result)     this unit's result, and a request for the next
//   master -> worker  kStop    'c' | 'i'           no more work (completed | interrupted)
//
// Every worker has at most one unit in flight; the master remembers which, so a result it cannot
// parse still becomes a Failed result of the right unit, and results are named after their unit.

namespace {

constexpr int kReady = 1;
constexpr int kUnit = 2;
constexpr int kResult = 3;
constexpr int kStop = 4;

// Waits for a message without keeping a core busy for long: polls MPI_Iprobe for `spin_us`, then
// sleeps with a growing back-off (20 us doubling to 0.5 ms, small against a real unit) so that an
// idle rank leaves the core to ranks and threads that compute. A worker waits for the master's
// immediate reply, so it polls for up to 1 ms; the master waits for computations, so it polls for
// 200 us. If both slept early, each round trip would wait for two wake-ups: on 2 loaded cores,
// trivial units, -np 2, 50/50 us polling measured ~1.2 ms per unit, 200/1000 us ~50 us.
// (No sched_yield while polling: on a loaded node it hands the core away for a whole time slice.)
constexpr int kMasterSpinUs = 200;
constexpr int kWorkerSpinUs = 1000;

void wait_message(MPI_Comm comm, int source, int spin_us, MPI_Status* status) {
  int flag = 0;
  const auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(spin_us);
  do {
    for (int k = 0; k < 16; ++k) {
      MPI_Iprobe(source, MPI_ANY_TAG, comm, &flag, status);
      if (flag) return;
    }
  } while (std::chrono::steady_clock::now() < spin_until);
  long sleep_us = 20;
  for (;;) {
    std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
    MPI_Iprobe(source, MPI_ANY_TAG, comm, &flag, status);
    if (flag) return;
    sleep_us = std::min(sleep_us * 2, 500L);
  }
}

std::string receive(MPI_Comm comm, const MPI_Status& probed) {
  int count = 0;
  MPI_Get_count(&probed, MPI_CHAR, &count);
  std::string text(static_cast<std::size_t>(count), '\0');
  MPI_Recv(text.data(), count, MPI_CHAR, probed.MPI_SOURCE, probed.MPI_TAG, comm, MPI_STATUS_IGNORE);
  return text;
}

void send(MPI_Comm comm, const std::string& text, int dest, int tag) {
  MPI_Send(text.data(), static_cast<int>(text.size()), MPI_CHAR, dest, tag, comm);
}

UnitResult failed_result(const WorkUnit& u, int rank, std::string message) {
  UnitResult r;
  r.unit_id = u.id;
  r.kind = u.kind;
  r.label = u.label;
  r.columns = u.columns;
  r.status = UnitResult::Status::Failed;
  r.rank = rank;
  r.message = std::move(message);
  return r;
}

RunReport run_master(MPI_Comm comm, int size, std::vector<WorkUnit>& units, const ResultSink& sink,
                     const RunOptions& options) {
  order_for_dispatch(units);
  RunReport report;
  report.total = units.size();
  const std::size_t n = units.size();

  std::vector<long> in_flight(static_cast<std::size_t>(size), -1);  // unit index per worker rank
  std::size_t next = 0;
  int active = size - 1;  // workers not yet told to stop
  bool stopping = false;
  std::exception_ptr error;

  while (active > 0) {
    MPI_Status st;
    wait_message(comm, MPI_ANY_SOURCE, kMasterSpinUs, &st);
    const int src = st.MPI_SOURCE;
    const std::string msg = receive(comm, st);

    if (st.MPI_TAG == kResult) {
      const long idx = in_flight[src];
      if (idx < 0) throw std::runtime_error("MPI executor: rank " + std::to_string(src) + " sent a result for no unit");
      in_flight[src] = -1;
      const WorkUnit& u = units[static_cast<std::size_t>(idx)];
      UnitResult r;
      try {
        r = unit_result_from_json(msg);
        r.unit_id = u.id;
        r.kind = u.kind;
        r.label = u.label;
        r.columns.insert(r.columns.begin(), u.columns.begin(), u.columns.end());
        r.rank = src;
      } catch (const std::exception& e) {
        r = failed_result(u, src, std::string("result could not be transported: ") + e.what());
      }
      if (r.status == UnitResult::Status::Done) ++report.done; else ++report.failed;
      if (!error) {
        try {
          if (sink) sink(r);
          if (options.progress) options.progress(report.done + report.failed, n);
        } catch (...) {
          error = std::current_exception();
          stopping = true;
        }
      }
    } else if (st.MPI_TAG != kReady) {
      throw std::runtime_error("MPI executor: unexpected message tag " + std::to_string(st.MPI_TAG) +
                               " from rank " + std::to_string(src));
    }

    if (!stopping && options.stop != nullptr && options.stop->load(std::memory_order_relaxed)) stopping = true;
    if (!stopping && next < n) {
      send(comm, encode_unit(units[next]), src, kUnit);
      in_flight[src] = static_cast<long>(next);
      ++next;
    } else {
      send(comm, std::string(1, next < n ? 'i' : 'c'), src, kStop);
      --active;
    }
  }
  if (error) std::rethrow_exception(error);
  report.not_started = n - report.done - report.failed;
  report.status = report.not_started > 0 ? RunStatus::Interrupted : RunStatus::Completed;
  return report;
}

RunReport run_worker(MPI_Comm comm, int rank, const UnitFunction& fn) {
  RunReport report;
  send(comm, std::string(), 0, kReady);
  for (;;) {
    MPI_Status st;
    wait_message(comm, 0, kWorkerSpinUs, &st);
    const std::string msg = receive(comm, st);
    if (st.MPI_TAG == kStop) {
      report.status = (!msg.empty() && msg[0] == 'i') ? RunStatus::Interrupted : RunStatus::Completed;
      break;
    }
    UnitResult r;
    try {
      r = run_unit_guarded(fn, decode_unit(msg), rank);
    } catch (const std::exception& e) {  // a malformed unit: the master names it from its records
      r = failed_result(WorkUnit{}, rank, std::string("work unit could not be transported: ") + e.what());
    }
    ++report.computed_here;
    if (r.status == UnitResult::Status::Done) ++report.done; else ++report.failed;
    send(comm, to_json(r), 0, kResult);
  }
  return report;
}

}  // namespace

RunReport run_mpi(std::vector<WorkUnit> units, const UnitFunction& fn, const ResultSink& sink,
                  const RunOptions& options) {
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (!initialised) throw std::logic_error("run_mpi: MPI is not initialised (create an MpiSession first)");
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size == 1) return run_local(std::move(units), fn, sink, options, 0);

  // A private communicator: the executor's tags never meet the program's own messages.
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  try {
    RunReport report = rank == 0 ? run_master(comm, size, units, sink, options) : run_worker(comm, rank, fn);
    MPI_Comm_free(&comm);
    return report;
  } catch (...) {  // the sink threw on the master after the workers were stopped
    MPI_Comm_free(&comm);
    throw;
  }
}

}  // namespace mapfuse
