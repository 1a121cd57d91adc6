#include "engine/search/exhaustive.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <numeric>
#include <unordered_map>

#include "engine/common/error.hpp"
#include "engine/search/tile_search/tile_search.hpp"

#include <omp.h>

namespace mapfuse {
namespace {

// Best and energy/cycles front of one thread. Ties (equal objective, or equal energy and cycles)
// go to the smaller mapping text, so the answer does not depend on the order of evaluation.
struct ExhaustiveSink final : TileSink {
  const Einsum& e;
  const Core& c;
  Objective objective;
  double best_value = std::numeric_limits<double>::infinity();
  std::string best_text;
  std::optional<Mapping> best;
  std::vector<ParetoMapping> pareto;  // by energy ascending, cycles descending
  std::vector<std::string> pareto_text;
  int64_t valid = 0;

  bool front = true;
  double max_cycles = std::numeric_limits<double>::infinity();
  bool energy_tiebreak = false;
  double best_energy = std::numeric_limits<double>::infinity();  // of best (energy_tiebreak)
  // Branch and bound: the best objective value any thread has found (so far).
  std::atomic<double>* incumbent = nullptr;
  double upper_bound = std::numeric_limits<double>::infinity();  // ExhaustiveOptions::upper_bound
  double upper_bound_energy = std::numeric_limits<double>::infinity();  // ... and upper_bound_energy
  double widen = 1;  // 1 + ExhaustiveOptions::gap

  ExhaustiveSink(const Einsum& e_, const Core& c_, Objective o, bool f, std::atomic<double>* inc)
      : e(e_), c(c_), objective(o), front(f), incumbent(inc) {}

  // Strictly worse than a mapping already found: an optimum (or a tie) is never cut. With a gap
  // (widen > 1), no better than the best found by more than the gap: the answer is within it.
  // With the energy tie-break, a bound that can only tie this thread's best on the objective is
  // beaten by more energy (the thread's own pair: the shared incumbent holds no energy).
  bool beaten(double energy_pj, double cycles, int level, int64_t) override {
    if (level >= 0) return false;
    if (front) return cycles > max_cycles || front_dominates(energy_pj, cycles);
    const double v = objective_value(objective, energy_pj, cycles);
    if (energy_tiebreak) {
      const double e = energy_pj * widen;
      return cycles > max_cycles || v > incumbent->load(std::memory_order_relaxed) ||
             (v >= best_value && e > best_energy) || (v >= upper_bound && e > upper_bound_energy);
    }
    return cycles > max_cycles || v * widen > incumbent->load(std::memory_order_relaxed);
  }

  bool has_incumbent() const override {
    if (front) return !pareto.empty();
    return incumbent->load(std::memory_order_relaxed) < std::numeric_limits<double>::infinity();
  }
  // A point of the thread's front no worse in energy and cycles and better in one: it strictly
  // dominates every mapping costing at least (energy_pj, cycles), so none of them is on the front
  // and none is the best of an objective monotone in both (ties are never cut).
  bool front_dominates(double energy_pj, double cycles) const {
    // By energy ascending, cycles descending: the last point with energy <= energy_pj has the
    // fewest cycles among those.
    auto pos = std::upper_bound(pareto.begin(), pareto.end(), energy_pj,
                                [](double en, const ParetoMapping& p) { return en < p.energy_pj; });
    if (pos == pareto.begin()) return false;
    const ParetoMapping& q = *(pos - 1);
    return q.cycles <= cycles && (q.cycles < cycles || q.energy_pj < energy_pj);
  }
  double priority(double energy_pj, double cycles) const override {
    return objective_value(objective, energy_pj, cycles);
  }

  // Whether (v, energy, text) is better than the thread's best.
  bool better(double v, double energy, const std::string& text) const {
    if (v != best_value) return v < best_value;
    if (energy_tiebreak && energy != best_energy) return energy < best_energy;
    return text < best_text;
  }

