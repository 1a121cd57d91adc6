// GET-fusion's searches (engine/search/get): CPU time of one whole search on a real network, one
// thread, fresh memo tables every iteration (docs/get_search.md, "Speed"):
//   build/bench/mapfuse_bench_get_search --benchmark_repetitions=3
// The headline case is the issue's: NSGA-II with 5k plans on EfficientNet-B3, LBDF, 256 KB
// (target < 1 CPU-s; the paper reports 32-168 s per search on the much smaller MobileNetV2).
// BM_explain: explanations per second of each explainer (exact cut, occlusion, interval DP,
// GNNExplainer, PGExplainer, RG-Explainer) on a fixed set of invalid MobileNetV2 groups (docs/get.md):
//   build/bench/mapfuse_bench_get_search --benchmark_filter=BM_explain
#include <benchmark/benchmark.h>

#include <algorithm>
#include <map>
#include <string>

#include <random>

#include "engine/search/get/exact.hpp"
#include "engine/search/get/gnn/explainers.hpp"
#include "engine/search/get/gnn/gnn.hpp"
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

// Invalid groups of random plans (each edge cut with probability 0.3), the first `count` distinct.
std::vector<Group> invalid_groups(const Problem& p, size_t count) {
  std::mt19937_64 rng(7);
  std::bernoulli_distribution cut(0.3);
  Evaluator ev(p);
  std::vector<Group> out;
  for (int plan = 0; plan < 10000 && out.size() < count; ++plan) {
    std::vector<uint8_t> bits(p.genes.size());
    for (auto& b : bits) b = cut(rng);
    for (Group& g : decode(p, bits))
      if (g.size() >= 2 && !ev.valid(g) && std::find(out.begin(), out.end(), g) == out.end() && out.size() < count)
        out.push_back(std::move(g));
  }
  return out;
}

void BM_explain(benchmark::State& state, const char* net, FusionScheme scheme, int kb, SplitKind split) {
  const OpGraph& g = graph(net);
  const NetworkProblem np = make_network_problem(g, scheme, int64_t{kb} * 1024);
  const std::vector<Group> groups = invalid_groups(np.problem, 20);
  const gnn::FeatureTable features(g, scheme);
  std::unique_ptr<Explainer> expl;
  if (uses_gnn(split)) {
    auto c = std::make_shared<const gnn::Classifier>(gnn::Classifier::shipped(scheme));
    if (split == SplitKind::Gnne) {
      expl = gnn::make_gnn_explainer(c, features);
    } else {
      const auto kind = split == SplitKind::Pg ? gnn::ModelKind::Pg : gnn::ModelKind::Rg;
      auto m = std::make_shared<const gnn::ExplainerModel>(gnn::ExplainerModel::shipped(kind, *c));
      expl = split == SplitKind::Pg ? gnn::make_pg_explainer(c, m, features) : gnn::make_rg_explainer(c, m, features);
    }
  } else {
    expl = make_explainer(split);
  }
  double nodes = 0, inner = 0, edges = 0;
  for (const Group& grp : groups) {
    nodes += static_cast<double>(grp.size());
    for (int32_t v : grp)
      for (int32_t id : np.problem.dag.out(v))
        inner += std::binary_search(grp.begin(), grp.end(), np.problem.dag.edges[id].to) ? 1 : 0;
  }
  Workspace ws;
  for (auto _ : state) {
    Evaluator ev(np.problem);  // no F_β memo carried over between iterations
    edges = 0;
    for (const Group& grp : groups) edges += static_cast<double>(expl->explain(grp, ev, ws).edges.size());
  }
  state.counters["explanations_per_s"] =
      benchmark::Counter(static_cast<double>(groups.size()), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["mean_nodes"] = nodes / static_cast<double>(groups.size());
  state.counters["mean_edges_in"] = inner / static_cast<double>(groups.size());  // inside the group
  state.counters["mean_edges_out"] = edges / static_cast<double>(groups.size());  // in the explanation
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

BENCHMARK_CAPTURE(BM_explain, mbv2_lbdf_cut, "mobilenet_v2", FusionScheme::Lbdf, 128, S::Cut)
    ->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
BENCHMARK_CAPTURE(BM_explain, mbv2_lbdf_occlusion, "mobilenet_v2", FusionScheme::Lbdf, 128, S::Occlusion)
    ->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
BENCHMARK_CAPTURE(BM_explain, mbv2_lbdf_dp, "mobilenet_v2", FusionScheme::Lbdf, 128, S::Dp)
    ->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
BENCHMARK_CAPTURE(BM_explain, mbv2_lbdf_gnne, "mobilenet_v2", FusionScheme::Lbdf, 128, S::Gnne)
    ->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime()->Iterations(2);
BENCHMARK_CAPTURE(BM_explain, mbv2_lbdf_pg, "mobilenet_v2", FusionScheme::Lbdf, 128, S::Pg)
    ->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
BENCHMARK_CAPTURE(BM_explain, mbv2_lbdf_rg, "mobilenet_v2", FusionScheme::Lbdf, 128, S::Rg)
    ->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();

}  // namespace

BENCHMARK_MAIN();
