// The genetic allocator's fitness (engine/search/stream/ga_allocation.hpp): COALA schedules per
// second of ResNet-18 fused (Stream's stacks 0-10 and 11-21, the rest layer by layer; 3,866 CTs) on
// tpu_like_quad_core, for random allocations, on the evaluator's one reused problem against a
// problem built afresh per allocation (docs/stream.md, "Genetic allocator"). The tile costs are
// synthetic (per CT and core: cycles = work / the core's PE count, 1 pJ per operation, nothing off
// chip; allocations over the four MAC cores) so that the benchmark does not spend a minute in the
// mapper; the schedule's work hardly depends on their values.
#include <benchmark/benchmark.h>

#include <cmath>
#include <random>
#include <string>

#include "engine/arch/arch_toml.hpp"
#include "engine/search/stream/ga_allocation.hpp"
#include "engine/workload/onnx_import.hpp"

using namespace mapfuse;

namespace {

struct Setup {
  Workload w;
  Architecture arch;
  TileGraph g;
  std::vector<std::vector<int>> layer_cores;
  std::vector<TileCost> costs;
  std::vector<std::vector<int>> genomes;  // random allocations, cycled through
};

const Setup& setup() {
  static const Setup s = [] {
    Setup s;
    OnnxOptions oo;
    oo.fold_unary = false;
    s.w = import_onnx(std::string(MAPFUSE_SHARED_DATA) + "/stream/classic_cb9dfc52/examples/workload/resnet18.onnx", oo);
    s.arch = load_architecture("tpu_like_quad_core");
    TilingOptions to;
    to.layers = stream_tiling(s.w, 4);
    std::vector<int> a, b;
    for (int i = 0; i <= 10; ++i) a.push_back(i);
    for (int i = 11; i <= 21; ++i) b.push_back(i);
    to.stacks = layer_stacks_manual(s.w, {a, b});
    s.g = build_tile_graph(s.w, to);
    s.layer_cores = capable_cores(s.w, s.arch);
    const CandidateTiles cand = candidate_tiles(s.g.tiles, s.layer_cores);
    for (size_t i = 0; i < cand.tiles.tiles.size(); ++i) {
      double work = 1;
      for (const Range& r : cand.tiles.rank_ranges(int(i))) work *= double(r.size());
      const Core& c = s.arch.cores[size_t(cand.cores[i])];
      double pes = 1;
      for (const Level& l : c.levels) pes *= double(l.fanout.total());
      TileCost t;
      t.latency_cc = std::ceil(work / pes);
      t.onchip_energy_pj = work;
      s.costs.push_back(t);
    }
    AllocationEvaluator ev(s.w, s.g, s.arch, s.layer_cores, s.costs, {}, {});
    std::mt19937_64 rng(1);
    for (int k = 0; k < 16; ++k) {
      std::vector<int> genome;
      for (size_t i = 0; i < ev.genes().size(); ++i) {
        // Only the MAC cores: the synthetic costs keep every operand on chip, which the small
        // pooling and SIMD cores cannot hold.
        std::vector<int> mac;
        for (int c : ev.choices(int(i)))
          if (s.arch.cores[size_t(c)].can_run(OpKind::Mac)) mac.push_back(c);
        if (mac.empty()) mac.push_back(ev.choices(int(i))[0]);
        genome.push_back(mac[rng() % mac.size()]);
      }
      s.genomes.push_back(genome);
    }
    return s;
  }();
  return s;
}

// The evaluator: per allocation only the CTs' core, runtime and energies rewritten.
void BM_GaFitness(benchmark::State& state) {
  const Setup& s = setup();
  AllocationEvaluator ev(s.w, s.g, s.arch, s.layer_cores, s.costs, {},
                         coala::Options::for_semantics(coala::Semantics::Stream));
  size_t k = 0;
  for (auto _ : state) benchmark::DoNotOptimize(ev.evaluate(s.genomes[k++ % s.genomes.size()]).latency_cc);
  state.counters["CTs"] = double(s.g.tiles.tiles.size());
  state.counters["evaluations/s"] = benchmark::Counter(1, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["rebuilds"] = double(ev.rebuilds());
}

// The same allocations with the problem built afresh each time (what a deep copy per fitness costs).
void BM_GaFitnessRebuilt(benchmark::State& state) {
  const Setup& s = setup();
  AllocationEvaluator ev(s.w, s.g, s.arch, s.layer_cores, s.costs, {}, {});
  const coala::Options opt = coala::Options::for_semantics(coala::Semantics::Stream);
  size_t k = 0;
  std::vector<TileCost> costs(s.g.tiles.tiles.size());
  for (auto _ : state) {
    const auto cores = ev.core_of_tile(s.genomes[k++ % s.genomes.size()]);
    for (size_t t = 0; t < cores.size(); ++t) costs[t] = ev.cost(int(t), cores[t]);
    benchmark::DoNotOptimize(coala::schedule(build_schedule_problem(s.w, s.g, s.arch, cores, costs), opt).latency_cc);
  }
  state.counters["evaluations/s"] = benchmark::Counter(1, benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace

BENCHMARK(BM_GaFitness)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_GaFitnessRebuilt)->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
