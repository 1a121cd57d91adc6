// FFM pmapping generation throughput (engine/search/ffm/pmappings.hpp): every matchable context
// of both Einsums of a chain of two MxMxM matmuls, T1 = T0 W0, T2 = T1 W1, on an architecture
// preset. Counters: tile mappings evaluated per second (`evals/s`), pmappings kept. One core:
//   OMP_NUM_THREADS=1 build/bench/mapfuse_bench_ffm
// `ref` rows run the straightforward reference generator (generate_pmappings_reference: one
// Mapping, analysis and scalar evaluation per tile mapping) on the same contexts; `orders:1` =
// every loop order (reduced to reuse classes by the fast generator), `orders:0` = rank order only.
// Rates are per CPU second of the main thread: run with OMP_NUM_THREADS=1.
// `BM_FusedConvs`: two chained convolutions on gemmini_fusable, fused contexts included.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "engine/arch/arch_toml.hpp"
#include "engine/search/ffm/pmappings.hpp"

using namespace mapfuse;
using namespace mapfuse::ffm;

namespace {

const char* const kArchs[] = {"gemmini_default", "tpuv4i"};

Workload two_matmuls(int64_t m) {
  Workload w;
  w.name = "chain2";
  w.einsums.push_back(make_matmul("MM0", m, m, m, "T0", "W0", "T1"));
  w.einsums.push_back(make_matmul("MM1", m, m, m, "T1", "W1", "T2"));
  finalize(w);
  return w;
}

// args: arch index, M, explore_orders, reference
void BM_Pmappings(benchmark::State& state) {
  const Core core = load_architecture(kArchs[state.range(0)]).cores.at(0);
  const Workload w = two_matmuls(state.range(1));
  PmappingOptions o;
  o.explore_orders = state.range(2) != 0;
  const bool reference = state.range(3) != 0;
  std::vector<std::vector<PmappingContext>> contexts;
  for (int i = 0; i < 2; ++i) contexts.push_back(make_contexts(w, i, core, o));
  drop_unmatched_contexts(w, contexts);
  int64_t evaluated = 0, kept = 0, calls = 0;
  for (auto _ : state) {
    for (int i = 0; i < 2; ++i) {
      const EinsumPmappings p = reference ? generate_pmappings_reference(w, i, core, o, contexts[i])
                                          : generate_pmappings(w, i, core, o, contexts[i]);
      evaluated += p.evaluated;
      kept += p.kept;
      calls += p.lane_calls;
    }
  }
  state.SetLabel(std::string(kArchs[state.range(0)]) + (reference ? " reference" : " fast"));
  state.counters["evals/s"] = benchmark::Counter(static_cast<double>(evaluated), benchmark::Counter::kIsRate);
  state.counters["evals"] = benchmark::Counter(static_cast<double>(evaluated), benchmark::Counter::kAvgIterations);
  if (calls > 0) state.counters["lanes"] = static_cast<double>(evaluated) / static_cast<double>(calls);
  state.counters["kept"] = benchmark::Counter(static_cast<double>(kept), benchmark::Counter::kAvgIterations);
}

// Two chained 3 x 3 convolutions, C = K = `channels`, the second consuming the first's `size` x
// `size` output (no padding), as FFM fuses them on gemmini_fusable (whose
// scratchpad may back the intermediate): every matched context of both, fused ones included, by
// the branch and bound against each context's front (convolutions' halos leave partial pruning
// out; docs/ffm.md, "Branch and bound against the front", "Per kept set of the backing level").
// Counter `contexts`: contexts generated per iteration.
void BM_FusedConvs(benchmark::State& state) {
  const Core core = load_architecture("gemmini_fusable").cores.at(0);
  ConvShape a;
  a.P = a.Q = state.range(0);
  a.C = a.K = state.range(1);
  a.R = a.S = 3;
  ConvShape b = a;  // no padding: the second's output is 2 smaller
  b.P = b.Q = a.P - 2;
  Workload w;
  w.name = "two_convs";
  w.einsums.push_back(make_conv("conv_a", a, "X", "Wa", "Y"));
  w.einsums.push_back(make_conv("conv_b", b, "Y", "Wb", "Z"));
  finalize(w);
  PmappingOptions o;
  std::vector<std::vector<PmappingContext>> contexts;
  for (int i = 0; i < 2; ++i) contexts.push_back(make_contexts(w, i, core, o));
  drop_unmatched_contexts(w, contexts);
  int64_t evaluated = 0, kept = 0, generated = 0;
  for (auto _ : state)
    for (int i = 0; i < 2; ++i) {
      const EinsumPmappings p = generate_pmappings(w, i, core, o, contexts[i]);
      evaluated += p.evaluated;
      kept += p.kept;
      generated += static_cast<int64_t>(p.contexts.size());
    }
  state.counters["evals"] = benchmark::Counter(static_cast<double>(evaluated), benchmark::Counter::kAvgIterations);
  state.counters["kept"] = benchmark::Counter(static_cast<double>(kept), benchmark::Counter::kAvgIterations);
  state.counters["contexts"] = benchmark::Counter(static_cast<double>(generated), benchmark::Counter::kAvgIterations);
}

}  // namespace

// Fused convolutions (size, channels): 14 x 14 and 28 x 28 with 32 channels.
BENCHMARK(BM_FusedConvs)->ArgNames({"PQ", "CK"})->Args({14, 32})->Args({28, 32})->Unit(benchmark::kSecond)->Iterations(1);

// Fast generator: Gemmini and TPUv4i, 16^3 and 64^3, every order and rank order only.
BENCHMARK(BM_Pmappings)
    ->ArgNames({"arch", "M", "orders", "ref"})
    ->Args({0, 16, 0, 0})
    ->Args({0, 16, 1, 0})
    ->Args({0, 64, 0, 0})
    ->Args({0, 64, 1, 0})
    ->Args({1, 16, 0, 0})
    ->Args({1, 16, 1, 0})
    ->Args({1, 64, 0, 0})
    ->Args({1, 64, 1, 0})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(1.0);
// Reference generator where it finishes in seconds or minutes (docs/ffm.md's 13.8 s case is {0, 16, 0}).
BENCHMARK(BM_Pmappings)
    ->ArgNames({"arch", "M", "orders", "ref"})
    ->Args({0, 16, 0, 1})
    ->Args({0, 16, 1, 1})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

BENCHMARK_MAIN();
