#include "engine/search/ffm/baselines.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <stdexcept>

#include "engine/common/error.hpp"
#include "engine/cost/fused.hpp"
#include "engine/cost/plan.hpp"
#include "engine/search/ffm/ffm.hpp"
#include "engine/search/random_mapping.hpp"

namespace mapfuse::ffm {

Baseline parse_baseline(std::string_view name) {
  if (name == "random") return Baseline::Random;
  if (name == "sa" || name == "annealing") return Baseline::Annealing;
  if (name == "ga" || name == "genetic") return Baseline::Genetic;
  throw InputError({}, "method", "unknown FFM baseline '" + std::string(name) + "'; expected random, sa or ga" +
                                     did_you_mean(name, {"random", "sa", "ga", "annealing", "genetic"}));
}

std::string_view to_string(Baseline b) {
  switch (b) {
    case Baseline::Random: return "random";
    case Baseline::Annealing: return "sa";
    case Baseline::Genetic: return "ga";
  }
  return "?";
}

namespace {

constexpr double kInvalid = std::numeric_limits<double>::infinity();

// One point of the fused mapspace: a context (fusion decisions, backing level, shared loops) and
// a tile mapping inside it per Einsum.
struct Genome {
  std::vector<int> context;
  std::vector<Mapping> tile;
  std::vector<uint8_t> outside;  // per Einsum: its tile breaks a factor bound of the constraints
  std::vector<FusedEinsumCost> cost;  // per Einsum: its tile under its context, priced once when drawn
  double value = kInvalid;  // objective; infinity when over capacity or not yet evaluated
};

class Space {
 public:
  Space(const Workload& w, const Core& c, const std::vector<ConstraintSpec>& constraints)
      : w_(w), c_(c), E_(static_cast<int>(w.einsums.size())) {
    check_constraints(w, c, constraints);
    contexts_.resize(E_);
    spaces_.resize(E_);
    const int L = static_cast<int>(c.levels.size());
    for (int i = 0; i < E_; ++i) {
      contexts_[i] = make_contexts(w, i, c, {});
      if (constraints.empty()) continue;
      spaces_[i] = make_mapspace(constraints, w.einsums[i], c);
      spaces_[i].levels.resize(L);
      // A keep constraint that leaves out a tensor the context backs at b excludes the context
      // (as it excludes every pmapping of it in FFM).
      std::erase_if(contexts_[i], [&](const PmappingContext& ctx) {
        const int b = ctx.fused.backing_level;
        if (b < 0 || b >= L - 1) return false;
        const auto& keep = spaces_[i].levels[b].keep;
        return keep && (ctx.fused.at_b() & ~*keep) != 0;
      });
    }
    drop_unmatched_contexts(w, contexts_);
    for (int i = 0; i < E_; ++i)
      if (contexts_[i].empty())
        throw InputError({}, "einsum '" + w.einsums[i].name + "'", "has no pmapping context on core '" + c.name + "'");
    plans_.resize(E_);
    for (int i = 0; i < E_; ++i) plans_[i].resize(contexts_[i].size());
    local_.assign(E_, std::vector<int>(w.tensors.size(), -1));
    for (int i = 0; i < E_; ++i)
      for (int t = 0; t < static_cast<int>(w.tensors.size()); ++t) local_[i][t] = w.einsums[i].tensor_index(w.tensors[t].name);
    usage_.resize(E_);
  }

  int einsums() const { return E_; }
  const Workload& workload() const { return w_; }
  const Core& core() const { return c_; }

