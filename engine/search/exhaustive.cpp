#include "engine/search/exhaustive.hpp"

#include <algorithm>
#include <atomic>
#include <limits>
#include <numeric>
#include <unordered_map>

#include "engine/common/error.hpp"
#include "engine/cost/lanes.hpp"

#include <omp.h>

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
    prepare_bounds();
    prepare();
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
  std::vector<int> order_signature(const std::vector<int>& order, uint32_t below, int l) const {
    (void)l;
    std::vector<int> sig;
    for (int t = 0; t < T; ++t) {
      if (!(below >> t & 1)) continue;
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

  // Temporal factor bounds per (level, rank), from the constraints: a rank a fixed order does not
  // list may only take 1.
  std::array<std::array<int64_t, kMaxRanks>, kMaxLevels> t_min{}, t_max{};

  void prepare_bounds() {
    for (int l = 0; l < L; ++l)
      for (int r = 0; r < R; ++r) {
        int64_t lo = 1, hi = e.ranks[r].size;
        if (const LevelConstraints* lc = constraint(l)) {
          if (lc->order && std::find(lc->order->begin(), lc->order->end(), r) == lc->order->end()) hi = 1;
          if (r < static_cast<int>(lc->min_factor.size()) && lc->min_factor[r]) lo = std::max(lo, *lc->min_factor[r]);
          if (r < static_cast<int>(lc->max_factor.size()) && lc->max_factor[r]) hi = std::min(hi, *lc->max_factor[r]);
        }
        t_min[l][r] = lo;
        t_max[l][r] = hi;
      }
  }

  bool temporal_ok(int l, int r, int64_t f) const { return f >= t_min[l][r] && f <= t_max[l][r]; }

  // Divisors of every divisor of every rank size, worked out once (the enumeration asks for them
  // at every node).
  std::unordered_map<int64_t, std::vector<int64_t>> divisor_table;
  const std::vector<int64_t>& divs(int64_t n) const { return divisor_table.at(n); }

  // Kept-tensor choices per level: the outermost keeps all; others any subset their roles (or a
  // constraint) allow.
  std::vector<std::vector<TensorMask>> keep_options;

  void prepare() {
    for (int r = 0; r < R; ++r)
      for (int64_t d : divisors(e.ranks[r].size))
        if (!divisor_table.count(d)) divisor_table.emplace(d, divisors(d));
    keep_options.assign(L, {});
    const TensorMask all = static_cast<TensorMask>((1u << T) - 1);
    for (int l = 0; l < L; ++l) {
      TensorMask allowed = 0;
      for (int t = 0; t < T; ++t)
        if (c.levels[l].may_keep & role_bit(e.tensors[t].role)) allowed |= static_cast<TensorMask>(1u << t);
      const LevelConstraints* lc = constraint(l);
      if (l == L - 1) keep_options[l] = {all};
      else if (lc && lc->keep) keep_options[l] = {static_cast<TensorMask>(*lc->keep)};
      else
        for (unsigned m = 0; m <= all; ++m)
          if ((m & allowed) == m) keep_options[l].push_back(static_cast<TensorMask>(m));
    }
  }

  // All factor choices of level l given what remains of each rank (keep is set by the caller).
  void level_choices(int l, const std::array<int64_t, kMaxRanks>& remaining, std::vector<LevelChoice>& out) const {
    out.clear();
    const bool outermost = l == L - 1;
    LevelChoice cur;
    const int64_t fx_max = c.levels[l].fanout.x, fy_max = c.levels[l].fanout.y;
    auto rec = [&](auto&& self, int r, int64_t used_x, int64_t used_y) -> void {
      if (r == R) {
        out.push_back(cur);
        return;
      }
      for (int64_t sx : divs(remaining[r])) {
        if (sx > 1 && (!(x_ok[l] >> r & 1) || used_x * sx > fx_max)) break;
        for (int64_t sy : divs(remaining[r] / sx)) {
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
            for (int64_t t : divs(rest)) {
              if (t > t_max[l][r]) break;  // divisors ascend
              take(t);
            }
        }
      }
    };
    rec(rec, 0, 1, 1);
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

  // ---- Evaluation, grouped by loop structure --------------------------------------------
  //
  // A complete factor choice fixes, per level, the ranks it iterates (temporal factor > 1), the
  // ranks it spreads on X and Y, and the kept tensors: its support. The loop orders to try, and so
  // the NestStructures, depend only on the support. Choices are therefore parked in a bucket per
  // support and evaluated kLanes at a time through the SIMD lane evaluator, once per order
  // combination, which shares the structure analysis across the bucket.

  // Support of a complete choice: per level, temporal | x << 8 | y << 16 | keep << 24.
  struct Support {
    std::array<uint32_t, kMaxLevels> w{};
    bool operator==(const Support&) const = default;
  };
  struct SupportHash {
    size_t operator()(const Support& k) const {
      uint64_t h = 0x9E3779B97F4A7C15ull;
      for (uint32_t v : k.w) h = (h ^ v) * 0x100000001B3ull, h ^= h >> 29;
      return static_cast<size_t>(h);
    }
  };
  // Factors of one choice: index (level * 3 + kind) * kMaxRanks + rank.
  using ChoiceFactors = std::array<int32_t, kMaxLevels * 3 * kMaxRanks>;
  static int slot(int l, LoopKind k, int r) { return (l * 3 + static_cast<int>(k)) * kMaxRanks + r; }
  struct Bucket {
    Bucket() {}  // user-provided: the 12 KB of lanes are not zeroed on every new bucket
    int count = 0;
    std::array<ChoiceFactors, kLanes> lanes;
  };
  static constexpr size_t kMaxLiveBuckets = 512;  // bounds memory; partial buckets are flushed

  struct Local {
    double best_value = std::numeric_limits<double>::infinity();
    std::string best_text;
    std::optional<Mapping> best;
    CompactCost best_cost;
    std::vector<ParetoMapping> pareto;  // by energy ascending, cycles descending
    std::vector<std::string> pareto_text;
    int64_t evaluated = 0, valid = 0, pruned = 0, lane_calls = 0;
    std::unordered_map<uint64_t, std::vector<std::vector<int>>> orders;  // see order_classes()
    std::unordered_map<Support, uint32_t, SupportHash> bucket_of;
    std::vector<Bucket> buckets;
    std::vector<Support> bucket_support;
    std::vector<std::vector<LevelChoice>> scratch{kMaxLevels};  // level_choices() output per depth
    Local() { buckets.reserve(kMaxLiveBuckets); }
  };

  // One order per class of temporal orders of `ranks` at level l that cost the same (or every
  // order), given the tensors kept below l. Worked out once per (level, ranks, below).
  const std::vector<std::vector<int>>& order_classes(int l, const std::vector<int>& ranks, uint32_t below,
                                                     Local& local) const {
    const LevelConstraints* lc = constraint(l);
    uint32_t iterated = 0;
    for (int r : ranks) iterated |= 1u << r;
    const bool fixed = lc && lc->order;
    const uint64_t key = (uint64_t(l) << 40) | (uint64_t(below) << 32) | (uint64_t(fixed) << 31) | iterated;
    auto [it, fresh] = local.orders.try_emplace(key);
    if (fresh) {
      std::vector<int> order = ranks;
      std::vector<std::vector<int>> seen;
      if (fixed) {
        it->second.push_back(order);
      } else {
        do {
          if (opt.reduce_orders) {
            std::vector<int> sig = order_signature(order, below, l);
            if (std::find(seen.begin(), seen.end(), sig) != seen.end()) continue;
            seen.push_back(std::move(sig));
          }
          it->second.push_back(order);
        } while (std::next_permutation(order.begin(), order.end()));
      }
    }
    return it->second;
  }

  // Parks a complete choice in the bucket of its support; a full bucket is evaluated.
  void park(const std::vector<LevelChoice>& chosen, Local& local, std::atomic<int64_t>& budget,
            std::atomic<bool>& over) const {
    Support key;
    for (int l = 0; l < L; ++l) {
      uint32_t t = 0, x = 0, y = 0;
      const LevelChoice& ch = chosen[l];
      for (int r = 0; r < R; ++r) {
        t |= uint32_t(ch.t[r] > 1) << r;
        x |= uint32_t(ch.x[r] > 1) << r;
        y |= uint32_t(ch.y[r] > 1) << r;
      }
      key.w[l] = t | x << 8 | y << 16 | uint32_t(ch.keep) << 24;
    }
    auto it = local.bucket_of.find(key);
    if (it == local.bucket_of.end()) {
      if (local.buckets.size() == kMaxLiveBuckets) flush_all(local, budget, over);
      it = local.bucket_of.emplace(key, static_cast<uint32_t>(local.buckets.size())).first;
      local.buckets.emplace_back();
      local.bucket_support.push_back(key);
    }
    Bucket& b = local.buckets[it->second];
    // Only the slots of levels < L and ranks < R are ever read back.
    ChoiceFactors& f = b.lanes[b.count++];
    for (int l = 0; l < L; ++l)
      for (int r = 0; r < R; ++r) {
        f[slot(l, LoopKind::Temporal, r)] = static_cast<int32_t>(chosen[l].t[r]);
        f[slot(l, LoopKind::SpatialX, r)] = static_cast<int32_t>(chosen[l].x[r]);
        f[slot(l, LoopKind::SpatialY, r)] = static_cast<int32_t>(chosen[l].y[r]);
      }
    if (b.count == kLanes) {
      flush(key, b, local, budget, over);
      b.count = 0;
    }
  }

  void flush_all(Local& local, std::atomic<int64_t>& budget, std::atomic<bool>& over) const {
    for (size_t i = 0; i < local.buckets.size(); ++i)
      if (local.buckets[i].count > 0) flush(local.bucket_support[i], local.buckets[i], local, budget, over);
    local.buckets.clear();
    local.bucket_support.clear();
    local.bucket_of.clear();
  }

  // Evaluates the bucket's choices under every order combination of its support.
  void flush(const Support& key, const Bucket& b, Local& local, std::atomic<int64_t>& budget,
             std::atomic<bool>& over) const {
    std::array<const std::vector<std::vector<int>>*, kMaxLevels> classes{};
    std::array<TensorMask, kMaxLevels> keep{};
    uint32_t below = 0;
    int64_t combos = 1;
    for (int l = 0; l < L; ++l) {
      const uint32_t iterated = key.w[l] & 0xFF;
      keep[l] = static_cast<TensorMask>(key.w[l] >> 24);
      std::vector<int> ranks;
      const LevelConstraints* lc = constraint(l);
      if (lc && lc->order) {
        for (int r : *lc->order)
          if (iterated >> r & 1) ranks.push_back(r);
      } else {
        for (int r = 0; r < R; ++r)
          if (iterated >> r & 1) ranks.push_back(r);
      }
      classes[l] = &order_classes(l, ranks, below, local);
      combos *= static_cast<int64_t>(classes[l]->size());
      below |= keep[l];
    }
    if (opt.max_mappings > 0 && budget.fetch_add(combos * b.count, std::memory_order_relaxed) + combos * b.count > opt.max_mappings) {
      over.store(true, std::memory_order_relaxed);
      return;
    }
    std::array<size_t, kMaxLevels> pick{};
    FlatMapping fm;
    LaneFactors lf;
    CompactCost out[kLanes];
    for (int64_t combo = 0; combo < combos; ++combo) {
      // The combination's loop nest, outermost first, as flatten() lays it out.
      fm = FlatMapping{};
      fm.n_levels = static_cast<int8_t>(L);
      for (int l = L - 1; l >= 0; --l) {
        fm.keep[l] = keep[l];
        auto add = [&](int r, LoopKind k) {
          if (fm.n_loops == kMaxLoops) throw InputError({}, "mapping", "more than " + std::to_string(kMaxLoops) + " loops");
          fm.loops[fm.n_loops++] = {static_cast<int8_t>(l), static_cast<int8_t>(r), k, 2};
        };
        for (int r : (*classes[l])[pick[l]]) add(r, LoopKind::Temporal);
        for (int r = 0; r < R; ++r)
          if (key.w[l] >> (8 + r) & 1) add(r, LoopKind::SpatialX);
        for (int r = 0; r < R; ++r)
          if (key.w[l] >> (16 + r) & 1) add(r, LoopKind::SpatialY);
      }
      const NestStructure s = analyze(plan, fm);
      for (int i = 0; i < fm.n_loops; ++i) {
        const int sl = slot(fm.loops[i].level, fm.loops[i].kind, fm.loops[i].rank);
        for (int k = 0; k < b.count; ++k) lf[i][k] = b.lanes[k][sl];
      }
      evaluate_lanes(plan, s, lf, b.count, out);
      ++local.lane_calls;
      local.evaluated += b.count;
      for (int k = 0; k < b.count; ++k)
        if (out[k].valid()) consider(out[k], classes, pick, keep, b.lanes[k], local);
      for (int l = 0; l < L; ++l) {  // next combination (odometer, level 0 fastest)
        if (++pick[l] < classes[l]->size()) break;
        pick[l] = 0;
      }
    }
  }

  Mapping build(const std::array<const std::vector<std::vector<int>>*, kMaxLevels>& classes,
                const std::array<size_t, kMaxLevels>& pick, const std::array<TensorMask, kMaxLevels>& keep,
                const ChoiceFactors& f) const {
    Mapping m;
    m.levels.resize(L);
    for (int l = 0; l < L; ++l) {
      LevelMapping& lm = m.levels[l];
      lm.keep = keep[l];
      for (int r : (*classes[l])[pick[l]]) lm.loops.push_back({r, f[slot(l, LoopKind::Temporal, r)], LoopKind::Temporal});
      for (LoopKind k : {LoopKind::SpatialX, LoopKind::SpatialY})
        for (int r = 0; r < R; ++r)
          if (f[slot(l, k, r)] > 1) lm.loops.push_back({r, f[slot(l, k, r)], k});
    }
    return m;
  }

  // Best and energy/cycles front. Ties (equal objective, or equal energy and cycles) go to the
  // smaller mapping text, so the answer does not depend on the order of evaluation.
  void consider(const CompactCost& r, const std::array<const std::vector<std::vector<int>>*, kMaxLevels>& classes,
                const std::array<size_t, kMaxLevels>& pick, const std::array<TensorMask, kMaxLevels>& keep,
                const ChoiceFactors& f, Local& local) const {
    ++local.valid;
    const double v = objective_value(opt.objective, r);
    std::optional<Mapping> m;
    std::string text;
    auto materialise = [&] {
      if (!m) m = build(classes, pick, keep, f), text = to_text(*m, e, c);
    };
    if (v <= local.best_value) {
      if (v < local.best_value || (materialise(), text < local.best_text)) {
        materialise();
        local.best_value = v;
        local.best_text = text;
        local.best = m;
        local.best_cost = r;
      }
    }
    // The front is sorted by energy ascending, so cycles descend; the last point with energy
    // <= r's has the fewest cycles among them and decides whether r is dominated.
    auto& P = local.pareto;
    auto pos = std::upper_bound(P.begin(), P.end(), r.energy_pj,
                                [](double en, const ParetoMapping& p) { return en < p.energy_pj; });
    if (pos != P.begin()) {
      const ParetoMapping& q = *(pos - 1);
      if (q.cycles <= r.cycles) {
        if (q.cycles < r.cycles || q.energy_pj < r.energy_pj) return;  // dominated
        materialise();                                                  // equal: smaller text wins
        const size_t i = static_cast<size_t>(pos - 1 - P.begin());
        if (text < local.pareto_text[i]) P[i].mapping = *m, local.pareto_text[i] = text;
        return;
      }
    }
    materialise();
    // r dominates the points from pos on whose cycles are >= r's (a contiguous run).
    auto last = pos;
    while (last != P.end() && last->cycles >= r.cycles) ++last;
    const size_t i = static_cast<size_t>(pos - P.begin()), j = static_cast<size_t>(last - P.begin());
    P.erase(pos, last);
    local.pareto_text.erase(local.pareto_text.begin() + i, local.pareto_text.begin() + j);
    P.insert(P.begin() + i, ParetoMapping{r.energy_pj, r.cycles, *m});
    local.pareto_text.insert(local.pareto_text.begin() + i, text);
  }

  void descend(std::vector<LevelChoice>& chosen, int l, const std::array<int64_t, kMaxRanks>& remaining, Local& local,
               std::atomic<int64_t>& budget, std::atomic<bool>& over) const {
    if (over.load(std::memory_order_relaxed)) return;
    if (l == L) {
      park(chosen, local, budget, over);
      return;
    }
    std::vector<LevelChoice>& choices = local.scratch[l];  // this depth's buffer, reused
    level_choices(l, remaining, choices);
    for (const LevelChoice& ch : choices) {
      std::array<int64_t, kMaxRanks> rest = remaining;
      for (int r = 0; r < R; ++r) rest[r] /= ch.t[r] * ch.x[r] * ch.y[r];
      for (TensorMask keep : keep_options[l]) {
        chosen[l] = ch;
        chosen[l].keep = keep;
        if (opt.prune && !fits(chosen, l)) {
          ++local.pruned;
          continue;
        }
        descend(chosen, l + 1, rest, local, budget, over);
      }
    }
  }
};

}  // namespace

MapperResult exhaustive_search(const Einsum& e, const Core& c, const Mapspace& space,
                               const ExhaustiveOptions& opt) {
  Search s(e, c, space, opt);
  std::array<int64_t, kMaxRanks> remaining{};
  for (int r = 0; r < s.R; ++r) remaining[r] = e.ranks[r].size;
  std::vector<LevelChoice> first_factors, first;
  s.level_choices(0, remaining, first_factors);
  for (const LevelChoice& ch : first_factors)
    for (TensorMask keep : s.keep_options[0]) {
      first.push_back(ch);
      first.back().keep = keep;
    }
  std::atomic<int64_t> budget{0};
  std::atomic<bool> over{false};
  std::vector<Search::Local> locals(static_cast<size_t>(omp_get_max_threads()));
  // Each thread parks choices from the subtrees it takes in its own buckets; which choices share
  // a SIMD call then depends on the schedule, but the answer does not (ties are broken by text).
#pragma omp parallel
  {
    Search::Local& local = locals[static_cast<size_t>(omp_get_thread_num())];
    std::vector<LevelChoice> chosen(s.L);
#pragma omp for schedule(dynamic, 1) nowait
    for (int64_t i = 0; i < static_cast<int64_t>(first.size()); ++i) {
      chosen[0] = first[i];
      if (opt.prune && !s.fits(chosen, 0)) {
        ++local.pruned;
        continue;
      }
      std::array<int64_t, kMaxRanks> rest = remaining;
      for (int r = 0; r < s.R; ++r) rest[r] /= first[i].t[r] * first[i].x[r] * first[i].y[r];
      s.descend(chosen, 1, rest, local, budget, over);
    }
    s.flush_all(local, budget, over);
  }
  if (over.load())
    throw InputError({}, "max_mappings",
                     "the mapspace of '" + e.name + "' has more than " + std::to_string(opt.max_mappings) +
                         " mappings; constrain it (loop orders, factors, bypass) or raise the limit");
  MapperResult out;
  Search::Local best;
  std::vector<std::pair<std::string, ParetoMapping>> all;
  for (Search::Local& l : locals) {
    out.evaluated += l.evaluated;
    out.valid += l.valid;
    out.pruned += l.pruned;
    out.lane_calls += l.lane_calls;
    if (l.best && (l.best_value < best.best_value || (l.best_value == best.best_value && l.best_text < best.best_text))) {
      best.best_value = l.best_value;
      best.best_text = l.best_text;
      best.best = l.best;
    }
    for (size_t i = 0; i < l.pareto.size(); ++i) all.emplace_back(std::move(l.pareto_text[i]), std::move(l.pareto[i]));
  }
  out.best = best.best;
  if (out.best) out.cost = evaluate(s.plan, flatten(*out.best));  // the full breakdown
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
