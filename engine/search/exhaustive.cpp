#include "engine/search/exhaustive.hpp"

#include <algorithm>
#include <atomic>
#include <limits>
#include <numeric>
#include <unordered_map>

#include "engine/common/error.hpp"

namespace mapfuse {
namespace {

// The factors one level takes from each rank: temporal, spatial X, spatial Y.
struct LevelChoice {
  std::array<int64_t, kMaxRanks> t{}, x{}, y{};
  TensorMask keep = 0;
};

struct Search {
  const Einsum& e;
  const Core& c;
  const Mapspace& space;
  const ExhaustiveOptions& opt;
  EvalPlan plan;
  int L, R, T;
  std::vector<uint32_t> x_ok, y_ok;  // per level: ranks that may be spread on each axis

  Search(const Einsum& e_, const Core& c_, const Mapspace& s_, const ExhaustiveOptions& o)
      : e(e_), c(c_), space(s_), opt(o), plan(compile_plan(e_, c_)) {
    L = static_cast<int>(c.levels.size());
    R = static_cast<int>(e.ranks.size());
    T = static_cast<int>(e.tensors.size());
    x_ok.assign(L, 0);
    y_ok.assign(L, 0);
    for (int l = 0; l < L; ++l) {
      const Fanout& f = c.levels[l].fanout;
      for (int r = 0; r < R; ++r) {
        if (axis_accepts(f, LoopKind::SpatialX, e, r)) x_ok[l] |= 1u << r;
        if (axis_accepts(f, LoopKind::SpatialY, e, r)) y_ok[l] |= 1u << r;
      }
      if (const LevelConstraints* lc = constraint(l)) {
        if (lc->spatial_x) x_ok[l] &= *lc->spatial_x;
        if (lc->spatial_y) y_ok[l] &= *lc->spatial_y;
      }
    }
    classify();
  }

  // How each rank acts on each tensor's refills (see orders()): 0 = the tensor does not index it,
  // 1 = it moves only dimensions without a sliding window, 2 = it moves a sliding-window
  // dimension (two ranks of size > 1 in one dimension). `plain[t]` = no rank of the tensor is in
  // several dimensions, so the reduction below is exact for it.
  std::vector<std::array<uint8_t, kMaxRanks>> rank_class;
  std::vector<bool> plain;

  void classify() {
    rank_class.assign(T, {});
    plain.assign(T, true);
    for (int t = 0; t < T; ++t) {
      std::array<int, kMaxRanks> dims_of{};
      for (const auto& dim : e.tensors[t].dims) {
        int live = 0;
        for (const auto& term : dim) live += e.ranks[term.rank].size > 1;
        for (const auto& term : dim) {
          ++dims_of[term.rank];
          rank_class[t][term.rank] = std::max<uint8_t>(rank_class[t][term.rank], live > 1 ? 2 : 1);
        }
      }
      for (int r = 0; r < R; ++r) plain[t] = plain[t] && dims_of[r] <= 1;
    }
  }

  // A level's loop order matters to the cost model only through the refills of the tiles of
  // tensors kept below it. For one tensor, walking the level's loops from the inside: a loop
  // over a rank that moves only window-free dimensions ends every reuse (its step can never be
  // undone, and a tile moved by a full extent shares nothing), so the order of the loops outside
  // the innermost such loop is irrelevant; inside it, what matters is the sequence of sliding-
  // window ranks and, between them, the sets of ranks the tensor does not index (only their
  // product counts). Orders with the same signature for every tensor cost the same.
  std::vector<int> order_signature(const std::vector<int>& order, const std::vector<LevelChoice>& chosen, int l) const {
    std::vector<int> sig;
    for (int t = 0; t < T; ++t) {
      bool below = false;
      for (int i = 0; i < l; ++i) below = below || (chosen[i].keep >> t & 1);
      if (!below) continue;
      sig.push_back(-1 - t);
      if (!plain[t]) {  // no reduction for this tensor: the whole order counts
        sig.insert(sig.end(), order.begin(), order.end());
        continue;
      }
      int irrelevant_set = 0;
      for (auto it = order.rbegin(); it != order.rend(); ++it) {
        const int cls = rank_class[t][*it];
        if (cls == 0) {
          irrelevant_set |= 1 << *it;
          continue;
        }
        sig.push_back(1000 + irrelevant_set);
        irrelevant_set = 0;
        if (cls == 1) break;  // nothing outside a window-free step matters
        sig.push_back(*it);
      }
      sig.push_back(1000 + irrelevant_set);
    }
    return sig;
  }