  // Draws contexts for Einsums from..E-1 consistent with g.context[0..from) under FFM's joining
  // rules (same compatibility for every exchanged tensor on both sides; a fusion group is a run
  // of consecutive Einsums, every tensor exchanged inside it on chip). A context listed in
  // `prefer` is taken when it is consistent (crossover). Tiles are kept where the context did not
  // change and drawn anew elsewhere. Returns false at a dead end.
  bool draw_contexts(Genome& g, int from, std::mt19937_64& rng, const std::vector<int>* prefer = nullptr) const {
    const std::vector<int> old = g.context;
    g.context.resize(E_, -1);
    g.tile.resize(E_);
    g.cost.resize(E_);
    int start = group_start(g, from);
    std::vector<int> ok;
    for (int i = from; i < E_; ++i) {
      ok.clear();
      for (int k = 0; k < static_cast<int>(contexts_[i].size()); ++k)
        if (consistent(g, i, k, start)) ok.push_back(k);
      if (ok.empty()) return false;
      int pick = ok[std::uniform_int_distribution<size_t>(0, ok.size() - 1)(rng)];
      if (prefer && std::find(ok.begin(), ok.end(), (*prefer)[i]) != ok.end()) pick = (*prefer)[i];
      g.context[i] = pick;
      start = next_start(g, i, start);
      if (i >= static_cast<int>(old.size()) || old[i] != pick || g.tile[i].levels.empty()) redraw_tile(g, i, rng);
    }
    return true;
  }

  // A new tile mapping for Einsum i under its context, priced at once with the context's
  // precompiled plan: a genome's evaluation then only sums and checks reservations.
  void redraw_tile(Genome& g, int i, std::mt19937_64& rng) const {
    g.cost.resize(E_);
    g.outside.resize(E_, 0);
    g.tile[i] = draw_tile(i, g.context[i], rng, g.outside[i]);
    const PmappingContext& ctx = contexts_[i][g.context[i]];
    const FusedTilePlan& plan = plan_for(i, g.context[i]);
    const FlatMapping fm = flatten_fused(g.tile[i], ctx.fused, static_cast<int>(c_.levels.size()));
    const NestStructure s = analyze(plan.first, fm);
    int64_t factors[kMaxLoops];
    for (int k = 0; k < fm.n_loops; ++k) factors[k] = fm.loops[k].factor;
    evaluate_fused_einsum(plan, s, factors, ctx.fused, g.cost[i], scratch_);
  }

  // A tile mapping of context k of Einsum i: loops only up to the context's top level, the
  // exchanged tensors kept at the backing level, nothing kept between it and the outermost level.
  // Within the Einsum's constraints: orders, kept tensors and spatial ranks by construction,
  // factor bounds by redrawing (`outside` when 1,000 draws all broke one).
  Mapping draw_tile(int i, int k, std::mt19937_64& rng, uint8_t& outside) const {
    const PmappingContext& ctx = contexts_[i][k];
    const Einsum tile = tile_einsum(w_.einsums[i], ctx.shared);
    const int L = static_cast<int>(c_.levels.size()), T = static_cast<int>(tile.tensors.size());
    const TensorMask all = static_cast<TensorMask>((1u << T) - 1);
    Mapspace ms = spaces_[i];
    ms.levels.resize(L);
    for (int l = ctx.top_level + 1; l < L; ++l) {
      ms.levels[l].order = std::vector<int>{};
      ms.levels[l].spatial_x = ms.levels[l].spatial_y = 0;
      ms.levels[l].keep = l == L - 1 ? all : TensorMask{0};
    }
    const int b = ctx.fused.backing_level;
    if (b >= 0 && b < L - 1 && !ms.levels[b].keep) {  // a keep constraint there includes the backed tensors
      TensorMask keep = ctx.fused.at_b();
      for (int t = 0; t < T; ++t)
        if ((core_for(c_, tile).levels[b].may_keep & role_bit(tile.tensors[t].role)) && (rng() & 1)) keep |= static_cast<TensorMask>(1u << t);
      ms.levels[b].keep = keep;
    }
    RandomMappingOptions opt;
    opt.space = &ms;
    Mapping m = random_mapping(tile, c_, rng, opt);
    for (int tries = 1; tries < 1000 && !satisfies(m, ms); ++tries) m = random_mapping(tile, c_, rng, opt);
    outside = !satisfies(m, ms);
    return m;
  }

