// GET-fusion's search half on synthetic problems whose optimum is brute-forced
// (engine/search/get, docs/get_search.md).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <random>

#include "engine/common/error.hpp"
#include "engine/search/get/exact.hpp"
#include "engine/search/get/explain.hpp"
#include "engine/search/get/plan.hpp"
#include "engine/search/get/search.hpp"
#include "engine/search/get/split.hpp"

using namespace mapfuse;
using namespace mapfuse::get;

namespace {

// A stand-in for LBDF/BRR with the same structure: F_D = distinct external inputs + outputs
// leaving the group (or network outputs) + weights; F_β = weights + a quarter of every tensor +
// a whole tensor for every node feeding two or more nodes of the group (a skip to hold).
// A group whose first node is `bad_first` is unsupported (BRR's rule for local-region ops).
struct SynthModel : GroupModel {
  const Dag* g = nullptr;
  std::vector<double> weight, tensor;
  std::vector<uint8_t> bad_first;
  GroupCost evaluate(std::span<const int32_t> nodes) const override {
    auto in = [&](int32_t v) { return std::binary_search(nodes.begin(), nodes.end(), v); };
    GroupCost c;
    std::vector<int32_t> producers;
    for (int32_t v : nodes) {
      c.buffer += weight[v] + 0.25 * tensor[v];
      c.dram += weight[v];
      int inner_succ = 0;
      bool leaves = g->out(v).empty();
      for (int32_t e : g->out(v)) in(g->edges[e].to) ? ++inner_succ : (leaves = true, 0);
      if (inner_succ >= 2) c.buffer += tensor[v];
      if (leaves) c.dram += tensor[v];
      for (int32_t e : g->in(v))
        if (int32_t u = g->edges[e].from; !in(u)) producers.push_back(u);
    }
    std::sort(producers.begin(), producers.end());
    producers.erase(std::unique(producers.begin(), producers.end()), producers.end());
    for (int32_t u : producers) c.dram += tensor[u];
    c.supported = bad_first.empty() || !bad_first[nodes[0]];
    return c;
  }
  double monotone_buffer_bound(std::span<const int32_t> nodes) const override {
    double w = 0;  // weights and quarter tensors only grow when nodes are added
    for (int32_t v : nodes) w += weight[v] + 0.25 * tensor[v];
    return w;
  }
};

struct Case {
  Dag dag;
  SynthModel model;
};

// A random DAG: a chain with gaps plus skip edges, ≤ max_edges edges.
Case random_case(int n, uint64_t seed, int max_edges = 18, bool with_unsupported = false) {
  std::mt19937_64 rng(seed);
  std::vector<Edge> edges;
  for (int v = 0; v + 1 < n; ++v)
    if (std::bernoulli_distribution(0.85)(rng)) edges.push_back({v, v + 1});
  for (int tries = 0; tries < 40 && static_cast<int>(edges.size()) < max_edges; ++tries) {
    const int a = std::uniform_int_distribution<int>(0, n - 3)(rng);
    const int b = std::uniform_int_distribution<int>(a + 2, std::min(n - 1, a + 5))(rng);
    edges.push_back({a, b});
  }
  Case c;
  c.dag = make_dag(n, edges);
  c.model.g = &c.dag;
  for (int v = 0; v < n; ++v) {
    c.model.weight.push_back(std::uniform_int_distribution<int>(0, 6)(rng));
    c.model.tensor.push_back(std::uniform_int_distribution<int>(2, 12)(rng));
  }
  if (with_unsupported) {
    c.model.bad_first.assign(n, 0);
    c.model.bad_first[std::uniform_int_distribution<int>(1, n - 1)(rng)] = 1;
  }
  return c;
}

// Independent check of the quotient graph: a cycle found by DFS over a dense matrix.
bool quotient_acyclic(const Problem& p, const std::vector<Group>& groups) {
  std::vector<int> of(p.dag.n, -1);
  int count = 0;
  for (const Group& g : groups) {
    for (int32_t v : g) of[v] = count;
    ++count;
  }
  for (int v = 0; v < p.dag.n; ++v)
    if (of[v] < 0) of[v] = count++;
  std::vector<std::vector<uint8_t>> adj(count, std::vector<uint8_t>(count, 0));
  for (const Edge& e : p.dag.edges)
    if (of[e.from] != of[e.to]) adj[of[e.from]][of[e.to]] = 1;
  std::vector<int> state(count, 0);
  std::function<bool(int)> dfs = [&](int a) {
    state[a] = 1;
    for (int b = 0; b < count; ++b)
      if (adj[a][b] && (state[b] == 1 || (state[b] == 0 && !dfs(b)))) return false;
    state[a] = 2;
    return true;
  };
  for (int a = 0; a < count; ++a)
    if (state[a] == 0 && !dfs(a)) return false;
  return true;
}

// Brute force: every assignment of the cut bits; components are the groups by construction.
double brute_force_optimum(const Problem& p, int64_t* valid_plans = nullptr) {
  const size_t m = p.genes.size();
  REQUIRE(m <= 22);
  double best = std::numeric_limits<double>::infinity();
  int64_t count = 0;
  std::vector<uint8_t> cut(m);
  for (uint64_t mask = 0; mask < (uint64_t{1} << m); ++mask) {
    for (size_t k = 0; k < m; ++k) cut[k] = (mask >> k) & 1;
    const std::vector<Group> groups = decode(p, cut);
    double dram = 0;
    bool ok = true;
    for (const Group& g : groups) {
      const GroupCost c = p.model->evaluate(g);
      ok = ok && c.supported && c.buffer < p.beta;
      dram += c.dram;
    }
    if (!ok || !quotient_acyclic(p, groups)) continue;
    ++count;
    best = std::min(best, dram);
  }
  if (valid_plans) *valid_plans = count;
  return best;
}

Case residual_block() {
  // Fig. 2(c): add0 -> conv -> relu -> add3, skip add0 -> add3.
  Case c;
  c.dag = make_dag(4, {{0, 1}, {1, 2}, {2, 3}, {0, 3}});
  c.model.g = &c.dag;
  c.model.weight = {0, 8, 0, 0};
  c.model.tensor = {4, 4, 4, 4};
  return c;
}

int32_t edge_id(const Dag& g, int32_t a, int32_t b) {
  for (int32_t id = 0; id < static_cast<int32_t>(g.edges.size()); ++id)
    if (g.edges[id].from == a && g.edges[id].to == b) return id;
  return -1;
}

}  // namespace

