// The genetic allocator (engine/search/stream/ga_allocation.hpp) on a tiny fused graph: three 3x3
// convs, one CT per output row, K split into two groups, on Stream's Table 3 two-core system (one
// WS, one OS core), with hand-written per-core tile costs. 6 genes, 2^6 = 64 allocations: the
// brute-force enumeration gives the optimum and the Pareto front the search must find.
#include <doctest/doctest.h>

#include <functional>
#include <limits>
#include <string>

#include "engine/arch/arch_toml.hpp"
#include "engine/common/csv.hpp"
#include "engine/common/error.hpp"
#include "engine/cost/tile_cost_csv.hpp"
#include "engine/search/stream/ga_allocation.hpp"
#include "tile_workloads.hpp"

using namespace mapfuse;

namespace {

struct Tiny {
  Workload w;
  Architecture arch;
  TileGraph g;
  CsvTable table;
  std::vector<std::vector<int>> layer_cores;
  std::vector<TileCost> candidate_costs;
  ScheduleProblemOptions popt;
  coala::Options opt = coala::Options::for_semantics(coala::Semantics::Stream);
};

// Per layer and core (ws, os): latency, on-chip energy. The WS core is slow and frugal on c1 and
// c3, the OS core fast and costly, c2 the other way round, so latency and energy conflict.
// `offchip_os_c2`: on the OS core c2's output streams to DRAM (a different problem structure).
Tiny tiny(bool offchip_os_c2 = false) {
  Tiny t;
  t.w = test::finalized({test::conv("c1", "in", 8, 8, 6, 6, 3, 1, 1), test::conv("c2", "c1", 8, 8, 6, 6, 3, 1, 1),
                         test::conv("c3", "c2", 8, 8, 6, 6, 3, 1, 1)});
  t.arch = load_architecture("stream_t3_2c_1ws");
  TilingOptions to;
  to.layers = stream_tiling(t.w, 2);
  to.stacks = {{0, 1, 2}};
  t.g = build_tile_graph(t.w, to);
  std::string text = "layer,core,R,S,P,Q,C,K,N,latency_cc,onchip_energy_pj,offchip_energy_pj,offchip\n";
  const char* rows[] = {"c1,ws0,*,*,*,*,*,*,*,300,40,0,", "c1,os0,*,*,*,*,*,*,*,120,95,0,",
                        "c2,ws0,*,*,*,*,*,*,*,110,90,0,", "c2,os0,*,*,*,*,*,*,*,260,35,0,",
                        "c3,ws0,*,*,*,*,*,*,*,280,45,0,", "c3,os0,*,*,*,*,*,*,*,130,100,0,"};
  for (const char* r : rows) text += std::string(r) + "\n";
  if (offchip_os_c2) text.replace(text.find("c2,os0,*,*,*,*,*,*,*,260,35,0,"), 30, "c2,os0,*,*,*,*,*,*,*,260,35,7,O=8");
  t.table = parse_csv(text, "tiny.csv");
  t.layer_cores = capable_cores(t.w, t.arch);
  const CandidateTiles cand = candidate_tiles(t.g.tiles, t.layer_cores);
  t.candidate_costs = tile_costs_from_table(t.table, t.w, cand.tiles, t.arch, cand.cores);
  return t;
}

AllocationEvaluator evaluator(const Tiny& t) {
  return AllocationEvaluator(t.w, t.g, t.arch, t.layer_cores, t.candidate_costs, t.popt, t.opt);
}

// The schedule of an allocation built from scratch: costs looked up for these cores, a new problem.
coala::Schedule direct(const Tiny& t, const std::vector<int>& cores) {
  const auto costs = tile_costs_from_table(t.table, t.w, t.g.tiles, t.arch, cores);
  return coala::schedule(build_schedule_problem(t.w, t.g, t.arch, cores, costs, t.popt), t.opt);
}

// Every genome of the evaluator (cores per gene), by counting; those the scheduler refuses are
// left out and counted in `refused`.
std::vector<GaPoint> enumerate(AllocationEvaluator& ev, int* refused = nullptr) {
  const size_t G = ev.genes().size();
  std::vector<GaPoint> all;
  std::vector<size_t> digit(G, 0);
  while (true) {
    GaPoint p;
    for (size_t i = 0; i < G; ++i) p.genome.push_back(ev.choices(int(i))[digit[i]]);
    try {
      const coala::Schedule& s = ev.evaluate(p.genome);
      p.latency_cc = s.latency_cc;
      p.energy_pj = s.energy.total();
      all.push_back(p);
    } catch (const InputError&) {
      if (refused) ++*refused;
    }
    size_t i = 0;
    while (i < G && ++digit[i] == ev.choices(int(i)).size()) digit[i++] = 0;
    if (i == G) break;
  }
  return all;
}

double least_edp(const std::vector<GaPoint>& pts) {
  double best = std::numeric_limits<double>::infinity();
  for (const GaPoint& p : pts) best = std::min(best, p.edp());
  return best;
}

GaOptions budget(int population, int generations, uint64_t seed) {
  GaOptions o;
  o.population = population;
  o.generations = generations;
  o.seed = seed;
  return o;
}

bool dominated(const GaPoint& p, const std::vector<GaPoint>& by) {
  for (const GaPoint& q : by)
    if (q.latency_cc <= p.latency_cc && q.energy_pj <= p.energy_pj &&
        (q.latency_cc < p.latency_cc || q.energy_pj < p.energy_pj))
      return true;
  return false;
}

}  // namespace