  // The genome's objective from its per-Einsum costs (infinity when invalid): the same sums and
  // the same reservation check per branch as evaluate_fused, without rebuilding the LoopTree.
  double evaluate(Genome& g, Objective o) const {
    g.value = kInvalid;
    double energy = 0, cycles = 0;
    for (int i = 0; i < E_; ++i) {
      if (!g.cost[i].tile.valid() || g.outside[i]) return kInvalid;
      energy += g.cost[i].energy_pj;
      cycles += g.cost[i].cycles;
    }
    const int L = static_cast<int>(c_.levels.size());
    for (int first = 0; first < E_;) {
      int last = first;  // the group: first..last, each later member joins by an on-chip tensor
      while (last + 1 < E_ && joins(g, last + 1)) ++last;
      int64_t resident = 0;  // held at b above the group's loops, during every branch
      for (int i = first; i <= last; ++i) resident += g.cost[i].resident;
      for (int i = first; i <= last; ++i) {
        usage_[i] = g.cost[i].own;
        const int b = contexts_[i][g.context[i]].fused.backing_level;
        if (b >= 0) usage_[i][b] += resident;
      }
      // Each tensor exchanged inside the group is live at b from its producer to its last consumer.
      for (int p = first; p <= last; ++p)
        for (const TensorCompat& tc : contexts_[p][g.context[p]].compat) {
          if (!tc.fused() || w_.tensors[tc.tensor].producer != p) continue;
          int until = p;
          for (int k : w_.tensors[tc.tensor].consumers) until = std::max(until, k);
          const int64_t tile = g.cost[p].exchanged_tile[local_[p][tc.tensor]];
          for (int i = p; i <= until && i <= last; ++i) usage_[i][tc.level] += tile;
        }
      for (int i = first; i <= last; ++i)
        for (int l = 0; l < L; ++l) {
          const Level& lv = c_.levels[l];
          if (lv.entries > 0 && usage_[i][l] * lv.multiple_buffering > lv.entries) return kInvalid;
        }
      first = last + 1;
    }
    g.value = objective_value(o, energy, cycles);
    return g.value;
  }

  LoopTree tree(const Genome& g) const {
    std::vector<EinsumPmappings> pm(E_);
    std::vector<Choice> choices(E_, Choice{0, 0});
    for (int i = 0; i < E_; ++i) {
      pm[i].einsum = i;
      pm[i].contexts = {contexts_[i][g.context[i]]};
      Pmapping p;
      p.mapping = g.tile[i];
      pm[i].pmappings = {{std::move(p)}};
    }
    return build_looptree(w_, c_, pm, choices);
  }

  // The genome's LoopTree priced end to end by evaluate_fused, FFM's own pricing.
  static double objective(const FusedCost& fc, Objective o) {
    if (!fc.valid) return kInvalid;
    return objective_value(o, fc.energy_pj, fc.cycles);
  }

 private:
  bool joins(const Genome& g, int i) const {
    for (const TensorCompat& tc : contexts_[i][g.context[i]].compat)
      if (tc.fused() && w_.tensors[tc.tensor].producer != i) return true;
    return false;
  }

  const FusedTilePlan& plan_for(int i, int k) const {
    if (!plans_[i][k])
      plans_[i][k] = std::make_unique<FusedTilePlan>(
          fused_tile_plan(tile_einsum(w_.einsums[i], contexts_[i][k].shared), c_, contexts_[i][k].fused));
    return *plans_[i][k];
  }

  const TensorCompat* chosen(const Genome& g, int tensor) const {
    const int p = w_.tensors[tensor].producer;
    return p >= 0 && g.context[p] >= 0 ? contexts_[p][g.context[p]].find(tensor) : nullptr;
  }

  // The first Einsum of the fusion group still open after Einsums 0..from-1, or -1.
  int group_start(const Genome& g, int from) const {
    int start = -1;
    for (int i = 0; i < from; ++i) start = next_start(g, i, start);
    return start;
  }

  int next_start(const Genome& g, int i, int start) const {
    bool joins = false, fused_after = false;
    for (const TensorCompat& tc : contexts_[i][g.context[i]].compat)
      if (w_.tensors[tc.tensor].producer != i) joins |= tc.fused();
    for (int t = 0; t < static_cast<int>(w_.tensors.size()); ++t) {
      const TensorInfo& ti = w_.tensors[t];
      if (ti.producer < 0 || ti.producer > i) continue;
      const TensorCompat* tc = chosen(g, t);
      if (tc && tc->fused() && std::any_of(ti.consumers.begin(), ti.consumers.end(), [&](int c) { return c > i; }))
        fused_after = true;
    }
    return !fused_after ? -1 : joins ? start : i;
  }

