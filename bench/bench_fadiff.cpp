// FADiff's optimizer (engine/search/fadiff/optimize.hpp): wall time of one full optimisation of a
// network on one core, and (--compare) every method under the same budget.
//
// One full FADiff optimisation (16 starts x (32 screened random points + 300 Adam steps), exact decode
// every 10 steps), one thread:
//   build/bench/mapfuse_bench_fadiff --benchmark_filter=FADiff --benchmark_repetitions=3
// Methods side by side (exact EDP, evaluations, time) under a time budget (seconds) and seeds:
//   build/bench/mapfuse_bench_fadiff --compare <workload> <arch> <seconds> [seeds]
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "engine/arch/arch_toml.hpp"
#include "engine/search/fadiff/optimize.hpp"
#include "engine/workload/zoo.hpp"

using namespace mapfuse;

namespace {

OptimizeOptions full_run(uint64_t seed) {
  OptimizeOptions o;
  o.time_budget_s = 600;  // the starts end the run, not the clock
  o.max_starts = 16;
  o.steps_per_start = 300;
  o.seed = seed;
  return o;
}

void BM_FADiffFullOptimisation(benchmark::State& state, const char* net, const char* arch) {
  const Workload w = zoo_workload(net);
  const Core core = load_architecture(arch).cores.at(0);
  OptimizeResult r;
  uint64_t seed = 1;
  for (auto _ : state) {
    r = optimize_network(w, core, Method::FADiff, full_run(seed++));
  }
  state.counters["steps"] = static_cast<double>(r.gradient_steps);
  state.counters["exact_evals"] = static_cast<double>(r.exact_evaluations);
  state.counters["layers"] = static_cast<double>(r.layers.size());
  state.counters["edp_e15"] = r.edp / 1e15;  // pJ x cycles / 1e15
  state.counters["fused_edges"] = static_cast<double>(std::count(r.fused.begin(), r.fused.end(), 1));
}
BENCHMARK_CAPTURE(BM_FADiffFullOptimisation, ResNet18_Large, "resnet18", "fadiff_large")->Unit(benchmark::kSecond)->Iterations(1);
BENCHMARK_CAPTURE(BM_FADiffFullOptimisation, VGG16_Large, "vgg16", "fadiff_large")->Unit(benchmark::kSecond)->Iterations(1);

int compare(const char* net, const char* arch, double seconds, int seeds) {
  const Workload w = zoo_workload(net);
  const Core core = load_architecture(arch).cores.at(0);
  std::printf("%s on %s, %.1f s per run\n", net, arch, seconds);
  std::printf("%-7s %5s %12s %12s %12s %9s %9s %6s %6s %8s %7s\n", "method", "seed", "EDP", "energy_pJ", "cycles",
              "evals", "exact", "starts", "fused", "splits", "time_s");
  for (Method m : {Method::FADiff, Method::DosaStyle, Method::Genetic, Method::Bayesian})
    for (int s = 1; s <= seeds; ++s) {
      OptimizeOptions o;
      o.time_budget_s = seconds;
      o.seed = static_cast<uint64_t>(s);
      const OptimizeResult r = optimize_network(w, core, m, o);
      std::printf("%-7s %5d %12.4e %12.4e %12.4e %9lld %9lld %6d %6d %8d %7.2f\n", std::string(to_string(m)).c_str(), s,
                  r.edp, r.energy_pj, r.cycles, static_cast<long long>(r.evaluations),
                  static_cast<long long>(r.exact_evaluations), r.starts,
                  static_cast<int>(std::count(r.fused.begin(), r.fused.end(), 1)), r.group_splits, r.seconds);
      std::fflush(stdout);
    }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--compare") == 0) {
    if (argc < 5) {
      std::fprintf(stderr, "usage: %s --compare <workload> <arch> <seconds> [seeds]\n", argv[0]);
      return 2;
    }
    return compare(argv[2], argv[3], std::atof(argv[4]), argc > 5 ? std::atoi(argv[5]) : 1);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
