// FFM against the number of Einsums and against its baselines (docs/ffm.md sections 6-7,
// docs/performance.md "FFM: runtime against the number of Einsums"), on chains of n identical
// SxSxS matmuls on tests/fixtures/ffm/small_core.toml with a 256-word buffer (the reduced-size
// stand-in for the paper's Figures 8 and 9). One core:
//   OMP_NUM_THREADS=1 build/bench/mapfuse_bench_ffm_scaling --benchmark_filter=Chain
// (the last Chain rows: the 64-matmul chain with epsilon pruning, 5 % and 50 %)
//   OMP_NUM_THREADS=1 build/bench/mapfuse_bench_ffm_scaling --benchmark_filter=Baseline
// Chain counters: generation and join CPU seconds per Einsum (FfmResult), tile mappings
// evaluated, pmappings kept, the largest join step's kept partial mappings, peak RSS (MiB).
//   OMP_NUM_THREADS=1 build/bench/mapfuse_bench_ffm_scaling --benchmark_filter=PaperChain
// (the paper's Figure 9 size: zoo matmul_chain_<n>, M = 8192, on accelforge_tpu_v4i; counters as
// Chain plus tile mappings evaluated per CPU-second and join combinations per CPU-second)
//   OMP_NUM_THREADS=1 build/bench/mapfuse_bench_ffm_scaling --benchmark_filter=Gpt3
// (GPT-3 6.7B at batch 64 and 1,024 / 4,096 tokens on accelforge_tpu_v4i, counters as PaperChain)
// Baseline counters: percent above FFM's EDP optimum, mean / min / max over 10 seeds, at a fixed
// number of evaluations.
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <algorithm>
#include <string>
#include <vector>

#include "engine/arch/arch_toml.hpp"
#include "engine/search/ffm/baselines.hpp"
#include "engine/search/ffm/ffm.hpp"
#include "engine/workload/zoo.hpp"

using namespace mapfuse;
using namespace mapfuse::ffm;

