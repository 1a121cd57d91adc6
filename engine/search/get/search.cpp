#include "engine/search/get/search.hpp"

#include <algorithm>
#include <random>
#include <stdexcept>

#include "engine/common/error.hpp"

namespace mapfuse::get {

SearchKind search_kind_from_string(std::string_view s) {
  if (s == "rs") return SearchKind::Random;
  if (s == "ls") return SearchKind::Local;
  if (s == "nsga2") return SearchKind::Nsga2;
  throw InputError({}, "--search",
                   "unknown search '" + std::string(s) + "'; expected rs, ls, nsga2 or exact" +
                       did_you_mean(s, {"rs", "ls", "nsga2", "exact"}));
}

SplitKind split_kind_from_string(std::string_view s) {
  if (s == "random") return SplitKind::Random;
  if (s == "cut") return SplitKind::Cut;
  if (s == "occlusion") return SplitKind::Occlusion;
  if (s == "dp") return SplitKind::Dp;
  if (s == "gnne") return SplitKind::Gnne;
  if (s == "pg") return SplitKind::Pg;
  if (s == "rg") return SplitKind::Rg;
  throw InputError({}, "--split",
                   "unknown explainer '" + std::string(s) + "'; expected random, cut, occlusion, dp, gnne, pg or rg" +
                       did_you_mean(s, {"random", "cut", "occlusion", "dp", "gnne", "pg", "rg"}));
}

std::string_view to_string(SearchKind k) {
  switch (k) {
    case SearchKind::Random: return "rs";
    case SearchKind::Local: return "ls";
    case SearchKind::Nsga2: return "nsga2";
  }
  return "?";
}

std::string_view to_string(SplitKind k) {
  switch (k) {
    case SplitKind::Random: return "random";
    case SplitKind::Cut: return "cut";
    case SplitKind::Occlusion: return "occlusion";
    case SplitKind::Dp: return "dp";
    case SplitKind::Gnne: return "gnne";
    case SplitKind::Pg: return "pg";
    case SplitKind::Rg: return "rg";
  }
  return "?";
}

std::unique_ptr<Explainer> make_explainer(SplitKind k, double occlusion_fraction) {
  switch (k) {
    case SplitKind::Random: return nullptr;
    case SplitKind::Cut: return make_exact_cut_explainer();
    case SplitKind::Occlusion: return make_occlusion_explainer(occlusion_fraction);
    case SplitKind::Dp: return make_interval_dp_explainer();
    case SplitKind::Gnne:
    case SplitKind::Pg:
    case SplitKind::Rg:
      throw std::logic_error("make_explainer: the GNN explainers need the network (gnn::make_*_explainer)");
  }
  return nullptr;
}

namespace {

// Decode → quotient-cycle repair → invalid-group repair → re-encode → price; counts every plan.
class PlanFactory {
 public:
  PlanFactory(const Problem& p, Explainer* explainer, const SearchOptions& opt, std::mt19937_64& rng)
      : p_(p), ev_(p), splitter_(ev_, explainer, opt.split, rng), budget_(opt.budget) {}

  bool exhausted() const { return plans_ >= budget_; }

  Plan make(std::span<const uint8_t> cut) {
    std::vector<Group> groups = decode(p_, cut);
    repair_cycles(p_, groups, ws_);
    Plan plan;
    for (const Group& grp : groups) splitter_.repair(grp, plan.groups);
    std::sort(plan.groups.begin(), plan.groups.end(), [](const Group& a, const Group& b) { return a[0] < b[0]; });
    plan.cut = encode(p_, plan.groups);
    price(ev_, plan);
    ++plans_;
    if (!have_best_ || plan.dram < best_.dram) {
      best_ = plan;
      have_best_ = true;
      trace_.push_back({plans_, plan.dram});
    }
    return plan;
  }

  SearchResult result() const {
    SearchResult r;
    r.best = best_;
    r.plans = plans_;
    r.rectify = splitter_.stats();
    r.rectify_defined = splitter_.uses_explainer();
    r.trace = trace_;
    r.model_calls = ev_.model_calls();
    return r;
  }

