// Master overhead per unit of the executors (issue 3, target <= 50 us): trivial units, so the
// time is dispatch + transport + collect + sink, not computation.
//   build/bench/mapfuse_bench_cluster                                   local executor only
//   mpirun --oversubscribe --bind-to none -np 2 build/bench/mapfuse_bench_cluster
//                                                                       adds the MPI executor
// Counters: wall_us_per_unit (wall time of a run / units) and master_cpu_us_per_unit (CPU time of
// the calling thread, i.e. of the master, per unit; under MPI the master sleeps while it waits).
// Measured 2026-11-22 on the 2-core dev machine while other builds ran (load average 3-6):
//   local, 1/2/4 threads, 10k units:   master CPU ~1.0 us/unit, wall 1.5 / 2.1 / 2.1 us/unit
//   MPI (vader), 5k units, -np 2/3/4:  master CPU 25 / 13-17 / 15-16 us/unit,
//                                      wall 56 / 24-43 / 40-42 us/unit (1-3 workers on 2 cores)
#include <benchmark/benchmark.h>
#include <mpi.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include "cluster/local_executor.hpp"
#include "cluster/mpi_executor.hpp"

using namespace mapfuse;

namespace {

std::vector<WorkUnit> trivial_units(int n) {
  std::vector<WorkUnit> units;
  units.reserve(n);
  for (int i = 0; i < n; ++i) {
    WorkUnit u;
    u.kind = "noop";
    u.payload = "{\"i\":" + std::to_string(i) + "}";
    u.id = stable_id(u.kind + u.payload);
    u.label = "noop " + std::to_string(i);
    u.cost_hint = 1 + i % 7;
    units.push_back(std::move(u));
  }
  return units;
}

UnitResult trivial(const WorkUnit& u) {
  UnitResult r;
  r.energy_pj = static_cast<double>(u.payload.size());
  r.cycles = 1;
  r.edp = r.energy_pj;
  return r;
}

double thread_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

template <class Run>
void measure(benchmark::State& state, int units, Run run) {
  double wall = 0, cpu = 0;
  for (auto _ : state) {
    const double c0 = thread_cpu_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    run();
    wall += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    cpu += thread_cpu_seconds() - c0;
  }
  const double n = static_cast<double>(state.iterations()) * units;
  state.counters["wall_us_per_unit"] = wall / n * 1e6;
  state.counters["master_cpu_us_per_unit"] = cpu / n * 1e6;
  state.SetItemsProcessed(static_cast<int64_t>(n));
}

void BM_LocalOverhead(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const int n = static_cast<int>(state.range(1));
  const auto units = trivial_units(n);
  RunOptions opt;
  opt.threads = threads;
  std::size_t sunk = 0;
  measure(state, n, [&] { run_local(units, trivial, [&](const UnitResult& r) { sunk += r.unit_id.size(); }, opt); });
  benchmark::DoNotOptimize(sunk);
}
BENCHMARK(BM_LocalOverhead)->ArgNames({"threads", "units"})->Args({1, 10000})->Args({2, 10000})->Args({4, 10000})
    ->Unit(benchmark::kMillisecond);

// ---- MPI: rank 0 runs the benchmarks; the other ranks serve every run_mpi call ---------------

constexpr int kMpiUnits = 5000;

// Waits for rank 0's "another run?" broadcast without spinning (an idle worker must not take the
// core from the local benchmarks).
int wait_for_run_flag() {
  int flag = 0;
  MPI_Request req;
  MPI_Ibcast(&flag, 1, MPI_INT, 0, MPI_COMM_WORLD, &req);
  int done = 0;
  for (;;) {
    MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (done) return flag;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

void announce_run(int flag) {
  MPI_Request req;
  MPI_Ibcast(&flag, 1, MPI_INT, 0, MPI_COMM_WORLD, &req);
  MPI_Wait(&req, MPI_STATUS_IGNORE);
}

void BM_MpiOverhead(benchmark::State& state) {
  const auto units = trivial_units(kMpiUnits);
  std::size_t sunk = 0;
  measure(state, kMpiUnits, [&] {
    announce_run(1);
    run_mpi(units, trivial, [&](const UnitResult& r) { sunk += r.unit_id.size(); }, {});
  });
  benchmark::DoNotOptimize(sunk);
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  state.counters["ranks"] = size;
}

}  // namespace

int main(int argc, char** argv) {
  const bool under_mpi = std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMIX_RANK") != nullptr;
  if (!under_mpi) {
    benchmark::Initialize(&argc, argv);
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
  }
  MpiSession mpi(&argc, &argv);
  if (mpi.is_master()) {
    if (mpi.size() > 1) benchmark::RegisterBenchmark("BM_MpiOverhead", BM_MpiOverhead)->Unit(benchmark::kMillisecond);
    benchmark::Initialize(&argc, argv);
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    if (mpi.size() > 1) announce_run(0);
  } else {
    while (wait_for_run_flag()) run_mpi({}, trivial, {}, {});
  }
  return 0;
}
