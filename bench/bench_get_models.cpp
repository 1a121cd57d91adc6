// GET-fusion's fusion-group models (engine/cost/fusion_group.hpp): F_beta + F_D evaluations per
// second on random connected groups of EfficientNet-B3 and MobileNetV2 (docs/get.md), one thread:
//   build/bench/mapfuse_bench_get_models --benchmark_repetitions=3
// Groups of 2..32 nodes are grown from random seeds through random neighbours (fixed seed); each
// iteration evaluates one group, cycling through 4096 of them.
#include <benchmark/benchmark.h>

#include <random>
#include <set>
#include <string>
#include <vector>

#include "engine/cost/fusion_group.hpp"
#include "engine/workload/op_graph.hpp"

using namespace mapfuse;

namespace {

struct Setup {
  OpGraph g;
  std::vector<std::vector<int>> groups;
};

const Setup& setup(const std::string& net, int max_size) {
  static std::vector<std::pair<std::string, Setup>> cache;
  const std::string key = net + "/" + std::to_string(max_size);
  for (auto& [k, s] : cache)
    if (k == key) return s;
  Setup s;
  s.g = load_op_graph(std::string(MAPFUSE_SHARED_DATA) + "/get/onnx/" + net + ".onnx");
  std::mt19937_64 rng(42);
  while (s.groups.size() < 4096) {
    std::set<int> grp{static_cast<int>(rng() % s.g.size())};
    const int target = 2 + static_cast<int>(rng() % (max_size - 1));
    for (int step = 0; step < 8 * target && static_cast<int>(grp.size()) < target; ++step) {
      auto it = grp.begin();
      std::advance(it, rng() % grp.size());
      auto nb = (rng() & 1) ? s.g.succs(*it) : s.g.preds(*it);
      if (!nb.empty()) grp.insert(nb[rng() % nb.size()]);
    }
    s.groups.emplace_back(grp.begin(), grp.end());
  }
  cache.emplace_back(key, std::move(s));
  return cache.back().second;
}

void BM_group_cost(benchmark::State& state, const char* net, FusionScheme scheme, int max_size) {
  const Setup& s = setup(net, max_size);
  GroupWorkspace ws(s.g);
  const GroupModelOptions opt;
  size_t i = 0, nodes = 0;
  for (auto _ : state) {
    const auto& grp = s.groups[i++ & 4095];
    nodes += grp.size();
    benchmark::DoNotOptimize(group_cost(s.g, grp, scheme, 256 * 1024, opt, ws));
  }
  state.counters["groups/s"] = benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["nodes/group"] = static_cast<double>(nodes) / static_cast<double>(state.iterations());
}

BENCHMARK_CAPTURE(BM_group_cost, EB3_LBDF_upto32, "efficientnet_b3", FusionScheme::Lbdf, 32);
BENCHMARK_CAPTURE(BM_group_cost, MBv2_LBDF_upto32, "mobilenet_v2", FusionScheme::Lbdf, 32);
BENCHMARK_CAPTURE(BM_group_cost, MBv2_BRR_upto32, "mobilenet_v2", FusionScheme::Brr, 32);
BENCHMARK_CAPTURE(BM_group_cost, EB3_LBDF_upto128, "efficientnet_b3", FusionScheme::Lbdf, 128);

}  // namespace

BENCHMARK_MAIN();