  const LevelConstraints* constraint(int l) const {
    return l < static_cast<int>(space.levels.size()) ? &space.levels[l] : nullptr;
  }

  bool in_order(int l, int r) const {
    const LevelConstraints* lc = constraint(l);
    if (!lc || !lc->order) return true;
    return std::find(lc->order->begin(), lc->order->end(), r) != lc->order->end();
  }

  bool temporal_ok(int l, int r, int64_t f) const {
    if (f > 1 && !in_order(l, r)) return false;
    const LevelConstraints* lc = constraint(l);
    if (!lc) return true;
    if (r < static_cast<int>(lc->min_factor.size()) && lc->min_factor[r] && f < *lc->min_factor[r]) return false;
    if (r < static_cast<int>(lc->max_factor.size()) && lc->max_factor[r] && f > *lc->max_factor[r]) return false;
    return true;
  }

  // All factor choices of level l given what remains of each rank.
  void level_choices(int l, const std::array<int64_t, kMaxRanks>& remaining, std::vector<LevelChoice>& out) const {
    const bool outermost = l == L - 1;
    LevelChoice cur;
    const int64_t fx_max = c.levels[l].fanout.x, fy_max = c.levels[l].fanout.y;
    auto rec = [&](auto&& self, int r, int64_t used_x, int64_t used_y) -> void {
      if (r == R) {
        out.push_back(cur);
        return;
      }
      for (int64_t sx : divisors(remaining[r])) {
        if (sx > 1 && (!(x_ok[l] >> r & 1) || used_x * sx > fx_max)) break;
        for (int64_t sy : divisors(remaining[r] / sx)) {
          if (sy > 1 && (!(y_ok[l] >> r & 1) || used_y * sy > fy_max)) break;
          const int64_t rest = remaining[r] / sx / sy;
          auto take = [&](int64_t t) {
            if (!temporal_ok(l, r, t)) return;
            cur.t[r] = t;
            cur.x[r] = sx;
            cur.y[r] = sy;
            self(self, r + 1, used_x * sx, used_y * sy);
          };
          if (outermost) take(rest);
          else
            for (int64_t t : divisors(rest)) take(t);
        }
      }
    };
    rec(rec, 0, 1, 1);
    // Kept tensors: the outermost level keeps all; others any subset their roles allow.
    const TensorMask all = static_cast<TensorMask>((1u << T) - 1);
    TensorMask allowed = 0;
    for (int t = 0; t < T; ++t)
      if (c.levels[l].may_keep & role_bit(e.tensors[t].role)) allowed |= static_cast<TensorMask>(1u << t);
    std::vector<TensorMask> keeps;
    const LevelConstraints* lc = constraint(l);
    if (outermost) keeps = {all};
    else if (lc && lc->keep) keeps = {static_cast<TensorMask>(*lc->keep)};
    else
      for (unsigned m = 0; m <= all; ++m)
        if ((m & allowed) == m) keeps.push_back(static_cast<TensorMask>(m));
    const size_t n = out.size();
    std::vector<LevelChoice> expanded;
    expanded.reserve(n * keeps.size());
    for (const LevelChoice& ch : out)
      for (TensorMask k : keeps) {
        expanded.push_back(ch);
        expanded.back().keep = k;
      }
    out = std::move(expanded);
  }

  // Words level l holds for the chosen inner levels (its tile spans levels <= l).
  int64_t occupancy(const std::vector<LevelChoice>& chosen, int l) const {
    int64_t ext[kMaxRanks];
    for (int r = 0; r < R; ++r) {
      ext[r] = 1;
      for (int i = 0; i <= l; ++i) ext[r] *= chosen[i].t[r] * chosen[i].x[r] * chosen[i].y[r];
    }
    int64_t words = 0;
    for (int t = 0; t < T; ++t) {
      if (!(chosen[l].keep >> t & 1)) continue;
      int64_t v = 1;
      for (const auto& dim : e.tensors[t].dims) v *= Einsum::dim_extent(dim, ext);
      words += v;
    }
    return words;
  }