  void consume(const TileCandidate& cand, const CompactCost& r) override {
    if (!r.valid() || r.cycles > max_cycles) return;
    ++valid;
    const double v = objective_value(objective, r);
    // Only mappings within the caller's known bound count.
    if (v > upper_bound || (energy_tiebreak && v == upper_bound && r.energy_pj > upper_bound_energy)) return;
    std::optional<Mapping> m;
    std::string text;
    // With mirror symmetry only one of a mapping and its mirror is searched: both are candidates
    // for the tie-break by text.
    auto materialise = [&] {
      if (m) return;
      m = cand.build(), text = to_text(*m, e, c);
      if (cand.search->symmetric()) {
        Mapping mm = cand.search->mirrored(*m);
        std::string mt = to_text(mm, e, c);
        if (mt < text) m = std::move(mm), text = std::move(mt);
      }
    };
    if (v <= best_value) {
      // better(), with the text made only when the objective and the energy tie-break tie.
      bool wins;
      if (v != best_value) wins = true;
      else if (energy_tiebreak && r.energy_pj != best_energy) wins = r.energy_pj < best_energy;
      else wins = (materialise(), text < best_text);
      if (wins) {
        materialise();
        best_value = v;
        best_energy = r.energy_pj;
        best_text = text;
        best = m;
        double cur = incumbent->load(std::memory_order_relaxed);
        while (v < cur && !incumbent->compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
        }
      }
    }
    if (!front) return;
    // The front is sorted by energy ascending, so cycles descend; the last point with energy
    // <= r's has the fewest cycles among them and decides whether r is dominated.
    auto& P = pareto;
    auto pos = std::upper_bound(P.begin(), P.end(), r.energy_pj,
                                [](double en, const ParetoMapping& p) { return en < p.energy_pj; });
    if (pos != P.begin()) {
      const ParetoMapping& q = *(pos - 1);
      if (q.cycles <= r.cycles) {
        if (q.cycles < r.cycles || q.energy_pj < r.energy_pj) return;  // dominated
        materialise();                                                  // equal: smaller text wins
        const size_t i = static_cast<size_t>(pos - 1 - P.begin());
        if (text < pareto_text[i]) P[i].mapping = *m, pareto_text[i] = text;
        return;
      }
    }
    materialise();
    // r dominates the points from pos on whose cycles are >= r's (a contiguous run).
    auto last = pos;
    while (last != P.end() && last->cycles >= r.cycles) ++last;
    const size_t i = static_cast<size_t>(pos - P.begin()), j = static_cast<size_t>(last - P.begin());
    P.erase(pos, last);
    pareto_text.erase(pareto_text.begin() + i, pareto_text.begin() + j);
    P.insert(P.begin() + i, ParetoMapping{r.energy_pj, r.cycles, *m});
    pareto_text.insert(pareto_text.begin() + i, text);
  }
};

}  // namespace

MapperResult exhaustive_search(const Einsum& e, const Core& c, const Mapspace& space,
                               const ExhaustiveOptions& opt) {
  TileSearchSpec spec;
  spec.prune = opt.prune;
  spec.reduce_orders = opt.reduce_orders;
  spec.max_evaluations = opt.max_mappings;
  spec.max_work = opt.max_work;
  // The scalar bounds hold with on-chip backing too: they count compute steps and what the
  // innermost keeping level serves compute, which backing does not change (a backing level has
  // no fills, and a level counted as a possible keeper that is not one only lowers the bound).
  // With a front, a choice is cut once the thread's front strictly dominates its bounds.
  spec.bound_scalar = opt.bound;
  spec.onchip_backing = opt.onchip_backing;
  spec.merge_passthrough = opt.merge_passthrough;
  spec.best_first = opt.best_first;
  spec.break_symmetry = opt.symmetry && !opt.onchip_backing;
  std::atomic<double> incumbent{opt.front ? std::numeric_limits<double>::infinity() : opt.upper_bound};
  TileSearch s(e, c, space, spec);
  if (!(opt.gap >= 0) || !std::isfinite(opt.gap))
    throw InputError({}, "gap", fmt::format("the optimality gap must be a finite fraction >= 0, not {}", opt.gap));
  if (opt.gap > 0 && opt.front)
    throw InputError({}, "gap", "an optimality gap applies to branch and bound (one objective), not to a Pareto front");
  if (opt.max_work < 0)
    throw InputError({}, "max_work", fmt::format("the work limit must be >= 0 (0 = none), not {}", opt.max_work));
  if (opt.max_work > 0 && opt.front)
    throw InputError({}, "max_work", "a work limit applies to branch and bound (one objective), not to a Pareto front");
  // A gap or a work limit makes the answer depend on the order mappings are found in: one thread
  // keeps it fixed.
  const int threads = opt.gap > 0 || opt.max_work > 0 ? 1 : omp_get_max_threads();
  std::vector<ExhaustiveSink> sinks;
  sinks.reserve(static_cast<size_t>(threads));
  for (int i = 0; i < threads; ++i) {
    sinks.emplace_back(e, c, opt.objective, opt.front, &incumbent);
    sinks.back().max_cycles = opt.max_cycles;
    sinks.back().energy_tiebreak = opt.energy_tiebreak;
    sinks.back().widen = 1 + opt.gap;
    if (!opt.front) sinks.back().upper_bound = opt.upper_bound, sinks.back().upper_bound_energy = opt.upper_bound_energy;
  }
  MapperResult out;
  // Branch and bound takes the roots best first as it does every level's choices (a depthwise
  // layer on Eyeriss in enumeration order: 40 M mappings evaluated before the optimum's root
  // came), then probes them (TileWorker::probe) for a good incumbent. The answer does not depend
  // on the order.
  std::vector<size_t> order(s.roots());
  std::iota(order.begin(), order.end(), size_t{0});
  if (spec.bound_scalar && spec.best_first) order = s.roots_best_first(sinks[0]);
  std::atomic<int64_t> probe_work{0};
  // Each thread parks choices from the subtrees it takes in its own buckets; which choices share
  // a SIMD call then depends on the schedule, but the answer does not (ties are broken by text).
  int64_t evaluated = 0, pruned = 0, lane_calls = 0, stale = 0, probed = 0, order_cut = 0;
  out.bound_pruned.assign(static_cast<size_t>(s.levels()), 0);
#pragma omp parallel num_threads(threads) reduction(+ : evaluated, pruned, lane_calls, stale, probed, order_cut)
  {
    ExhaustiveSink& sink = sinks[static_cast<size_t>(omp_get_thread_num())];
    TileWorker worker;
    if (spec.bound_scalar && spec.best_first) {
#pragma omp for schedule(dynamic, 1)
      for (int64_t i = 0; i < static_cast<int64_t>(s.roots()); ++i)
        if (probe_work.load(std::memory_order_relaxed) < TileSearch::kProbeBudget)
          probe_work += worker.probe(s, order[static_cast<size_t>(i)], sink);
      probed += worker.evaluated;
      evaluated -= worker.evaluated;
    }
#pragma omp for schedule(dynamic, 1) nowait
    for (int64_t i = 0; i < static_cast<int64_t>(s.roots()); ++i) worker.run(s, order[static_cast<size_t>(i)], sink);
    worker.finish();
    evaluated += worker.evaluated;
    pruned += worker.pruned;
    lane_calls += worker.lane_calls;
    stale += worker.stale_dropped;
    order_cut += worker.order_pruned;
#pragma omp critical
    for (size_t l = 0; l < out.bound_pruned.size(); ++l) out.bound_pruned[l] += worker.bound_pruned[l];
  }
  out.evaluated = evaluated;
  out.probe_evaluated = probed;
  out.mapspace_at_least = s.temporal_mapspace_size();
  out.pruned = pruned;
  out.lane_calls = lane_calls;
  out.stale_dropped = stale;
  out.order_pruned = order_cut;
  out.truncated = s.truncated();
  out.work = s.work();
  if (s.over() && !s.truncated()) {
    const int l = s.most_orders_level();
    throw InputError({}, "max_mappings",
                     fmt::format("the mapspace of '{}' is too large: {} mappings evaluated without finishing (the limit), "
                                 "out of at least {:.3g} (tile shapes over the temporal loops times kept sets, before "
                                 "spatial factors and loop orders); constrain it, e.g. a temporal_order for level '{}' "
                                 "(it may iterate the most ranks), max_factors or keep (a constraints TOML, docs/mapper.md), "
                                 "or raise --max-mappings",
                                 e.name, opt.max_mappings, s.temporal_mapspace_size(), c.levels[static_cast<size_t>(l)].name));
  }
  const ExhaustiveSink* best = nullptr;
  std::vector<std::pair<std::string, ParetoMapping>> all;
  for (ExhaustiveSink& l : sinks) {
    out.valid += l.valid;
    if (l.best && (!best || best->better(l.best_value, l.best_energy, l.best_text))) best = &l;
    for (size_t i = 0; i < l.pareto.size(); ++i) all.emplace_back(std::move(l.pareto_text[i]), std::move(l.pareto[i]));
  }
  if (best) out.best = best->best;
  if (out.best) {  // the full breakdown
    FlatMapping f = flatten(*out.best);
    f.keep[f.n_levels - 1] = static_cast<TensorMask>(f.keep[f.n_levels - 1] & ~opt.onchip_backing);
    f.onchip_backing = opt.onchip_backing;
    out.cost = evaluate(s.plan(), f);
  }
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
    if (a.second.energy_pj != b.second.energy_pj) return a.second.energy_pj < b.second.energy_pj;
    if (a.second.cycles != b.second.cycles) return a.second.cycles < b.second.cycles;
    return a.first < b.first;
  });
  double best_cycles = std::numeric_limits<double>::infinity();
  for (auto& [text, p] : all)
    if (p.cycles < best_cycles) {
      best_cycles = p.cycles;
      out.pareto.push_back(std::move(p));
    }
  return out;
}

}  // namespace mapfuse