namespace {

Core bench_core() {
  Core c = load_architecture(std::string(MAPFUSE_SOURCE_DIR) + "/tests/fixtures/ffm/small_core.toml").cores.at(0);
  c.name = "ffm_small_core_256";
  for (Level& l : c.levels)
    if (l.name == "Buffer") l.entries = 256;
    else if (l.name == "Reg") l.entries = 16;
  finalize(c, c.name);
  return c;
}

Workload chain(int n, int64_t s) {
  Workload w;
  w.name = "chain" + std::to_string(n);
  for (int i = 0; i < n; ++i)
    w.einsums.push_back(make_matmul("MM" + std::to_string(i), s, s, s, "T" + std::to_string(i), "W" + std::to_string(i),
                                    "T" + std::to_string(i + 1)));
  finalize(w);
  return w;
}

double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

// args: n Einsums, matmul size, epsilon in percent (0 = one exact join; else the two passes)
void BM_Chain(benchmark::State& state) {
  const Core c = bench_core();
  const int n = static_cast<int>(state.range(0));
  const Workload w = chain(n, state.range(1));
  FfmOptions o;
  o.epsilon = static_cast<double>(state.range(2)) / 100.0;
  FfmResult r;
  for (auto _ : state) r = ffm_search(w, c, o);
  int64_t evaluated = 0, kept = 0, partials = 0;
  for (const auto& p : r.pmappings) evaluated += p.evaluated, kept += p.kept;
  int64_t all_partials = 0, bound_pruned = 0;
  for (const auto& s : r.steps) partials = std::max(partials, s.kept), all_partials += s.kept, bound_pruned += s.bound_pruned;
  state.counters["partials_kept"] = static_cast<double>(all_partials);
  state.counters["bound_pruned"] = static_cast<double>(bound_pruned);
  state.counters["gen_cpu_s/einsum"] = r.generation_cpu_seconds / n;
  state.counters["join_cpu_s/einsum"] = r.join_cpu_seconds / n;
  state.counters["evaluated"] = static_cast<double>(evaluated);
  state.counters["kept"] = static_cast<double>(kept);
  state.counters["max_partials"] = static_cast<double>(partials);
  state.counters["rss_mib"] = peak_rss_mib();
}

// args: n Einsums of the zoo's matmul_chain_<n> (FFM section 7.5 sizes) on accelforge_tpu_v4i
// The counters of a search at the paper's size (PaperChain, Gpt3): per Einsum of `w`.
void paper_counters(benchmark::State& state, const FfmResult& r, int n) {
  int64_t evaluated = 0, kept = 0, combos = 0, partials = 0, generated = 0;
  for (const auto& p : r.pmappings) evaluated += p.evaluated, kept += p.kept, generated += p.contexts_reused < static_cast<int64_t>(p.contexts.size());
  for (const auto& s : r.steps) combos += s.combinations, partials = std::max(partials, s.kept);
  state.counters["gen_cpu_s/einsum"] = r.generation_cpu_seconds / n;
  state.counters["generated"] = static_cast<double>(generated);  // the others reuse an equal Einsum's
  state.counters["gen_cpu_s/generated"] = r.generation_cpu_seconds / static_cast<double>(generated);
  state.counters["join_cpu_s/einsum"] = r.join_cpu_seconds / n;
  state.counters["evaluated/cpu_s"] = static_cast<double>(evaluated) / r.generation_cpu_seconds;
  state.counters["kept"] = static_cast<double>(kept);
  state.counters["kept/cpu_s"] = static_cast<double>(kept) / r.generation_cpu_seconds;
  state.counters["combinations/cpu_s"] = r.join_cpu_seconds > 0 ? static_cast<double>(combos) / r.join_cpu_seconds : 0;
  state.counters["max_partials"] = static_cast<double>(partials);
  state.counters["rss_mib"] = peak_rss_mib();
}

void BM_PaperChain(benchmark::State& state) {
  const Core c = load_architecture("accelforge_tpu_v4i").cores.at(0);
  const int n = static_cast<int>(state.range(0));
  const Workload w = zoo_workload("matmul_chain_" + std::to_string(n), {});
  FfmResult r;
  for (auto _ : state) r = ffm_search(w, c, {});
  paper_counters(state, r, n);
}

// The paper's headline case (experiments/ffm_gpt3_tpuv4i.toml): one GPT-3 6.7B layer at batch 64
// on accelforge_tpu_v4i, arg = tokens.
void BM_Gpt3(benchmark::State& state) {
  const Core c = load_architecture("accelforge_tpu_v4i").cores.at(0);
  ZooParams zp;
  zp.batch = 64;
  zp.tokens = state.range(0);
  const Workload w = zoo_workload("gpt3_6.7b", zp);
  FfmResult r;
  for (auto _ : state) r = ffm_search(w, c, {});
  paper_counters(state, r, static_cast<int>(w.einsums.size()));
  state.counters["edp"] = r.best(Objective::Edp)->edp();
}

// args: baseline (0 random, 1 sa, 2 ga), evaluations
void BM_Baseline(benchmark::State& state) {
  const Core c = bench_core();
  const Workload w = chain(4, 8);
  const FfmResult exact = ffm_search(w, c, {});
  const double opt = exact.best(Objective::Edp)->edp();
  const Baseline b = static_cast<Baseline>(state.range(0));
  std::vector<double> gaps;
  int missed = 0;
  for (auto _ : state) {
    gaps.clear();
    missed = 0;
    for (uint64_t seed = 1; seed <= 10; ++seed) {
      BaselineOptions o;
      o.max_evaluations = state.range(1);
      o.time_budget_s = 3600;
      o.seed = seed;
      const BaselineResult r = run_baseline(w, c, b, o);
      if (r.found) gaps.push_back(100 * (r.objective / opt - 1));
      else ++missed;
    }
  }
  state.SetLabel(std::string(to_string(b)));
  double sum = 0;
  for (double g : gaps) sum += g;
  state.counters["gap_mean_%"] = gaps.empty() ? -1 : sum / static_cast<double>(gaps.size());
  state.counters["gap_min_%"] = gaps.empty() ? -1 : *std::min_element(gaps.begin(), gaps.end());
  state.counters["gap_max_%"] = gaps.empty() ? -1 : *std::max_element(gaps.begin(), gaps.end());
  state.counters["seeds_without_valid"] = missed;
}

}  // namespace

BENCHMARK(BM_Chain)->ArgsProduct({{1, 2, 4, 8, 16, 32, 64}, {8}, {0}})->Iterations(1)->Unit(benchmark::kSecond);
BENCHMARK(BM_Chain)->ArgsProduct({{64}, {8}, {5, 50}})->Iterations(1)->Unit(benchmark::kSecond);
BENCHMARK(BM_PaperChain)->Arg(2)->Arg(4)->Arg(8)->Arg(16)->Arg(32)->Arg(64)->Iterations(1)->Unit(benchmark::kSecond);
BENCHMARK(BM_Gpt3)->Arg(1024)->Arg(4096)->Iterations(1)->Unit(benchmark::kSecond);
BENCHMARK(BM_Baseline)->ArgsProduct({{0, 1, 2}, {100, 1000, 10000}})->Iterations(1)->Unit(benchmark::kSecond);

BENCHMARK_MAIN();