  bool fits(const std::vector<LevelChoice>& chosen, int l) const {
    const Level& lv = c.levels[l];
    return lv.entries == 0 || occupancy(chosen, l) * lv.multiple_buffering <= lv.entries;
  }

  struct Local {
    double best_value = std::numeric_limits<double>::infinity();
    std::string best_text;
    std::optional<Mapping> best;
    CostResult best_cost;
    std::vector<ParetoMapping> pareto;
    int64_t evaluated = 0, valid = 0, pruned = 0;
    std::unordered_map<uint64_t, std::vector<std::vector<int>>> orders;  // see orders()
  };

  // Every temporal order of the ranks each level iterates, for one complete choice.
  void orders(const std::vector<LevelChoice>& chosen, Local& local, std::atomic<int64_t>& budget) const {
    std::vector<std::vector<int>> ranks(L);
    for (int l = 0; l < L; ++l) {
      const LevelConstraints* lc = constraint(l);
      if (lc && lc->order) {
        for (int r : *lc->order)
          if (chosen[l].t[r] > 1) ranks[l].push_back(r);
      } else {
        for (int r = 0; r < R; ++r)
          if (chosen[l].t[r] > 1) ranks[l].push_back(r);
      }
    }
    // Per level, one order per class of orders that cost the same (or every order). The classes
    // depend only on the level, the ranks it iterates and which tensors are kept below it, so
    // they are worked out once per such combination.
    std::vector<const std::vector<std::vector<int>>*> choices(L);
    for (int l = 0; l < L; ++l) {
      const LevelConstraints* lc = constraint(l);
      uint32_t iterated = 0;
      for (int r : ranks[l]) iterated |= 1u << r;
      uint32_t below = 0;
      for (int i = 0; i < l; ++i) below |= chosen[i].keep;
      const bool fixed = lc && lc->order;
      const uint64_t key = (uint64_t(l) << 40) | (uint64_t(below) << 32) | (uint64_t(fixed) << 31) | iterated;
      auto [it, fresh] = local.orders.try_emplace(key);
      if (fresh) {
        std::vector<int> order = ranks[l];
        std::vector<std::vector<int>> seen;
        if (fixed) {
          it->second.push_back(order);
        } else {
          do {
            if (opt.reduce_orders) {
              std::vector<int> sig = order_signature(order, chosen, l);
              if (std::find(seen.begin(), seen.end(), sig) != seen.end()) continue;
              seen.push_back(std::move(sig));
            }
            it->second.push_back(order);
          } while (std::next_permutation(order.begin(), order.end()));
        }
      }
      choices[l] = &it->second;
    }
    Mapping m;
    m.levels.resize(L);
    auto rec = [&](auto&& self, int l) -> void {
      if (l < 0) {
        evaluate_one(m, local, budget);
        return;
      }
      for (const std::vector<int>& order : *choices[l]) {
        LevelMapping& lm = m.levels[l];
        lm.loops.clear();
        lm.keep = chosen[l].keep;
        for (int r : order) lm.loops.push_back({r, chosen[l].t[r], LoopKind::Temporal});
        for (int r = 0; r < R; ++r)
          if (chosen[l].x[r] > 1) lm.loops.push_back({r, chosen[l].x[r], LoopKind::SpatialX});
        for (int r = 0; r < R; ++r)
          if (chosen[l].y[r] > 1) lm.loops.push_back({r, chosen[l].y[r], LoopKind::SpatialY});
        self(self, l - 1);
      }
    };
    rec(rec, L - 1);
  }