TEST_CASE("stream ga: genes are (layer, group) pairs, every CT of a group on the gene's core") {
  const Tiny t = tiny();
  AllocationEvaluator ev = evaluator(t);
  REQUIRE(ev.genes().size() == 6);  // 3 layers x 2 K groups, both cores run every conv
  CHECK(ev.genes()[3].layer == 1);
  CHECK(ev.genes()[3].group == 1);
  CHECK(ev.choices(0) == std::vector<int>{0, 1});
  const std::vector<int> genome = {0, 1, 1, 0, 0, 0};
  const auto cores = ev.core_of_tile(genome);
  const TileSet& ts = t.g.tiles;
  REQUIRE(cores.size() == ts.tiles.size());
  CHECK(cores.size() == 36);  // 3 layers x 6 rows x 2 groups
  for (size_t i = 0; i < cores.size(); ++i) CHECK(cores[i] == genome[size_t(ts.tiles[i].layer * 2 + ts.tiles[i].group)]);
  CHECK(ev.genome_of(cores) == genome);
  // The costs are the table's per core: c2 on the OS core (index 1) 260 cc, 35 pJ.
  const int c2 = ts.layer_first[1];
  CHECK(ev.cost(c2, 1).latency_cc == 260);
  CHECK(ev.cost(c2, 0).onchip_energy_pj == 90);
}

TEST_CASE("stream ga: a fitness equals a COALA run of the same allocation on a freshly built problem") {
  for (const bool offchip : {false, true}) {
    CAPTURE(offchip);
    const Tiny t = tiny(offchip);
    AllocationEvaluator ev = evaluator(t);
    // Consecutive allocations on the one reused problem, each against its own fresh build.
    const std::vector<std::vector<int>> genomes = {
        {0, 0, 0, 0, 0, 0}, {1, 1, 1, 1, 1, 1}, {0, 1, 1, 0, 0, 1}, {1, 0, 0, 1, 1, 0}, {0, 0, 0, 0, 0, 0}};
    for (const auto& g : genomes) {
      CAPTURE(g);
      const coala::Schedule& s = ev.evaluate(g);
      const coala::Schedule d = direct(t, ev.core_of_tile(g));
      CHECK(s.latency_cc == d.latency_cc);
      CHECK(s.energy.total() == d.energy.total());
      CHECK(s.transfers.size() == d.transfers.size());
    }
    CHECK(ev.evaluations() == 5);
    // With the same blocks everywhere the problem is built once. With c2's output streamed to DRAM
    // on the OS core, it is rebuilt whenever a c2 group (genes 2, 3) changes core: here every time.
    CHECK(ev.rebuilds() == (offchip ? 5 : 1));
  }
}

TEST_CASE("stream ga: with enough budget the search finds the brute-force optimum and front of 64 allocations") {
  const Tiny t = tiny();
  AllocationEvaluator brute_ev = evaluator(t);
  const std::vector<GaPoint> all = enumerate(brute_ev);
  REQUIRE(all.size() == 64);
  const double best_edp = least_edp(all);
  std::vector<GaPoint> brute_front;
  for (int i : pareto_front(all)) brute_front.push_back(all[size_t(i)]);
  // The tiny costs make the objectives conflict: the front has more than one point.
  CHECK(brute_front.size() > 1);

  AllocationEvaluator ev = evaluator(t);
  const GaResult r = ga_allocate(ev, budget(16, 30, 7));
  CHECK(r.best.edp() == best_edp);
  CHECK(r.evaluations <= 64);  // each allocation scheduled at most once
  CHECK(r.evaluations == ev.evaluations());
  // The same front: every brute-force front point found, nothing else on it.
  CHECK(r.front.size() == brute_front.size());
  for (const GaPoint& p : r.front) CHECK_FALSE(dominated(p, all));
  for (const GaPoint& q : brute_front) {
    bool found = false;
    for (const GaPoint& p : r.front) found = found || (p.latency_cc == q.latency_cc && p.energy_pj == q.energy_pj);
    CHECK(found);
  }
  // The front returned is non-dominated among itself and sorted by latency.
  for (size_t i = 0; i < r.front.size(); ++i) {
    CHECK_FALSE(dominated(r.front[i], r.front));
    if (i) CHECK(r.front[i - 1].latency_cc <= r.front[i].latency_cc);
  }
  // The trace: one entry per generation, best-so-far never worse, the last = the best found.
  REQUIRE(r.trace.size() == 31);
  for (size_t i = 1; i < r.trace.size(); ++i) {
    CHECK(r.trace[i].best_edp <= r.trace[i - 1].best_edp);
    CHECK(r.trace[i].best_latency_cc <= r.trace[i - 1].best_latency_cc);
    CHECK(r.trace[i].best_energy_pj <= r.trace[i - 1].best_energy_pj);
    CHECK(r.trace[i].evaluations >= r.trace[i - 1].evaluations);
  }
  CHECK(r.trace.back().best_edp == best_edp);
  CHECK(r.trace.front().evaluations <= 16);
  // Its fitness is the direct run's.
  const coala::Schedule d = direct(t, ev.core_of_tile(r.best.genome));
  CHECK(d.latency_cc * d.energy.total() == best_edp);
}

