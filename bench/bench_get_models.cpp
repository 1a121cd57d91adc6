// GET-fusion's fusion-group models (engine/cost/fusion_group.hpp): F_beta + F_D evaluations per
// second on random connected groups of EfficientNet-B3 and MobileNetV2 (docs/get.md), one thread:
//   build/bench/mapfuse_bench_get_models --benchmark_repetitions=3
// Per-network figures for docs/get.md (fuseable ops and all-singletons DRAM at 128/256 KB):
//   build/bench/mapfuse_bench_get_models --report
// Groups of 2..32 nodes are grown from random seeds through random neighbours (fixed seed); each
// iteration evaluates one group, cycling through 4096 of them.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstring>
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

void report() {
  std::printf("| network | nodes | scheme | merge act. | beta KB | fuseable | singleton DRAM MiB |\n");
  std::printf("|---|---:|---|---|---:|---:|---:|\n");
  for (const char* net : {"efficientnet_b3", "resnet152", "deeplabv3_mobilenet_v3_large", "mobilenet_v2", "vgg16",
                          "resnet50", "resnet18", "squeezenet1_0", "squeezenet1_1", "efficientnet_b0"}) {
    const OpGraph g = load_op_graph(std::string(MAPFUSE_SHARED_DATA) + "/get/onnx/" + net + ".onnx");
    GroupWorkspace ws(g);
    for (auto scheme : {FusionScheme::Lbdf, FusionScheme::Brr})
      for (bool merge : {false, true})
        for (int64_t kb : {128, 256}) {
          GroupModelOptions opt;
          opt.merge_activations = merge;
          const int64_t beta = kb * opt.kb;
          const auto f = fuseable_nodes(g, scheme, beta, opt);
          const auto plan = singleton_plan(f);
          const PlanCost pc = plan_cost(g, plan, scheme, beta, opt, ws);
          std::printf("| %s | %d | %s | %s | %lld | %zu | %.1f |\n", net, g.size(),
                      std::string(to_string(scheme)).c_str(), merge ? "yes" : "no", static_cast<long long>(kb),
                      plan.size(), static_cast<double>(pc.dram_bytes) / static_cast<double>(opt.kb * opt.kb));
        }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--report") == 0) {
    report();
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