 private:
  const Problem& p_;
  Evaluator ev_;
  Splitter splitter_;
  Workspace ws_;
  int64_t budget_, plans_ = 0;
  Plan best_;
  bool have_best_ = false;
  std::vector<TracePoint> trace_;
};

// RS's plan (note §4, choice): p ~ U(0,1), each gene cut with probability p, so group sizes vary.
std::vector<uint8_t> random_genome(size_t genes, std::mt19937_64& rng) {
  const double q = std::uniform_real_distribution<double>(0, 1)(rng);
  std::bernoulli_distribution cut(q);
  std::vector<uint8_t> g(genes);
  for (auto& b : g) b = cut(rng);
  return g;
}

size_t pick(size_t n, std::mt19937_64& rng) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); }

// One 1-edit mutation of a repaired plan: shift a boundary node to the neighbouring group, merge
// two adjacent groups, or split a group at a random topological cut (uniform among the applicable).
std::vector<uint8_t> mutate(const Problem& p, const Plan& plan, std::mt19937_64& rng, Workspace& ws) {
  std::vector<uint8_t> cut = plan.cut;
  std::vector<int32_t> group_of(p.dag.n, -1);
  for (size_t i = 0; i < plan.groups.size(); ++i)
    for (int32_t v : plan.groups[i]) group_of[v] = static_cast<int32_t>(i);
  std::vector<int32_t> boundary, splittable;
  for (size_t k = 0; k < cut.size(); ++k)
    if (cut[k]) boundary.push_back(static_cast<int32_t>(k));
  for (size_t i = 0; i < plan.groups.size(); ++i)
    if (plan.groups[i].size() > 1) splittable.push_back(static_cast<int32_t>(i));
  std::vector<int> moves;
  if (!boundary.empty()) moves.insert(moves.end(), {0, 1});
  if (!splittable.empty()) moves.push_back(2);
  if (moves.empty()) return cut;
  const int move = moves[pick(moves.size(), rng)];
  // Re-cut every gene at node x so that x joins group `to` (its edges into `to` uncut, the rest cut).
  auto move_node = [&](int32_t x, int32_t to) {
    for (auto adj : {p.dag.out(x), p.dag.in(x)})
      for (int32_t e : adj) {
        const int32_t k = p.gene_of_edge[e];
        if (k < 0) continue;
        const Edge& ed = p.dag.edges[e];
        const int32_t other = ed.from == x ? ed.to : ed.from;
        cut[k] = group_of[other] != to;
      }
  };
  if (move == 0) {  // shift
    const Edge& e = p.dag.edges[p.genes[boundary[pick(boundary.size(), rng)]]];
    if (std::bernoulli_distribution(0.5)(rng))
      move_node(e.from, group_of[e.to]);
    else
      move_node(e.to, group_of[e.from]);
  } else if (move == 1) {  // merge
    const Edge& e = p.dag.edges[p.genes[boundary[pick(boundary.size(), rng)]]];
    const int32_t a = group_of[e.from], b = group_of[e.to];
    for (int32_t v : plan.groups[a])
      for (auto adj : {p.dag.out(v), p.dag.in(v)})
        for (int32_t id : adj) {
          const Edge& ed = p.dag.edges[id];
          const int32_t other = ed.from == v ? ed.to : ed.from;
          if (group_of[other] == b && p.gene_of_edge[id] >= 0) cut[p.gene_of_edge[id]] = 0;
        }
  } else {  // split
    const Group& grp = plan.groups[splittable[pick(splittable.size(), rng)]];
    const int32_t t = grp[pick(grp.size() - 1, rng)];
    for (int32_t id : cut_edges(p.dag, grp, t, ws)) cut[p.gene_of_edge[id]] = 1;
  }
  return cut;
}

bool same_plan(const Plan& a, const Plan& b) { return a.dram == b.dram && a.cut == b.cut; }

// Keeps the best `k` distinct plans, stable (older plans first on equal DRAM).
void truncate_unique(std::vector<Plan>& pop, size_t k) {
  std::stable_sort(pop.begin(), pop.end(), [](const Plan& a, const Plan& b) { return a.dram < b.dram; });
  std::vector<Plan> kept;
  for (Plan& pl : pop) {
    if (kept.size() == k) break;
    if (std::none_of(kept.begin(), kept.end(), [&](const Plan& q) { return same_plan(q, pl); }))
      kept.push_back(std::move(pl));
  }
  pop = std::move(kept);
}