  void evaluate_one(const Mapping& m, Local& local, std::atomic<int64_t>& budget) const {
    if (opt.max_mappings > 0 && budget.fetch_add(1, std::memory_order_relaxed) >= opt.max_mappings) return;
    ++local.evaluated;
    const CostResult r = evaluate(plan, flatten(m));
    if (!r.valid()) return;
    ++local.valid;
    const double v = objective_value(opt.objective, r);
    if (v < local.best_value || (v == local.best_value && to_text(m, e, c) < local.best_text)) {
      local.best_value = v;
      local.best_text = to_text(m, e, c);
      local.best = m;
      local.best_cost = r;
    }
    // Keep the energy/cycles front as we go (dominated points never return).
    for (const ParetoMapping& p : local.pareto)
      if (p.energy_pj <= r.energy_pj && p.cycles <= r.cycles) return;
    std::erase_if(local.pareto, [&](const ParetoMapping& p) { return r.energy_pj <= p.energy_pj && r.cycles <= p.cycles; });
    local.pareto.push_back({r.energy_pj, r.cycles, m});
  }

  void descend(std::vector<LevelChoice>& chosen, int l, std::array<int64_t, kMaxRanks> remaining, Local& local,
               std::atomic<int64_t>& budget) const {
    if (l == L) {
      orders(chosen, local, budget);
      return;
    }
    std::vector<LevelChoice> choices;
    level_choices(l, remaining, choices);
    for (const LevelChoice& ch : choices) {
      chosen[l] = ch;
      if (opt.prune && !fits(chosen, l)) {
        ++local.pruned;
        continue;
      }
      std::array<int64_t, kMaxRanks> rest = remaining;
      for (int r = 0; r < R; ++r) rest[r] /= ch.t[r] * ch.x[r] * ch.y[r];
      descend(chosen, l + 1, rest, local, budget);
    }
  }
};

}  // namespace

MapperResult exhaustive_search(const Einsum& e, const Core& c, const Mapspace& space,
                               const ExhaustiveOptions& opt) {
  Search s(e, c, space, opt);
  std::array<int64_t, kMaxRanks> remaining{};
  for (int r = 0; r < s.R; ++r) remaining[r] = e.ranks[r].size;
  std::vector<LevelChoice> first;
  s.level_choices(0, remaining, first);
  std::atomic<int64_t> budget{0};
  std::vector<Search::Local> locals(first.size());
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t i = 0; i < static_cast<int64_t>(first.size()); ++i) {
    std::vector<LevelChoice> chosen(s.L);
    chosen[0] = first[i];
    Search::Local& local = locals[i];
    if (opt.prune && !s.fits(chosen, 0)) {
      ++local.pruned;
      continue;
    }
    std::array<int64_t, kMaxRanks> rest = remaining;
    for (int r = 0; r < s.R; ++r) rest[r] /= first[i].t[r] * first[i].x[r] * first[i].y[r];
    if (s.L == 1) s.orders(chosen, local, budget);
    else s.descend(chosen, 1, rest, local, budget);
  }
  if (opt.max_mappings > 0 && budget.load() > opt.max_mappings)
    throw InputError({}, "max_mappings",
                     "the mapspace of '" + e.name + "' has more than " + std::to_string(opt.max_mappings) +
                         " mappings; constrain it (loop orders, factors, bypass) or raise the limit");
  // Merge in a fixed order: the same answer for any number of threads.
  MapperResult out;
  Search::Local best;
  std::vector<ParetoMapping> all;
  for (Search::Local& l : locals) {
    out.evaluated += l.evaluated;
    out.valid += l.valid;
    out.pruned += l.pruned;
    if (l.best && (l.best_value < best.best_value || (l.best_value == best.best_value && l.best_text < best.best_text))) {
      best.best_value = l.best_value;
      best.best_text = l.best_text;
      best.best = l.best;
      best.best_cost = l.best_cost;
    }
    for (ParetoMapping& p : l.pareto) all.push_back(std::move(p));
  }
  out.best = best.best;
  out.cost = best.best_cost;
  std::sort(all.begin(), all.end(), [&](const ParetoMapping& a, const ParetoMapping& b) {
    if (a.energy_pj != b.energy_pj) return a.energy_pj < b.energy_pj;
    if (a.cycles != b.cycles) return a.cycles < b.cycles;
    return to_text(a.mapping, e, c) < to_text(b.mapping, e, c);
  });
  double best_cycles = std::numeric_limits<double>::infinity();
  for (ParetoMapping& p : all)
    if (p.cycles < best_cycles) {
      best_cycles = p.cycles;
      out.pareto.push_back(std::move(p));
    }
  return out;
}

}  // namespace mapfuse