TEST_CASE("get.plan: make_dag refuses edges that are not topological, merges duplicates") {
  CHECK_THROWS_AS(make_dag(3, {{1, 0}}), InputError);
  CHECK_THROWS_AS(make_dag(3, {{0, 3}}), InputError);
  CHECK_THROWS_AS(make_dag(3, {{1, 1}}), InputError);
  const Dag g = make_dag(4, {{0, 1}, {0, 1}, {1, 3}, {0, 2}});
  CHECK(g.edges.size() == 3);
  CHECK(g.out(0).size() == 2);
  CHECK(g.in(3).size() == 1);
  CHECK(g.edges[g.in(3)[0]].from == 1);
}

TEST_CASE("get.plan: decode, encode and the topological cut of a residual block") {
  Case c = residual_block();
  const Problem p = make_problem(c.dag, c.model, 1000);
  CHECK(p.genes.size() == 4);
  std::vector<uint8_t> cut(4, 0);
  cut[p.gene_of_edge[edge_id(p.dag, 1, 2)]] = 1;
  std::vector<Group> groups = decode(p, cut);
  REQUIRE(groups.size() == 1);  // the skip keeps the block connected
  cut[p.gene_of_edge[edge_id(p.dag, 0, 3)]] = 1;
  groups = decode(p, cut);
  REQUIRE(groups.size() == 2);
  CHECK(groups[0] == Group{0, 1});
  CHECK(groups[1] == Group{2, 3});
  CHECK(encode(p, groups) == cut);
  Workspace ws;
  std::vector<Group> parts;
  split_at(p.dag, Group{0, 1, 2, 3}, 1, ws, parts);
  CHECK(parts == std::vector<Group>{{0, 1}, {2, 3}});
  parts.clear();
  split_at(p.dag, Group{0, 2, 3}, 0, ws, parts);  // {2,3} and {0} once node 1 is elsewhere
  CHECK(parts == std::vector<Group>{{0}, {2, 3}});
}

