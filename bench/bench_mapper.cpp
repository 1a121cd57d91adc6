// The optimal single-Einsum mapper (engine/search/exhaustive.hpp; docs/mapper.md, docs/performance.md).
// One core:
//   OMP_NUM_THREADS=1 build/bench/mapfuse_bench_mapper --benchmark_filter=Dosa
//   OMP_NUM_THREADS=1 build/bench/mapfuse_bench_mapper --benchmark_filter=Full/15   # one layer
// ResNet18Dosa: every MAC layer of ResNet-18 on gemmini_default in DOSA's mapspace
// (presets/constraints/gemmini_dosa.toml), EDP-optimal by branch and bound, best first or depth
// first (arg 1 / 0). ResNet18Full/i: MAC layer i in the full mapspace (no constraints).
// Counters: mappings evaluated, choices cut by the bound, layers.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "engine/arch/arch_toml.hpp"
#include "engine/search/exhaustive.hpp"
#include "engine/search/mapspace_toml.hpp"
#include "engine/workload/load.hpp"

using namespace mapfuse;

namespace {

struct Setup {
  Core core = load_architecture("gemmini_default").cores.at(0);
  Workload w = load_workload("resnet18");
  std::vector<int> macs;
  Setup() {
    for (size_t i = 0; i < w.einsums.size(); ++i)
      if (w.einsums[i].op == OpKind::Mac) macs.push_back(static_cast<int>(i));
  }
};
const Setup& setup() {
  static const Setup s;
  return s;
}

void count(benchmark::State& state, const MapperResult& r, int64_t& evaluated, int64_t& cut) {
  if (!r.best) state.SkipWithError("no valid mapping");
  evaluated += r.evaluated;
  for (int64_t n : r.bound_pruned) cut += n;
}

void ResNet18Dosa(benchmark::State& state) {
  const Setup& s = setup();
  const std::vector<ConstraintSpec> cons = load_constraints(std::string(MAPFUSE_SOURCE_DIR) + "/presets/constraints/gemmini_dosa.toml");
  ExhaustiveOptions opt;
  opt.front = false;
  opt.best_first = state.range(0) != 0;
  int64_t evaluated = 0, cut = 0;
  for (auto _ : state) {
    evaluated = cut = 0;
    for (int i : s.macs) {
      const Einsum& e = s.w.einsums[static_cast<size_t>(i)];
      count(state, exhaustive_search(e, s.core, make_mapspace(cons, e, s.core), opt), evaluated, cut);
    }
  }
  state.counters["evaluated"] = static_cast<double>(evaluated);
  state.counters["bound_cut"] = static_cast<double>(cut);
  state.counters["layers"] = static_cast<double>(s.macs.size());
}
BENCHMARK(ResNet18Dosa)->Arg(1)->Arg(0)->Unit(benchmark::kMillisecond)->Iterations(1);

void ResNet18Full(benchmark::State& state) {
  const Setup& s = setup();
  const Einsum& e = s.w.einsums[static_cast<size_t>(s.macs.at(static_cast<size_t>(state.range(0))))];
  ExhaustiveOptions opt;
  opt.front = false;
  int64_t evaluated = 0, cut = 0;
  for (auto _ : state) {
    evaluated = cut = 0;
    count(state, exhaustive_search(e, s.core, make_mapspace({}, e, s.core), opt), evaluated, cut);
  }
  state.SetLabel(e.name);
  state.counters["evaluated"] = static_cast<double>(evaluated);
  state.counters["bound_cut"] = static_cast<double>(cut);
}
BENCHMARK(ResNet18Full)->DenseRange(0, 20)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