std::vector<Plan> initial_population(const Problem& p, PlanFactory& f, size_t k, std::mt19937_64& rng) {
  std::vector<Plan> pop;
  for (size_t i = 0; i < k && !f.exhausted(); ++i) pop.push_back(f.make(random_genome(p.genes.size(), rng)));
  return pop;
}

void local_search(const Problem& p, PlanFactory& f, const SearchOptions& opt, std::mt19937_64& rng) {
  Workspace ws;
  std::vector<Plan> pop = initial_population(p, f, opt.population, rng);
  truncate_unique(pop, opt.population);
  while (!f.exhausted()) {
    const size_t parents = pop.size();
    for (size_t i = 0; i < parents && !f.exhausted(); ++i) pop.push_back(f.make(mutate(p, pop[i], rng, ws)));
    truncate_unique(pop, opt.population);
  }
}

// NSGA-II with one objective (DRAM): ranks are DRAM levels, crowding distance separates only
// equal-DRAM plans (the extremes of a level are infinitely crowded), binary tournaments, HUX
// crossover and bit-flip mutation on the cut bits (OpenBox/Platypus's operators for binary genes),
// elitist (μ+λ) survival of distinct plans.
void nsga2(const Problem& p, PlanFactory& f, const SearchOptions& opt, std::mt19937_64& rng) {
  const size_t k = static_cast<size_t>(opt.population);
  const size_t genes = p.genes.size();
  const double flip = opt.mutation_rate > 0 ? opt.mutation_rate : genes ? 1.0 / static_cast<double>(genes) : 0.0;
  std::vector<Plan> pop = initial_population(p, f, k, rng);
  truncate_unique(pop, k);
  std::vector<double> crowd;
  auto crowding = [&]() {  // pop is sorted by DRAM
    crowd.assign(pop.size(), 0);
    for (size_t i = 0; i < pop.size();) {
      size_t j = i;
      while (j < pop.size() && pop[j].dram == pop[i].dram) ++j;
      crowd[i] = crowd[j - 1] = std::numeric_limits<double>::infinity();
      i = j;
    }
  };
  auto tournament = [&]() -> const Plan& {
    const size_t a = pick(pop.size(), rng), b = pick(pop.size(), rng);
    if (pop[a].dram != pop[b].dram) return pop[a].dram < pop[b].dram ? pop[a] : pop[b];
    return crowd[a] >= crowd[b] ? pop[a] : pop[b];
  };
  std::bernoulli_distribution do_cross(opt.crossover_rate), do_flip(flip);
  while (!f.exhausted()) {
    crowding();
    std::vector<Plan> children;
    while (children.size() < k && !f.exhausted()) {
      std::vector<uint8_t> c1 = tournament().cut, c2 = tournament().cut;
      if (do_cross(rng)) {  // HUX: swap exactly half of the differing bits
        std::vector<size_t> diff;
        for (size_t g = 0; g < genes; ++g)
          if (c1[g] != c2[g]) diff.push_back(g);
        std::shuffle(diff.begin(), diff.end(), rng);
        for (size_t d = 0; d < diff.size() / 2; ++d) std::swap(c1[diff[d]], c2[diff[d]]);
      }
      for (auto* c : {&c1, &c2}) {
        for (auto& bit : *c)
          if (do_flip(rng)) bit ^= 1;
        if (children.size() < k && !f.exhausted()) children.push_back(f.make(*c));
      }
    }
    for (Plan& c : children) pop.push_back(std::move(c));
    truncate_unique(pop, k);
  }
}

}  // namespace

SearchResult run_search(const Problem& p, SearchKind kind, Explainer* explainer, const SearchOptions& opt) {
  if (opt.budget < 1) throw InputError({}, "--budget", "the plan budget must be at least 1");
  if (opt.population < 1) throw InputError({}, "population", "the population must be at least 1");
  std::mt19937_64 rng(opt.seed);
  PlanFactory f(p, explainer, opt, rng);
  switch (kind) {
    case SearchKind::Random:
      while (!f.exhausted()) f.make(random_genome(p.genes.size(), rng));
      break;
    case SearchKind::Local: local_search(p, f, opt, rng); break;
    case SearchKind::Nsga2: nsga2(p, f, opt, rng); break;
  }
  return f.result();
}

}  // namespace mapfuse::get