TEST_CASE("get.split: Fig. 2(c), a residual block's explanation gives 3 cuts, each the skip plus one main edge") {
  Case c = residual_block();
  const Problem p = make_problem(c.dag, c.model, 1000);
  const Group block{0, 1, 2, 3};
  const int32_t skip = edge_id(p.dag, 0, 3);
  const std::vector<int32_t> expl{edge_id(p.dag, 0, 1), edge_id(p.dag, 1, 2), edge_id(p.dag, 2, 3), skip};
  const std::vector<int32_t> cuts = candidate_cuts(p.dag, block, expl);
  REQUIRE(cuts == std::vector<int32_t>{0, 1, 2});
  Workspace ws;
  for (int32_t t : cuts) {
    std::vector<int32_t> e = cut_edges(p.dag, block, t, ws);
    std::sort(e.begin(), e.end());
    std::vector<int32_t> want{skip, edge_id(p.dag, t, t + 1)};
    std::sort(want.begin(), want.end());
    CHECK(e == want);
  }
  // The skip alone spans all three positions; one main edge alone gives its own cut.
  CHECK(candidate_cuts(p.dag, block, std::vector<int32_t>{skip}).size() == 3);
  CHECK(candidate_cuts(p.dag, block, std::vector<int32_t>{edge_id(p.dag, 1, 2)}) == std::vector<int32_t>{1});
}

TEST_CASE("get.plan: quotient cycles are repaired, also through an unfuseable node") {
  // Crossing groups {0,2} and {1,3}: 0->3 and 1->2 make A->B and B->A.
  Case c;
  c.dag = make_dag(4, {{0, 2}, {1, 3}, {0, 3}, {1, 2}});
  c.model.g = &c.dag;
  c.model.weight = {1, 1, 1, 1};
  c.model.tensor = {1, 1, 1, 1};
  const Problem p = make_problem(c.dag, c.model, 1000);
  std::vector<Group> groups{{0, 2}, {1, 3}};
  CHECK_FALSE(quotient_acyclic(p, groups));
  Workspace ws;
  CHECK(repair_cycles(p, groups, ws) == 1);
  CHECK(quotient_acyclic(p, groups));
  CHECK(groups.size() == 3);
  Evaluator ev(p);
  std::string why;
  CHECK(is_valid_plan(p, ev, groups, &why));

  // 0 -> 1 -> 2 with 1 unfuseable and the direct edge 0 -> 2: {0, 2} would wait on itself.
  Case u;
  u.dag = make_dag(3, {{0, 1}, {1, 2}, {0, 2}});
  u.model.g = &u.dag;
  u.model.weight = {1, 50, 1};
  u.model.tensor = {1, 1, 1};
  const Problem q = make_problem(u.dag, u.model, 20);
  CHECK(q.fuseable == std::vector<uint8_t>{1, 0, 1});
  CHECK(q.genes.size() == 1);
  std::vector<Group> g2 = decode(q, std::vector<uint8_t>{0});
  REQUIRE(g2 == std::vector<Group>{{0, 2}});
  CHECK_FALSE(quotient_acyclic(q, g2));
  CHECK(repair_cycles(q, g2, ws) == 1);
  CHECK(g2 == std::vector<Group>{{0}, {2}});
  Evaluator ev2(q);
  CHECK(is_valid_plan(q, ev2, g2, &why));
}