  bool consistent(const Genome& g, int i, int k, int start) const {
    const PmappingContext& ctx = contexts_[i][k];
    bool joins = false;
    for (const TensorCompat& tc : ctx.compat) {
      if (w_.tensors[tc.tensor].producer == i) continue;
      const TensorCompat* other = chosen(g, tc.tensor);
      if (!other || !(*other == tc)) return false;
      joins |= tc.fused();
    }
    bool fused_open = false;
    for (int t = 0; t < static_cast<int>(w_.tensors.size()); ++t) {
      const TensorInfo& ti = w_.tensors[t];
      if (ti.producer < 0 || ti.producer >= i) continue;
      const TensorCompat* tc = chosen(g, t);
      if (tc && tc->fused() && std::any_of(ti.consumers.begin(), ti.consumers.end(), [&](int c) { return c >= i; }))
        fused_open = true;
    }
    if (fused_open && !joins) return false;
    if (joins)
      for (const TensorCompat& tc : ctx.compat) {
        const int p = w_.tensors[tc.tensor].producer;
        if (p != i && p >= start && !tc.fused()) return false;
      }
    return true;
  }

  const Workload& w_;
  const Core& c_;
  int E_;
  std::vector<std::vector<PmappingContext>> contexts_;
  std::vector<Mapspace> spaces_;  // per Einsum: its constraints (empty: none)
  std::vector<std::vector<int>> local_;  // [Einsum][workload tensor] -> the Einsum's tensor index, -1
  // Caches and scratch of the single-threaded search (mutable: filled on first use).
  mutable std::vector<std::vector<std::unique_ptr<FusedTilePlan>>> plans_;  // per context
  mutable CostResult scratch_;
  mutable std::vector<std::array<int64_t, kMaxLevels>> usage_;
};

class Run {
 public:
  Run(const Space& s, const BaselineOptions& o) : S(s), o(o), rng(o.seed), t0(std::chrono::steady_clock::now()) {}

  double elapsed() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); }
  bool done() {
    if (o.max_evaluations > 0 && res.evaluations >= o.max_evaluations) return res.stopped_by = "evaluations", true;
    if (elapsed() >= o.time_budget_s) return res.stopped_by = "time", true;
    return false;
  }
  // Progress through the budget in [0, 1] (the evaluation budget when there is one, so that the
  // run is deterministic).
  double progress() const {
    if (o.max_evaluations > 0) return std::min(1.0, static_cast<double>(res.evaluations) / static_cast<double>(o.max_evaluations));
    return std::min(1.0, elapsed() / o.time_budget_s);
  }

  // A fresh random genome (redrawn at dead ends); evaluated.
  Genome fresh() {
    Genome g;
    while (!S.draw_contexts(g, 0, rng)) g = Genome{};
    score(g);
    return g;
  }

  double score(Genome& g) {
    ++res.evaluations;
    const double v = S.evaluate(g, o.objective);
    if (o.verify && std::none_of(g.outside.begin(), g.outside.end(), [](uint8_t x) { return x != 0; })) {
      const double slow = Space::objective(evaluate_fused(S.tree(g), S.workload(), S.core()), o.objective);
      if (!(slow == v)) throw std::logic_error("ffm baselines: incremental pricing differs from evaluate_fused");
    }
    if (v < kInvalid) {
      ++res.valid;
      if (!res.found || v < res.objective) {
        res.found = true;
        res.objective = v;
        best = g;
        res.trace.push_back({elapsed(), res.evaluations, v});
      }
    }
    return v;
  }

  // A neighbour: new fusion decisions from one Einsum on, or a new tile mapping for one Einsum.
  Genome neighbour(const Genome& g) {
    Genome n = g;
    const int i = std::uniform_int_distribution<int>(0, S.einsums() - 1)(rng);
    if (std::uniform_real_distribution<double>(0, 1)(rng) < o.context_move) {
      Genome trial = n;
      if (S.draw_contexts(trial, i, rng)) n = std::move(trial);
    } else {
      S.redraw_tile(n, i, rng);
    }
    n.value = kInvalid;
    return n;
  }

