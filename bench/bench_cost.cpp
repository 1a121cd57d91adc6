// Throughput of the exact cost model: evaluations per second on one core.
//   build/bench/mapfuse_bench --benchmark_filter=Eval --benchmark_repetitions=5
// Each iteration evaluates one mapping from a pool of 4096 distinct random valid mappings of a
// ResNet-50 3x3 conv layer (conv2_x: C=K=64, P=Q=56, R=S=3), so branch history and caches see a
// realistic mix rather than one mapping over and over.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "engine/arch/arch_toml.hpp"
#include "engine/cost/lanes.hpp"
#include "engine/cost/model.hpp"

#include <memory>
#include "engine/search/random_mapping.hpp"

using namespace mapfuse;

namespace {

struct Pool {
  EvalPlan plan;
  std::vector<FlatMapping> mappings;
};

Pool make_pool(const std::string& arch, bool need_valid) {
  const Core core = load_architecture(arch).cores.at(0);
  const Einsum conv = make_conv("resnet50_conv2_3x3", {.K = 64, .C = 64, .P = 56, .Q = 56, .R = 3, .S = 3});
  Pool p{compile_plan(conv, core), {}};
  std::mt19937_64 rng(42);
  int attempts = 0;
  while (p.mappings.size() < 4096 && attempts++ < 2'000'000) {
    FlatMapping f = flatten(random_mapping(conv, core, rng));
    if (need_valid && !evaluate(p.plan, f).valid()) continue;
    p.mappings.push_back(f);
  }
  return p;
}

void run(benchmark::State& state, const Pool& p) {
  CostResult r;
  size_t i = 0;
  for (auto _ : state) {
    evaluate(p.plan, p.mappings[i], r);
    benchmark::DoNotOptimize(r.energy_pj);
    if (++i == p.mappings.size()) i = 0;
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["evals/s"] = benchmark::Counter(static_cast<double>(state.iterations()),
                                                 benchmark::Counter::kIsRate);
}

void BM_EvalResNet50Conv3x3_GemminiDefault(benchmark::State& state) {
  static const Pool p = make_pool("gemmini_default", true);
  run(state, p);
}
void BM_EvalResNet50Conv3x3_TPUv4i(benchmark::State& state) {
  static const Pool p = make_pool("tpuv4i", true);
  run(state, p);
}
// Mapper-like mix: invalid (over-capacity) mappings included, as a search would see them.
void BM_EvalResNet50Conv3x3_GemminiDefault_AnyMapping(benchmark::State& state) {
  static const Pool p = make_pool("gemmini_default", false);
  run(state, p);
}

}  // namespace

// One mapping over and over: the floor set by the arithmetic alone (branches all predicted).
void BM_EvalResNet50Conv3x3_GemminiDefault_OneMapping(benchmark::State& state) {
  static const Pool p = [] {
    Pool q = make_pool("gemmini_default", true);
    q.mappings.resize(1);
    return q;
  }();
  run(state, p);
}

BENCHMARK(BM_EvalResNet50Conv3x3_GemminiDefault);
BENCHMARK(BM_EvalResNet50Conv3x3_GemminiDefault_OneMapping);
BENCHMARK(BM_EvalResNet50Conv3x3_TPUv4i);
BENCHMARK(BM_EvalResNet50Conv3x3_GemminiDefault_AnyMapping);

// A mapper's inner loop: one loop structure (order, levels, bypass) analysed once, then evaluated
// for many factor sets (tile shapes). 512 structures x kLanes factor sets each; items are mappings.
namespace {

struct StructurePool {
  EvalPlan plan;
  std::vector<NestStructure> structures;
  std::vector<std::array<int64_t, kMaxLoops>> factors;  // kLanes per structure
};

StructurePool make_structure_pool(const std::string& arch) {
  const Core core = load_architecture(arch).cores.at(0);
  const Einsum conv = make_conv("resnet50_conv2_3x3", {.K = 64, .C = 64, .P = 56, .Q = 56, .R = 3, .S = 3});
  StructurePool p{compile_plan(conv, core), {}, {}};
  const Pool singles = make_pool(arch, true);
  std::mt19937_64 rng(7);
  for (size_t s = 0; s < 512; ++s) {
    const FlatMapping& shape = singles.mappings[s];
    p.structures.push_back(analyze(p.plan, shape));
    for (int k = 0; k < kLanes; ++k) {
      // Redistribute each rank's prime factors over the shape's loops of that rank.
      std::array<int64_t, kMaxLoops> f{};
      for (int i = 0; i < shape.n_loops; ++i) f[i] = 1;
      for (size_t r = 0; r < conv.ranks.size(); ++r) {
        std::vector<int> loops;
        for (int i = 0; i < shape.n_loops; ++i)
          if (shape.loops[i].rank == static_cast<int>(r)) loops.push_back(i);
        if (loops.empty()) continue;
        for (int64_t pf : prime_factors(conv.ranks[r].size))
          f[loops[std::uniform_int_distribution<size_t>(0, loops.size() - 1)(rng)]] *= pf;
      }
      p.factors.push_back(f);
    }
  }
  return p;
}

void run_structures(benchmark::State& state, const StructurePool& p) {
  size_t i = 0;
  for (auto _ : state) {
    const CompactCost c = evaluate(p.plan, p.structures[i / kLanes], p.factors[i].data());
    benchmark::DoNotOptimize(c.energy_pj);
    if (++i == p.factors.size()) i = 0;
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["evals/s"] = benchmark::Counter(static_cast<double>(state.iterations()),
                                                 benchmark::Counter::kIsRate);
}

void BM_StructureEvalResNet50Conv3x3_GemminiDefault(benchmark::State& state) {
  static const StructurePool p = make_structure_pool("gemmini_default");
  run_structures(state, p);
}
void BM_StructureEvalResNet50Conv3x3_TPUv4i(benchmark::State& state) {
  static const StructurePool p = make_structure_pool("tpuv4i");
  run_structures(state, p);
}

}  // namespace

// The same factor sets, kLanes at a time through the SIMD lane evaluator.
void run_lanes(benchmark::State& state, const StructurePool& p) {
  std::vector<LaneFactors> batches(p.structures.size());
  for (size_t s = 0; s < p.structures.size(); ++s)
    for (int k = 0; k < kLanes; ++k)
      for (int i = 0; i < kMaxLoops; ++i) batches[s][i][k] = p.factors[s * kLanes + k][i];
  CompactCost out[kLanes];
  size_t s = 0;
  for (auto _ : state) {
    evaluate_lanes(p.plan, p.structures[s], batches[s], kLanes, out);
    benchmark::DoNotOptimize(out[0].energy_pj);
    if (++s == p.structures.size()) s = 0;
  }
  state.SetItemsProcessed(state.iterations() * kLanes);
  state.counters["evals/s"] = benchmark::Counter(static_cast<double>(state.iterations() * kLanes),
                                                 benchmark::Counter::kIsRate);
}
void BM_LanesEvalResNet50Conv3x3_GemminiDefault(benchmark::State& state) {
  static const StructurePool p = make_structure_pool("gemmini_default");
  run_lanes(state, p);
}
void BM_LanesEvalResNet50Conv3x3_TPUv4i(benchmark::State& state) {
  static const StructurePool p = make_structure_pool("tpuv4i");
  run_lanes(state, p);
}
BENCHMARK(BM_LanesEvalResNet50Conv3x3_GemminiDefault);
BENCHMARK(BM_LanesEvalResNet50Conv3x3_TPUv4i);

BENCHMARK(BM_StructureEvalResNet50Conv3x3_GemminiDefault);
BENCHMARK(BM_StructureEvalResNet50Conv3x3_TPUv4i);