TEST_CASE("stream ga: the same seed gives the same search; a small budget stays within it") {
  const Tiny t = tiny();
  const GaOptions o = budget(6, 3, 11);
  AllocationEvaluator e1 = evaluator(t), e2 = evaluator(t);
  const GaResult a = ga_allocate(e1, o), b = ga_allocate(e2, o);
  CHECK(a.best.genome == b.best.genome);
  CHECK(a.evaluations == b.evaluations);
  REQUIRE(a.trace.size() == b.trace.size());
  for (size_t i = 0; i < a.trace.size(); ++i) {
    CHECK(a.trace[i].best_edp == b.trace[i].best_edp);
    CHECK(a.trace[i].evaluations == b.trace[i].evaluations);
  }
  REQUIRE(a.front.size() == b.front.size());
  for (size_t i = 0; i < a.front.size(); ++i) CHECK(a.front[i].genome == b.front[i].genome);
  // 6 initial + 3 x 6 offspring at most.
  CHECK(a.offspring <= 6 + 3 * 6);
  CHECK(a.evaluations <= a.offspring);
}

TEST_CASE("stream ga: pareto_front keeps equal points and drops dominated ones; bad budgets are InputErrors") {
  const std::vector<GaPoint> pts = {{{}, 5, 5}, {{}, 3, 9}, {{}, 5, 5}, {{}, 6, 4}, {{}, 5, 6}, {{}, 3, 10}, {{}, 9, 4}};
  CHECK(pareto_front(pts) == std::vector<int>{1, 0, 2, 3});
  const Tiny t = tiny();
  AllocationEvaluator ev = evaluator(t);
  GaOptions o;
  o.population = 1;
  try {
    ga_allocate(ev, o);
    FAIL("expected an InputError");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("--population") != std::string::npos);
  }
  o.population = 4;
  o.generations = -1;
  CHECK_THROWS_AS(ga_allocate(ev, o), InputError);
  CHECK_THROWS_AS(ev.evaluate(std::vector<int>{0, 1}), InputError);
}

TEST_CASE("stream ga: allocations the scheduler refuses are infeasible; the best feasible one is still found") {
  Tiny t = tiny();
  // The OS core's memories hold one word each: no CT's tensors fit, so COALA refuses every
  // allocation that uses it.
  for (Level& l : t.arch.cores[1].levels)
    if (l.entries > 0) l.entries = 1;
  AllocationEvaluator brute_ev = evaluator(t);
  int refused = 0;
  const std::vector<GaPoint> feasible = enumerate(brute_ev, &refused);
  REQUIRE(!feasible.empty());
  CHECK(refused + int(feasible.size()) == 64);
  CHECK(refused > 0);
  AllocationEvaluator ev = evaluator(t);
  const GaResult r = ga_allocate(ev, budget(16, 30, 7));
  CHECK(r.infeasible > 0);
  CHECK(r.infeasible < r.evaluations);
  CHECK(r.best.edp() == least_edp(feasible));
  for (const GaPoint& p : r.front) CHECK(p.latency_cc < 1e300);
  // Both cores unable to hold anything: every allocation refused, the search says so.
  for (Level& l : t.arch.cores[0].levels)
    if (l.entries > 0) l.entries = 1;
  AllocationEvaluator none = evaluator(t);
  CHECK_THROWS_WITH_AS(ga_allocate(none, budget(16, 2, 7)), doctest::Contains("could be scheduled"), InputError);
}

TEST_CASE("stream ga: with one core per layer there is no gene; the one allocation is scheduled once") {
  Tiny t = tiny();
  t.layer_cores = {{1}, {0}, {1}};  // c1 and c3 on the OS core, c2 on the WS core
  const CandidateTiles cand = candidate_tiles(t.g.tiles, t.layer_cores);
  CHECK(cand.slots == 1);
  t.candidate_costs = tile_costs_from_table(t.table, t.w, cand.tiles, t.arch, cand.cores);
  AllocationEvaluator ev = evaluator(t);
  CHECK(ev.genes().empty());
  const GaResult r = ga_allocate(ev, budget(4, 3, 1));
  CHECK(r.evaluations == 1);
  REQUIRE(r.trace.size() == 4);
  CHECK(r.trace.back().evaluations == 1);
  REQUIRE(r.front.size() == 1);
  const std::vector<int> cores = ev.core_of_tile(r.best.genome);
  for (size_t i = 0; i < cores.size(); ++i) CHECK(cores[i] == (t.g.tiles.tiles[i].layer == 1 ? 0 : 1));
  const coala::Schedule d = direct(t, cores);
  CHECK(r.best.latency_cc == d.latency_cc);
  CHECK(r.best.energy_pj == d.energy.total());
}
