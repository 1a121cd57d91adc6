// GET-fusion's searches (engine/search/get): CPU time of one whole search on a real network, one
// thread, fresh memo tables every iteration (docs/get_search.md, "Speed"):
//   build/bench/mapfuse_bench_get_search --benchmark_repetitions=3
// The headline case is the issue's: NSGA-II with 5k plans on EfficientNet-B3, LBDF, 256 KB
// (target < 1 CPU-s; the paper reports 32-168 s per search on the much smaller MobileNetV2).
#include <benchmark/benchmark.h>

#include <map>
#include <string>

#include "engine/search/get/exact.hpp"
#include "engine/search/get/network.hpp"
#include "engine/search/get/search.hpp"

using namespace mapfuse;
using namespace mapfuse::get;

namespace {

const OpGraph& graph(const std::string& net) {
  static std::map<std::string, OpGraph> cache;
  auto it = cache.find(net);
  if (it == cache.end())
    it = cache.emplace(net, load_op_graph(std::string(MAPFUSE_SHARED_DATA) + "/get/onnx/" + net + ".onnx")).first;
  return it->second;
}

void BM_search(benchmark::State& state, const char* net, FusionScheme scheme, int kb, SearchKind kind,
               SplitKind split, int64_t budget) {
  const OpGraph& g = graph(net);
  const NetworkProblem np = make_network_problem(g, scheme, int64_t{kb} * 1024);
  SearchOptions opt;
  opt.budget = budget;
  double dram = 0, rate = 0;
  for (auto _ : state) {
    auto expl = make_explainer(split);  // fresh explainer and memo tables: a whole search
    const SearchResult r = run_search(np.problem, kind, expl.get(), opt);
    dram = r.best.dram;
    rate = r.rectify.rate();
  }
  state.counters["dram_MB"] = dram / (1 << 20);
  state.counters["rectify"] = rate;
  state.counters["plans_per_s"] = benchmark::Counter(static_cast<double>(budget), benchmark::Counter::kIsIterationInvariantRate);
}

void BM_exact(benchmark::State& state, const char* net, FusionScheme scheme, int kb) {
  const OpGraph& g = graph(net);
  const NetworkProblem np = make_network_problem(g, scheme, int64_t{kb} * 1024);
  double dram = 0;
  for (auto _ : state) {
    Evaluator ev(np.problem);
    const ExactResult r = exact_optimum(np.problem, ev, {});
    dram = r.plan.dram;
    if (!r.optimal) state.SkipWithError("exact search stopped before proving optimality");
  }
  state.counters["dram_MB"] = dram / (1 << 20);
}

using K = SearchKind;
using S = SplitKind;
BENCHMARK_CAPTURE(BM_search, eb3_nsga2_random_5k, "efficientnet_b3", FusionScheme::Lbdf, 256, K::Nsga2, S::Random, 5000)
    ->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
BENCHMARK_CAPTURE(BM_search, eb3_nsga2_cut_5k, "efficientnet_b3", FusionScheme::Lbdf, 256, K::Nsga2, S::Cut, 5000)
    ->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
BENCHMARK_CAPTURE(BM_search, eb3_nsga2_dp_5k, "efficientnet_b3", FusionScheme::Lbdf, 256, K::Nsga2, S::Dp, 5000)
    ->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
BENCHMARK_CAPTURE(BM_search, eb3_ls_cut_5k, "efficientnet_b3", FusionScheme::Lbdf, 256, K::Local, S::Cut, 5000)
    ->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
BENCHMARK_CAPTURE(BM_search, eb3_rs_cut_5k, "efficientnet_b3", FusionScheme::Lbdf, 256, K::Random, S::Cut, 5000)
    ->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
BENCHMARK_CAPTURE(BM_search, mbv2_ls_cut_2k, "mobilenet_v2", FusionScheme::Lbdf, 128, K::Local, S::Cut, 2000)
    ->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
BENCHMARK_CAPTURE(BM_exact, eb3_lbdf_256, "efficientnet_b3", FusionScheme::Lbdf, 256)
    ->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
BENCHMARK_CAPTURE(BM_exact, rn50_brr_128, "resnet50", FusionScheme::Brr, 128)
    ->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();

}  // namespace

BENCHMARK_MAIN();