TEST_CASE("get.split: Algorithm 1 picks the category-1 cut of least DRAM, hand-computed") {
  // Chain 0-1-2-3, tensors 8,2,6,4, weights 0: F_β = Σ tensor/4 (no skips), F_D = in + out.
  Case c;
  c.dag = make_dag(4, {{0, 1}, {1, 2}, {2, 3}});
  c.model.g = &c.dag;
  c.model.weight = {0, 0, 0, 0};
  c.model.tensor = {8, 2, 6, 4};
  // Whole chain: F_β = 5; cut after 0: {0}=2,{1,2,3}=3; after 1: {0,1}=2.5,{2,3}=2.5; after 2: {0,1,2}=4,{3}=1.
  const Problem p = make_problem(c.dag, c.model, 3.5);  // valid iff F_β < 3.5: cuts t=0 and t=1 are category 1
  Evaluator ev(p);
  CHECK_FALSE(ev.valid(Group{0, 1, 2, 3}));
  // DRAM: t=0: {0}: out 8; {1,2,3}: in 8 + out 4 -> 20. t=1: {0,1}: out 2; {2,3}: in 2 + out 4 -> 8.
  auto expl = make_exact_cut_explainer();
  std::mt19937_64 rng(1);
  Splitter s(ev, expl.get(), {}, rng);
  std::vector<Group> out;
  s.repair(Group{0, 1, 2, 3}, out);
  CHECK(out == std::vector<Group>{{0, 1}, {2, 3}});
  CHECK(s.stats().distinct == 1);
  CHECK(s.stats().distinct_rectified == 1);
  // Offered every edge, Algorithm 1 sees two category-1 cuts (t=0: 20, t=1: 8) and takes t=1.
  struct AllEdges : Explainer {
    std::string_view name() const override { return "all"; }
    Explanation explain(std::span<const int32_t> group, Evaluator& ev, Workspace& ws) override {
      Explanation x;
      x.edges = cut_edges(ev.problem().dag, group, group[0], ws);  // t = 0 first
      for (size_t k = 1; k + 1 < group.size(); ++k)
        for (int32_t id : cut_edges(ev.problem().dag, group, group[k], ws)) x.edges.push_back(id);
      return x;
    }
  } all;
  Splitter s_all(ev, &all, {}, rng);
  out.clear();
  s_all.repair(Group{0, 1, 2, 3}, out);
  CHECK(out == std::vector<Group>{{0, 1}, {2, 3}});
  // Occlusion ranks the edge whose cut lowers the largest part most: t=1 (5 - 2.5) first.
  auto occ = make_occlusion_explainer(0.2);
  Workspace ws;
  const Explanation e = occ->explain(Group{0, 1, 2, 3}, ev, ws);
  REQUIRE(e.edges.size() == 1);
  CHECK(p.dag.edges[e.edges[0]].from == 1);
  // The interval DP finds the same split.
  const IntervalResult iv = interval_dp(ev, Group{0, 1, 2, 3}, ws);
  CHECK(iv.found);
  CHECK(iv.dram == 8);
  // Algorithm 1 with an explanation that only offers category 2 (t=2: {0,1,2} invalid, {3} valid)
  // keeps {3} and recurses on {0,1,2} with the same explainer.
  struct Fixed : Explainer {
    std::string_view name() const override { return "fixed"; }
    Explanation explain(std::span<const int32_t> group, Evaluator& ev, Workspace& ws) override {
      Explanation x;
      if (group.size() == 4) x.edges = {edge_id(ev.problem().dag, 2, 3)};
      else x = make_exact_cut_explainer()->explain(group, ev, ws);
      return x;
    }
  } fixed;
  Splitter s2(ev, &fixed, {}, rng);
  out.clear();
  s2.repair(Group{0, 1, 2, 3}, out);
  std::sort(out.begin(), out.end());
  // {0,1,2}: F_β 4 invalid; its cuts: t=0 {0},{1,2} (2, 2) DRAM 8+(8+6)=22; t=1 {0,1},{2} DRAM 2+(2+6)=10.
  CHECK(out == std::vector<Group>{{0, 1}, {2}, {3}});
  CHECK(s2.stats().distinct_rectified == 1);
}

TEST_CASE("get.split: random split and Algorithm 1 both return valid parts covering the group") {
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    Case c = random_case(12, seed);
    const Problem p = make_problem(c.dag, c.model, 22);
    Evaluator ev(p);
    std::mt19937_64 rng(seed);
    std::vector<Group> whole = decode(p, std::vector<uint8_t>(p.genes.size(), 0));
    for (SplitKind k : {SplitKind::Random, SplitKind::Cut, SplitKind::Occlusion, SplitKind::Dp}) {
      auto expl = make_explainer(k);
      Splitter s(ev, expl.get(), {}, rng);
      std::vector<Group> out;
      for (const Group& g : whole) s.repair(g, out);
      std::string why;
      CHECK_MESSAGE(is_valid_plan(p, ev, out, &why), why, " seed ", seed, " split ", to_string(k));
      if (k != SplitKind::Random) CHECK(s.stats().distinct_rectified <= s.stats().distinct);
    }
  }
}

TEST_CASE("get.exact: the ideal-lattice optimum equals brute force on random DAGs with skips") {
  int checked = 0;
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    const int n = 8 + static_cast<int>(seed % 5);  // 8..12 nodes
    Case c = random_case(n, seed * 7919, 16, seed % 3 == 0);
    for (double beta : {14.0, 25.0, 60.0}) {
      Problem p;
      try {
        p = make_problem(c.dag, c.model, beta);
      } catch (const InputError&) {
        continue;
      }
      int64_t plans = 0;
      const double want = brute_force_optimum(p, &plans);
      Evaluator ev(p);
      const ExactResult r = exact_optimum(p, ev, {});
      CAPTURE(seed);
      CAPTURE(beta);
      REQUIRE(r.optimal);
      CHECK(r.plan.dram == want);
      CHECK(r.lower_bound == want);
      std::string why;
      CHECK_MESSAGE(is_valid_plan(p, ev, r.plan.groups, &why), why);
      CHECK(quotient_acyclic(p, r.plan.groups));
      if (r.interval_dram >= 0) CHECK(r.interval_dram >= want);
      // This model's F_β only grows when nodes are added, so assuming it changes nothing.
      ExactOptions mono;
      mono.assume_monotone = true;
      const ExactResult m = exact_optimum(p, ev, mono);
      CHECK(m.assumed_monotone);
      CHECK(m.plan.dram == want);
      ++checked;
    }
  }
  CHECK(checked >= 25);
}

