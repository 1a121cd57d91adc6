// FFM's baselines as anytime searches (the paper's Figure 8 at reduced size, docs/ffm.md
// "Baselines"): percent above FFM's exact EDP optimum of the best-so-far point after 100, 1,000,
// 10,000 and 100,000 evaluations (read off one run of 100,000 per seed), mean / min / max over
// seeds 1-10, and the CPU seconds per run. One core:
//   OMP_NUM_THREADS=1 build/bench/mapfuse_bench_ffm_baselines
// Cases (args: case, baseline 0 random / 1 sa / 2 ga):
//   0  chain of four 8x8x8 matmuls on tests/fixtures/ffm/small_core.toml with a 256-word buffer
//      and a 16-word register file (the core bench_ffm_scaling uses);
//   1  GPT-3-like tail at small size on the same core: Z = AV x WZ, FFA = Z x WA, FFB = FFA x WB
//      with tokens M = 16, d_model D = 8, FFN width 4D = 32 (GPT-3's projection, expansion and
//      contraction shapes, zoo gpt3_6.7b, scaled down so that FFM's exact optimum takes seconds).
#include <benchmark/benchmark.h>
#include <time.h>

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "engine/arch/arch_toml.hpp"
#include "engine/search/ffm/baselines.hpp"
#include "engine/search/ffm/ffm.hpp"

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

Workload bench_case(int which) {
  Workload w;
  if (which == 0) {
    w.name = "chain4_8";
    for (int i = 0; i < 4; ++i)
      w.einsums.push_back(make_matmul("MM" + std::to_string(i), 8, 8, 8, "T" + std::to_string(i), "W" + std::to_string(i),
                                      "T" + std::to_string(i + 1)));
  } else {
    const int64_t M = 16, D = 8, C = 4 * D;
    w.name = "gpt3_tail_small";
    w.einsums.push_back(make_matmul("Z", M, D, D, "AV", "WZ", "Z"));
    w.einsums.push_back(make_matmul("FFA", M, C, D, "Z", "WA", "FFA"));
    w.einsums.push_back(make_matmul("FFB", M, D, C, "FFA", "WB", "FFB"));
  }
  finalize(w);
  return w;
}

double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// The best-so-far objective after `evals` evaluations, from a run's trace (infinity before the
// first valid point).
double best_at(const BaselineResult& r, int64_t evals) {
  double best = std::numeric_limits<double>::infinity();
  for (const BaselineTracePoint& p : r.trace)
    if (p.evaluations <= evals) best = p.best;
  return best;
}

void BM_BaselineTrace(benchmark::State& state) {
  const Core c = bench_core();
  const Workload w = bench_case(static_cast<int>(state.range(0)));
  const Baseline b = static_cast<Baseline>(state.range(1));
  const double t_ffm = cpu_seconds();
  const FfmResult exact = ffm_search(w, c, {});
  const double ffm_cpu = cpu_seconds() - t_ffm;
  const double opt = exact.best(Objective::Edp)->edp();
  constexpr int64_t kCheckpoints[] = {100, 1000, 10000, 100000};
  std::vector<std::vector<double>> gaps(4);
  int missed[4] = {0, 0, 0, 0};
  double cpu = 0;
  for (auto _ : state) {
    for (uint64_t seed = 1; seed <= 10; ++seed) {
      BaselineOptions o;
      o.max_evaluations = 100000;
      o.time_budget_s = 3600;
      o.seed = seed;
      const double t0 = cpu_seconds();
      const BaselineResult r = run_baseline(w, c, b, o);
      cpu += cpu_seconds() - t0;
      for (int k = 0; k < 4; ++k) {
        const double v = best_at(r, kCheckpoints[k]);
        if (v < std::numeric_limits<double>::infinity()) gaps[k].push_back(100 * (v / opt - 1));
        else ++missed[k];
      }
    }
  }
  state.SetLabel(w.name + " " + std::string(to_string(b)));
  state.counters["ffm_cpu_s"] = ffm_cpu;
  state.counters["cpu_s/run"] = cpu / 10;
  for (int k = 0; k < 4; ++k) {
    const std::string at = "@" + std::to_string(kCheckpoints[k]);
    const std::vector<double>& g = gaps[k];
    double sum = 0;
    for (double x : g) sum += x;
    state.counters["mean%" + at] = g.empty() ? -1 : sum / static_cast<double>(g.size());
    state.counters["min%" + at] = g.empty() ? -1 : *std::min_element(g.begin(), g.end());
    state.counters["max%" + at] = g.empty() ? -1 : *std::max_element(g.begin(), g.end());
    state.counters["no_valid" + at] = missed[k];
  }
}

}  // namespace

BENCHMARK(BM_BaselineTrace)->ArgsProduct({{0, 1}, {0, 1, 2}})->Iterations(1)->Unit(benchmark::kSecond);

BENCHMARK_MAIN();