  const Space& S;
  const BaselineOptions& o;
  std::mt19937_64 rng;
  std::chrono::steady_clock::time_point t0;
  BaselineResult res;
  Genome best;
};

void run_random(Run& r) {
  while (!r.done()) r.fresh();
}

void run_annealing(Run& r) {
  std::uniform_real_distribution<double> u(0, 1);
  Genome cur = r.fresh();
  while (!r.done()) {
    // Start from a valid point: redraw until one fits.
    if (cur.value == kInvalid) {
      cur = r.fresh();
      continue;
    }
    Genome n = r.neighbour(cur);
    const double v = r.score(n);
    if (v == kInvalid) continue;
    const double temp = r.o.t_start * std::pow(r.o.t_end / r.o.t_start, r.progress());
    const double delta = std::log(v) - std::log(cur.value);
    if (delta <= 0 || u(r.rng) < std::exp(-delta / temp)) cur = std::move(n);
  }
}

void run_genetic(Run& r) {
  std::uniform_real_distribution<double> u(0, 1);
  const int N = std::max(2, r.o.population);
  std::vector<Genome> pop;
  while (static_cast<int>(pop.size()) < N && !r.done()) pop.push_back(r.fresh());
  auto tournament = [&]() -> const Genome& {
    const Genome& a = pop[std::uniform_int_distribution<size_t>(0, pop.size() - 1)(r.rng)];
    const Genome& b = pop[std::uniform_int_distribution<size_t>(0, pop.size() - 1)(r.rng)];
    return a.value <= b.value ? a : b;
  };
  while (!r.done()) {
    std::vector<Genome> next;
    next.push_back(*std::min_element(pop.begin(), pop.end(),
                                     [](const Genome& a, const Genome& b) { return a.value < b.value; }));  // elitism
    while (static_cast<int>(next.size()) < N && !r.done()) {
      Genome child = tournament();
      if (r.S.einsums() > 1 && u(r.rng) < r.o.crossover) {
        // One-point crossover between Einsums: the second parent's genes from the cut on,
        // redrawn where its contexts do not fit the first parent's prefix.
        const Genome& other = tournament();
        const int cut = std::uniform_int_distribution<int>(1, r.S.einsums() - 1)(r.rng);
        Genome trial = child;
        for (int i = cut; i < r.S.einsums(); ++i) {
          trial.context[i] = other.context[i];
          trial.tile[i] = other.tile[i];
          trial.cost[i] = other.cost[i];
        }
        if (r.S.draw_contexts(trial, cut, r.rng, &other.context)) child = std::move(trial);
      }
      if (u(r.rng) < r.o.mutation) child = r.neighbour(child);
      r.score(child);
      next.push_back(std::move(child));
    }
    pop = std::move(next);
  }
}

}  // namespace

BaselineResult run_baseline(const Workload& w, const Core& c, Baseline b, const BaselineOptions& o) {
  if (!(o.time_budget_s > 0) || !std::isfinite(o.time_budget_s))
    throw InputError({}, "time_budget_s", "the time budget must be a positive number of seconds");
  if (o.max_evaluations < 0) throw InputError({}, "max_evaluations", "the evaluation budget must be >= 0 (0 = none)");
  if (o.population < 2) throw InputError({}, "population", "the population must hold at least 2 individuals");
  const Space space(w, c, o.constraints);
  Run run(space, o);
  switch (b) {
    case Baseline::Random: run_random(run); break;
    case Baseline::Annealing: run_annealing(run); break;
    case Baseline::Genetic: run_genetic(run); break;
    default: throw InputError({}, "method", "unknown FFM baseline");
  }
  BaselineResult res = std::move(run.res);
  res.seconds = run.elapsed();
  if (res.found) {
    res.tree = space.tree(run.best);
    const FusedCost fc = evaluate_fused(res.tree, w, c);
    res.energy_pj = fc.energy_pj;
    res.cycles = fc.cycles;
    res.objective = Space::objective(fc, o.objective);
  }
  return res;
}

}  // namespace mapfuse::ffm