TEST_CASE("get.exact: on a chain the interval DP is the optimum; a state limit reports a bound and gap") {
  Case c;
  std::vector<Edge> chain;
  for (int v = 0; v + 1 < 14; ++v) chain.push_back({v, v + 1});
  c.dag = make_dag(14, chain);
  c.model.g = &c.dag;
  std::mt19937_64 rng(5);
  for (int v = 0; v < 14; ++v) {
    c.model.weight.push_back(std::uniform_int_distribution<int>(0, 6)(rng));
    c.model.tensor.push_back(std::uniform_int_distribution<int>(2, 12)(rng));
  }
  const Problem p = make_problem(c.dag, c.model, 18);
  const double want = brute_force_optimum(p);
  Evaluator ev(p);
  const ExactResult r = exact_optimum(p, ev, {});
  CHECK(r.optimal);
  CHECK(r.plan.dram == want);
  CHECK(r.interval_dram == want);
  ExactOptions limited;
  limited.max_states = 3;
  const ExactResult s = exact_optimum(p, ev, limited);
  CHECK_FALSE(s.optimal);
  CHECK(s.lower_bound <= want);
  CHECK(s.plan.dram == want);  // the interval DP's plan is the incumbent
  CHECK(s.gap == doctest::Approx((s.plan.dram - s.lower_bound) / s.plan.dram));
  CHECK(s.gap > 0);
}

TEST_CASE("get.search: every search is valid, within budget, never below the optimum, deterministic per seed") {
  Case c = random_case(12, 4242);
  const Problem p = make_problem(c.dag, c.model, 25);
  const double opt = brute_force_optimum(p);
  for (SearchKind kind : {SearchKind::Random, SearchKind::Local, SearchKind::Nsga2})
    for (SplitKind split : {SplitKind::Random, SplitKind::Cut, SplitKind::Occlusion, SplitKind::Dp}) {
      CAPTURE(to_string(kind));
      CAPTURE(to_string(split));
      auto expl = make_explainer(split);
      SearchOptions o;
      o.budget = 300;
      o.seed = 11;
      const SearchResult a = run_search(p, kind, expl.get(), o);
      const SearchResult b = run_search(p, kind, expl.get(), o);
      CHECK(a.plans == 300);
      CHECK(a.best.dram == b.best.dram);
      CHECK(a.best.groups == b.best.groups);
      CHECK(a.trace.size() == b.trace.size());
      Evaluator ev(p);
      std::string why;
      CHECK_MESSAGE(is_valid_plan(p, ev, a.best.groups, &why), why);
      CHECK(a.best.dram >= opt);
      CHECK(a.best.dram <= opt * 1.5);
      REQUIRE_FALSE(a.trace.empty());
      CHECK(a.trace.back().dram == a.best.dram);
      for (size_t i = 1; i < a.trace.size(); ++i) {
        CHECK(a.trace[i].dram < a.trace[i - 1].dram);
        CHECK(a.trace[i].plan > a.trace[i - 1].plan);
      }
      CHECK(a.rectify_defined == (split != SplitKind::Random));
      CHECK(a.best.mbu < p.beta);
    }
  // LS and NSGA-II with the exact-cut explainer reach the brute-forced optimum on this small case.
  auto cut = make_explainer(SplitKind::Cut);
  SearchOptions o;
  o.budget = 2000;
  CHECK(run_search(p, SearchKind::Local, cut.get(), o).best.dram == opt);
  CHECK(run_search(p, SearchKind::Nsga2, cut.get(), o).best.dram == opt);
  o.budget = 0;
  CHECK_THROWS_AS(run_search(p, SearchKind::Random, nullptr, o), InputError);
  CHECK_THROWS_AS(search_kind_from_string("nsga"), InputError);
  CHECK_THROWS_AS(split_kind_from_string("gnn"), InputError);
}

TEST_CASE("get.plan: no fuseable node or a zero buffer is bad input") {
  Case c = residual_block();
  CHECK_THROWS_AS(make_problem(c.dag, c.model, 0), InputError);
  CHECK_THROWS_AS(make_problem(c.dag, c.model, 0.5), InputError);  // every node needs ≥ 1
}
