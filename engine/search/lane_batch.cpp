#include "engine/search/lane_batch.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>
#include <set>
#include <unordered_map>

#include "engine/common/error.hpp"

namespace mapfuse {

TileSearch::TileSearch(const Einsum& e, const Core& core, const Mapspace& space, const TileSearchSpec& spec)
    : e_(e), c_(core_for(core, e)), space_(space), spec_(spec), plan_(compile_plan(e, core)) {
  const Core& c = c_;
  L = static_cast<int>(c.levels.size());
  R = static_cast<int>(e.ranks.size());
  T = static_cast<int>(e.tensors.size());
  top = spec.top < 0 ? L - 1 : spec.top;
  for (int l = 0; l < L; ++l) {
    plan_.levels[l].extra_read_words = spec.extra_read_words[l];
    plan_.levels[l].extra_write_words = spec.extra_write_words[l];
  }
  if (spec.rest_tiles > 0) {
    rest_plan_ = plan_;
    rest_plan_.output_accumulates = true;
  }
  budget_ = spec.budget ? spec.budget : &own_budget;
  over_ = spec.over ? spec.over : &own_over;
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
  // How each rank acts on each tensor's refills (see order_signature): 0 = the tensor does not
  // index it, 1 = it moves only dimensions without a sliding window, 2 = it moves a sliding-window
  // dimension (two ranks of size > 1 in one dimension). `plain[t]` = no rank of the tensor is in
  // several dimensions, so the reduction is exact for it.
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
  // Temporal factor bounds per (level, rank), from the constraints: a rank a fixed order does not
  // list may only take 1. The levels below a vector unit are not on a non-MAC Einsum's path: no
  // loops there (they would only repeat the loops of the vector unit's level).
  const int below_vector = &c_ != &core ? core.vector->level : 0;
  if (&c_ != &core) lanes_level = core.vector->level;
  for (int l = 0; l < L; ++l)
    for (int r = 0; r < R; ++r) {
      int64_t lo = 1, hi = l < below_vector ? 1 : e.ranks[r].size;
      if (const LevelConstraints* lc = constraint(l)) {
        if (lc->order && std::find(lc->order->begin(), lc->order->end(), r) == lc->order->end()) hi = 1;
        if (r < static_cast<int>(lc->min_factor.size()) && lc->min_factor[r]) lo = std::max(lo, *lc->min_factor[r]);
        if (r < static_cast<int>(lc->max_factor.size()) && lc->max_factor[r]) hi = std::min(hi, *lc->max_factor[r]);
      }
      t_min[l][r] = lo;
      t_max[l][r] = hi;
    }
  // Divisors of every divisor of every rank size, worked out once.
  int64_t max_size = 1;
  for (int r = 0; r < R; ++r) max_size = std::max(max_size, e.ranks[r].size);
  if (max_size > (int64_t{1} << 26)) throw InputError({}, "mapping", "rank size above 2^26");
  divisor_index.assign(static_cast<size_t>(max_size) + 1, -1);
  auto add_divisors = [&](int64_t d) {
    if (divisor_index[static_cast<size_t>(d)] >= 0) return;
    divisor_index[static_cast<size_t>(d)] = static_cast<int32_t>(divisor_lists.size());
    divisor_lists.push_back(divisors(d));
  };
  add_divisors(1);
  for (int r = 0; r < R; ++r)
    for (int64_t d : divisors(e.ranks[r].size)) add_divisors(d);
  // Kept-tensor choices per level: the outermost keeps all; others any subset their roles (or a
  // constraint) allow. Fused: the backing level keeps the on-chip tensors, the levels between it
  // and the outermost keep nothing.
  keep_options.assign(L, {});
  const TensorMask all = static_cast<TensorMask>((1u << T) - 1);
  const int b = spec.backing_level;
  for (int l = 0; l < L; ++l) {
    TensorMask allowed = 0;
    for (int t = 0; t < T; ++t)
      if (c.levels[l].may_keep & role_bit(e.tensors[t].role)) allowed |= static_cast<TensorMask>(1u << t);
    const LevelConstraints* lc = constraint(l);
    if (l == L - 1) keep_options[l] = {all};
    else if (b >= 0 && l > b) keep_options[l] = {0};
    else if (lc && lc->keep) keep_options[l] = {static_cast<TensorMask>(*lc->keep)};
    else
      for (unsigned m = 0; m <= all; ++m)
        if ((m & allowed) == m) keep_options[l].push_back(static_cast<TensorMask>(m));
    if (b >= 0 && l == b)
      std::erase_if(keep_options[l], [&](TensorMask m) { return (m & spec.onchip_backing) != spec.onchip_backing; });
    // Roles the level must keep (a tensor backed on chip below this level is exempt).
    TensorMask must = 0;
    if (l < L - 1 && !(b >= 0 && l > b))
      for (int t = 0; t < T; ++t)
        if (c.levels[l].must_keep & role_bit(e.tensors[t].role)) must |= static_cast<TensorMask>(1u << t);
    std::erase_if(keep_options[l], [&](TensorMask m) { return (m & must) != must; });
  }
  if (spec.bound_scalar && (spec.backing_level >= 0 || spec.rest_tiles > 0))
    throw std::logic_error("TileSearch: branch and bound needs a single-Einsum search");
  for (int l = 0; l < L; ++l)
    for (int t = 0; t < T; ++t)
      serve_pj[l][t] = t == plan_.output ? plan_.levels[l].update_pj : plan_.levels[l].read_pj;
  for (int l = L - 1; l >= 0; --l) {
    if (l == L - 1) {
      fanout_above[l] = 1;
    } else {
      const PlanLevel& up = plan_.levels[l + 1];
      fanout_above[l] = std::min<int64_t>(int64_t{1} << 40, fanout_above[l + 1] * up.fanout_x * up.fanout_y);
    }
    for (int t = 0; t < T; ++t) {
      double best = std::numeric_limits<double>::infinity();
      for (int m = l + 1; m < L; ++m) {
        bool may = false;
        for (TensorMask k : keep_options[m]) may = may || (k >> t & 1);
        if (may) best = std::min(best, serve_pj[m][t]);
      }
      serve_pj_above[l][t] = best;
    }
  }
  if (spec.merge_passthrough)
    for (int l = 0; l < top && l + 1 < L; ++l) {
      const LevelConstraints* above = constraint(l + 1);
      // A fixed order above could not place the merged loops where the split ones were.
      bool ok = !(above && above->order) && x_ok[l + 1] == 0 && y_ok[l + 1] == 0 && !(b >= 0 && l >= b);
      for (int r = 0; r < R && ok; ++r) ok = t_min[l][r] == 1 && t_max[l + 1][r] == e.ranks[r].size;
      passthrough[l] = ok;
    }
  if (spec.merge_supports) {
    int loops = 0;
    for (int l = 0; l <= top && l < L; ++l) {
      for (int r = 0; r < R; ++r)
        if (e.ranks[r].size > 1 && t_max[l][r] > 1) loopable[l] |= 1u << r;
      loops += std::popcount(loopable[l]) + std::popcount(x_ok[l]) + std::popcount(y_ok[l]);
    }
    merge = loops <= kMaxLoops;
    for (int l = 0; l <= top && l < L && merge; ++l) {
      bool safe = true;
      for (int t = 0; t < T && safe; ++t) {
        std::array<int, kMaxTensorDims> touched{};
        for (uint32_t axis_ok : {x_ok[l], y_ok[l]})
          for (int r = 0; r < R; ++r) {
            if (!(axis_ok >> r & 1)) continue;
            int dims = 0;
            for (size_t d = 0; d < e.tensors[t].dims.size(); ++d)
              for (const auto& term : e.tensors[t].dims[d])
                if (term.rank == r) ++dims, ++touched[d];
            safe = safe && dims <= 1;
          }
        for (int n : touched) safe = safe && n <= 1;
      }
      if (safe) always_x[l] = x_ok[l], always_y[l] = y_ok[l];
    }
  }
  // Levels 0..top-2 are compared (TileWorker::prune), level top-1 bounded choice by choice
  // (complete): with the top at level 1, one empty row whose innermost choices are bounded.
  if (spec.prune_partial && spec.prune && merge && top >= 1) {
    // Every dimension one rank with coefficient 1, no rank twice in a tensor: a tile moved by a
    // loop over a rank it indexes shares nothing with the previous one, which is what makes the
    // counts split into inner and outer parts.
    bool simple = true;
    for (int t = 0; t < T; ++t) {
      simple = simple && plain[t];
      for (const auto& dim : e.tensors[t].dims) simple = simple && dim.size() == 1 && dim[0].coeff == 1;
    }
    partial_ = simple;
    relaxed_ = plan_;
    for (int l = 0; l < L; ++l) {
      relaxed_.levels[l].entries = 0;
      relaxed_.levels[l].must_keep = 0;
      relaxed_.levels[l].min_x = relaxed_.levels[l].min_y = 1;
    }
    relaxed_.legacy_output_fills = true;
  }
  if (partial_) return;  // enumerated level by level from nothing (TileWorker::prune), not from roots
  std::array<int64_t, kMaxRanks> remaining{};
  for (int r = 0; r < R; ++r) remaining[r] = e.ranks[r].size;
  std::vector<LevelChoice> first;
  level_choices(0, remaining, first);
  for (const LevelChoice& ch : first)
    for (TensorMask keep : keep_options[0]) {
      LevelChoice root = ch;
      root.keep = keep;
      if (admissible(root, 0)) roots_.push_back(root);
    }
}

// A level's loop order matters to the cost model only through the refills of the tiles of
// tensors kept below it. For one tensor, walking the level's loops from the inside: a loop over a
// rank that moves only window-free dimensions ends every reuse (its step can never be undone, and
// a tile moved by a full extent shares nothing), so the order of the loops outside the innermost
// such loop is irrelevant; inside it, what matters is the sequence of sliding-window ranks and,
// between them, the sets of ranks the tensor does not index (only their product counts). Orders
// with the same signature for every tensor cost the same.
std::vector<int> TileSearch::order_signature(const std::vector<int>& order, uint32_t below) const {
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

// All factor choices of level l given what remains of each rank (keep is set by the caller).
// The top level takes the rest of every rank; above it everything is 1.
void TileSearch::level_choices(int l, const std::array<int64_t, kMaxRanks>& remaining,
                               std::vector<LevelChoice>& out) const {
  out.clear();
  const bool outermost = l >= top;
  LevelChoice cur;
  const int64_t fx_max = c_.levels[l].fanout.x, fy_max = c_.levels[l].fanout.y;
  auto temporal_ok = [&](int r, int64_t f) { return f >= t_min[l][r] && f <= t_max[l][r]; };
  // The most of each axis ranks r.. could still use (capped at the fan-out), so that a prefix
  // that can no longer reach min_usage is abandoned before its temporal factors are enumerated
  // (with full fan-out use required, most spatial prefixes cannot).
  const int64_t min_x = plan_.levels[l].min_x, min_y = plan_.levels[l].min_y;
  std::array<int64_t, kMaxRanks + 1> reach_x{}, reach_y{};
  reach_x[static_cast<size_t>(R)] = reach_y[static_cast<size_t>(R)] = 1;
  for (int r = R - 1; r >= 0; --r) {
    const bool spatial = l <= top;
    reach_x[r] = std::min(fx_max, reach_x[r + 1] * (spatial && (x_ok[l] >> r & 1) ? remaining[r] : 1));
    reach_y[r] = std::min(fy_max, reach_y[r + 1] * (spatial && (y_ok[l] >> r & 1) ? remaining[r] : 1));
  }
  auto rec = [&](auto&& self, int r, int64_t used_x, int64_t used_y) -> void {
    if (used_x * reach_x[r] < min_x || used_y * reach_y[r] < min_y) return;  // min_usage (FanoutUnderused)
    if (r == R) {
      out.push_back(cur);
      return;
    }
    for (int64_t sx : divs(remaining[r])) {
      if (sx > 1 && (l > top || !(x_ok[l] >> r & 1) || used_x * sx > fx_max)) break;
      for (int64_t sy : divs(remaining[r] / sx)) {
        if (sy > 1 && (l > top || !(y_ok[l] >> r & 1) || used_y * sy > fy_max)) break;
        const int64_t rest = remaining[r] / sx / sy;
        auto take = [&](int64_t t) {
          if (!temporal_ok(r, t)) return;
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
  if (l == lanes_level && spec_.reduce_orders && out.size() > 1) {
    // Same factor per rank (loops x lanes) = same tile, same accesses (each operation reads and
    // writes the level itself); same lanes used = same cycles (copies may use fewer): keep the first.
    std::set<std::array<int64_t, kMaxRanks + 1>> seen;
    std::erase_if(out, [&](const LevelChoice& ch) {
      std::array<int64_t, kMaxRanks + 1> n{};
      n[kMaxRanks] = 1;
      for (int r = 0; r < R; ++r) n[r] = ch.t[r] * ch.x[r] * ch.y[r], n[kMaxRanks] *= ch.x[r] * ch.y[r];
      return !seen.insert(n).second;
    });
  }
}

// Does level l hold its kept tiles for the chosen inner levels (its tile spans levels <= l)?
bool TileSearch::fits(const LevelChoice* chosen, int l) const {
  const Level& lv = c_.levels[l];
  if (lv.entries == 0) return true;
  int64_t ext[kMaxRanks];
  for (int r = 0; r < R; ++r) {
    ext[r] = 1;
    for (int i = 0; i <= l; ++i) ext[r] *= chosen[i].t[r] * chosen[i].x[r] * chosen[i].y[r];
  }
  int64_t words = 0;
  for (int t = 0; t < T; ++t) {
    if (!(chosen[l].keep >> t & 1)) continue;
    int64_t v = 1;
    for (const auto& dim : e_.tensors[t].dims) v *= Einsum::dim_extent(dim, ext);
    words += v;
  }
  return words * lv.multiple_buffering <= lv.entries;
}

void TileSearch::scalar_bounds(const LevelChoice* chosen, int l, const std::array<int64_t, kMaxRanks>& rest,
                               double& energy_lb, double& cycles_lb) const {
  // Every rank's factors multiply to its size, so the temporal iterations are the inner ones
  // times what remains over the spatial factors above l, whose product is at most fanout_above[l].
  int64_t inner = 1, left = 1;
  for (int m = 0; m <= l; ++m)
    for (int r = 0; r < R; ++r) inner *= chosen[m].t[r];
  for (int r = 0; r < R; ++r) left *= rest[r];
  const int64_t steps = inner * ((left + fanout_above[l] - 1) / fanout_above[l]);
  cycles_lb = static_cast<double>(steps);  // the model's latency is at least its compute steps
  // Per instance, the innermost level keeping a tensor serves compute once per step and group
  // (reads, or updates for the output: model.cpp, `child_fills = temporal_iterations`).
  double per_step = 0;
  for (int t = 0; t < T; ++t) {
    double pj = serve_pj_above[l][t];
    for (int m = 0; m <= l; ++m)
      if (chosen[m].keep >> t & 1) {
        pj = serve_pj[m][t];
        break;
      }
    per_step += pj;
  }
  // The model adds the same non-negative terms in another order: leave room for its rounding.
  energy_lb = (static_cast<double>(plan_.operations) * plan_.op_pj + cycles_lb * per_step) * (1 - 1e-9);
}

double TileSearch::temporal_mapspace_size() const {
  double size = 1;
  for (int r = 0; r < R; ++r) {
    // ways[n]: splits of n over the levels done so far (innermost first), by divisor of the size.
    const std::vector<int64_t>& ds = divs(e_.ranks[r].size);
    std::unordered_map<int64_t, double> ways{{1, 1.0}};
    for (int l = 0; l < L; ++l) {
      std::unordered_map<int64_t, double> next;
      for (const auto& [n, w] : ways)
        for (int64_t d : ds)
          if (d >= t_min[l][r] && d <= t_max[l][r] && e_.ranks[r].size % (n * d) == 0) next[n * d] += w;
      ways = std::move(next);
    }
    size *= ways.count(e_.ranks[r].size) ? ways[e_.ranks[r].size] : 0.0;
  }
  for (int l = 0; l < L; ++l) size *= static_cast<double>(keep_options[l].size());
  return size;
}

int TileSearch::most_orders_level() const {
  int best = L - 1, most = -1;
  for (int l = 0; l < L; ++l) {
    if (const LevelConstraints* lc = constraint(l); lc && lc->order) continue;
    int n = 0;
    for (int r = 0; r < R; ++r) n += t_max[l][r] > 1;
    if (n > most) most = n, best = l;
  }
  return best;
}

Mapping TileCandidate::build() const {
  const int L = search->L, R = search->R;
  Mapping m;
  m.levels.resize(L);
  for (int l = 0; l < L; ++l) {
    LevelMapping& lm = m.levels[l];
    lm.keep = (*keep)[l];
    for (int r : *(*order)[l])
      if (factor(l, LoopKind::Temporal, r) > 1) lm.loops.push_back({r, factor(l, LoopKind::Temporal, r), LoopKind::Temporal});
    for (LoopKind k : {LoopKind::SpatialX, LoopKind::SpatialY})
      for (int r = 0; r < R; ++r)
        if (factor(l, k, r) > 1) lm.loops.push_back({r, factor(l, k, r), k});
  }
  return m;
}

void TileCandidate::key(Key& out) const {
  const int L = search->L, R = search->R;
  out.fill(0);
  int n = 0;
  for (int l = L - 1; l >= 0; --l) {
    out[n++] = (*keep)[l];
    const std::vector<int>& ord = *(*order)[l];
    int32_t& len = out[n++];
    for (int r : ord)
      if (factors[slot(l, LoopKind::Temporal, r)] > 1) out[n++] = r, out[n++] = factors[slot(l, LoopKind::Temporal, r)], ++len;
    for (int r = 0; r < R; ++r)
      out[n++] = factors[slot(l, LoopKind::SpatialX, r)], out[n++] = factors[slot(l, LoopKind::SpatialY, r)];
  }
}

// ---- Buckets ------------------------------------------------------------------------------

namespace {

// Support of a complete choice: per level, temporal | x << 8 | y << 16 | keep << 24.
// Merged mode (TileSearchSpec::merge_supports): temporal bits are 0 and o[l] is the level's whole
// temporal loop list, 4 bits per rank (rank + 1), innermost rank in the top nibble used.
struct Support {
  std::array<uint32_t, kMaxLevels> w{};
  std::array<uint32_t, kMaxLevels> o{};
  bool operator==(const Support&) const = default;
};
// Parked choices live in one pool per worker: bucket i holds kLanes choices of W = 3 * L * R
// factors each (slot order of TileCandidate). The pool bounds how many buckets may be live at once
// (partial ones are then flushed); more live buckets fill more lanes when supports are many.
constexpr size_t kPoolWords = size_t{4} << 20;  // 16 MB per worker
// A level's spatial factors: x per rank, then y per rank (1 = none).
using FanoutKey = std::array<int64_t, 2 * kMaxRanks>;
FanoutKey fanout_key(const LevelChoice& ch, int R) {
  FanoutKey k;
  k.fill(1);
  for (int r = 0; r < R; ++r) {
    k[static_cast<size_t>(r)] = ch.x[r];
    k[static_cast<size_t>(kMaxRanks + r)] = ch.y[r];
  }
  return k;
}
// A level's choice as the bounds classify it: spatial factors and kept tensors.
using ChoiceKey = std::pair<FanoutKey, TensorMask>;

// Bounds classified per key (several bounds may share one): one entry per key, beaten only if
// every bound of the key is, and only the beaten keys stay, sorted for in_beaten.
template <class Key>
void only_beaten(std::vector<std::pair<Key, bool>>& v) {
  std::sort(v.begin(), v.end());
  size_t m = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    if (m > 0 && v[m - 1].first == v[i].first)
      v[m - 1].second = v[m - 1].second && v[i].second;
    else
      v[m++] = v[i];
  }
  v.resize(m);
  std::erase_if(v, [](const std::pair<Key, bool>& e) { return !e.second; });
}
template <class Key>
bool in_beaten(const std::vector<std::pair<Key, bool>>& v, const Key& k) {
  const auto it = std::lower_bound(v.begin(), v.end(), k, [](const std::pair<Key, bool>& a, const Key& b) { return a.first < b; });
  return it != v.end() && it->first == k;
}

}  // namespace

struct TileWorker::State {
  const TileSearch* s = nullptr;
  TileSink* sink = nullptr;
  TileWorker* owner = nullptr;
  std::unordered_map<uint64_t, std::vector<std::vector<int>>> orders;  // see order_classes()
  // analyze() per loop structure (levels, ranks and kinds of the loops, kept tensors): a bucket is
  // refilled and flushed many times with the same structures, and analyze() reads no factor.
  struct NestKey {
    std::array<uint8_t, 3 * kMaxLoops + kMaxLevels + 2> b{};
    bool operator==(const NestKey&) const = default;
  };
  struct NestKeyHash {
    size_t operator()(const NestKey& k) const {
      return std::hash<std::string_view>{}(std::string_view(reinterpret_cast<const char*>(k.b.data()), k.b.size()));
    }
  };
  // Per plan: the search's, and the relaxed one partial choices are compared with (reference()).
  std::unordered_map<NestKey, NestStructure, NestKeyHash> nests, relaxed_nests;
  static constexpr size_t kMaxNests = 8192;  // about 20 MB per thread and plan at most
  const NestStructure& nest_of(const FlatMapping& fm, bool relaxed = false) {
    auto& cache = relaxed ? relaxed_nests : nests;
    NestKey k;
    size_t i = 0;
    k.b[i++] = static_cast<uint8_t>(fm.n_loops);
    k.b[i++] = fm.onchip_backing;
    for (int l = 0; l < fm.n_levels; ++l) k.b[i++] = fm.keep[static_cast<size_t>(l)];
    for (int j = 0; j < fm.n_loops; ++j) {
      const FlatLoop& lp = fm.loops[static_cast<size_t>(j)];
      k.b[i++] = static_cast<uint8_t>(lp.level);
      k.b[i++] = static_cast<uint8_t>(lp.rank);
      k.b[i++] = static_cast<uint8_t>(lp.kind);
    }
    if (auto it = cache.find(k); it != cache.end()) return it->second;
    if (cache.size() >= kMaxNests) cache.clear();
    return cache.emplace(k, analyze(relaxed ? s->relaxed_ : s->plan_, fm)).first->second;
  }
  // Open-addressing table support -> live bucket + 1 (0 = empty), at most half full.
  std::vector<uint32_t> table;
  size_t table_mask = 0;
  std::vector<int> counts;  // per live bucket
  std::vector<Support> bucket_support;
  std::unique_ptr<int32_t[]> pool;  // uninitialised; only written slots are read
  size_t W = 0, max_live = 0;
  std::vector<std::vector<LevelChoice>> scratch = std::vector<std::vector<LevelChoice>>(kMaxLevels);
  std::array<LevelChoice, kMaxLevels> chosen{};
  std::array<std::vector<int>, kMaxLevels> merged_orders;
  std::array<std::vector<std::vector<int>>, kMaxLevels> merged_class;

  // One order per class of temporal orders of `ranks` at level l that cost the same (or every
  // order), given the tensors kept below l. Worked out once per (level, ranks, below).
  // Direct-mapped front of the cache: (level, below, iterated) -> classes.
  std::vector<const std::vector<std::vector<int>>*> order_fast =
      std::vector<const std::vector<std::vector<int>>*>(kMaxLevels << (kMaxTensors + kMaxRanks), nullptr);

  const std::vector<std::vector<int>>& order_classes(int l, const std::vector<int>& ranks, uint32_t below) {
    uint32_t iterated = 0;
    for (int r : ranks) iterated |= 1u << r;
    const size_t fast = (static_cast<size_t>(l) << (kMaxTensors + kMaxRanks)) | (below << kMaxRanks) | iterated;
    if (const auto* hit = order_fast[fast]) return *hit;
    const LevelConstraints* lc = s->constraint(l);
    const bool fixed = lc && lc->order;
    const uint64_t key = (uint64_t(l) << 40) | (uint64_t(below) << 32) | (uint64_t(fixed) << 31) | iterated;
    auto [it, fresh] = orders.try_emplace(key);
    if (fresh) {
      std::vector<int> order = ranks;
      std::vector<std::vector<int>> seen;
      if (fixed) {
        it->second.push_back(order);
      } else {
        do {
          if (s->spec_.reduce_orders) {
            std::vector<int> sig = s->order_signature(order, below);
            if (std::find(seen.begin(), seen.end(), sig) != seen.end()) continue;
            seen.push_back(std::move(sig));
          }
          it->second.push_back(order);
        } while (std::next_permutation(order.begin(), order.end()));
      }
    }
    order_fast[fast] = &it->second;
    return it->second;
  }

  // Merged mode: one parked copy per order class combination of the choice, in the bucket of its
  // whole loop structure (class representative, then the level's other loopable ranks at factor
  // 1, which the model treats as no loop), so choices of different supports share SIMD calls.
  std::vector<int> park_ranks;

  // Extended order codes of a level's classes (see Support::o), cached with the classes.
  std::unordered_map<const void*, std::vector<uint32_t>> code_cache;
  std::array<const std::vector<uint32_t>*, kMaxLevels> park_codes{};
  std::vector<const std::vector<uint32_t>*> code_fast =
      std::vector<const std::vector<uint32_t>*>(kMaxLevels << (kMaxTensors + kMaxRanks), nullptr);

  const std::vector<uint32_t>& codes_of(int l, const std::vector<std::vector<int>>& classes) {
    auto [it, fresh] = code_cache.try_emplace(&classes);
    if (fresh)
      for (const std::vector<int>& ord : classes) {
        uint32_t code = 0, used = 0;
        int shift = 0;
        for (int r : ord) code |= uint32_t(r + 1) << shift, shift += 4, used |= 1u << r;
        for (int r = 0; r < s->R; ++r)
          if ((s->loopable[l] >> r & 1) && !(used >> r & 1)) code |= uint32_t(r + 1) << shift, shift += 4;
        it->second.push_back(code);
      }
    return it->second;
  }

  // Partial pruning: levels below fixed_levels take the order fixed_code[l] (Support::o form).
  int fixed_levels = 0;
  std::array<uint32_t, kMaxLevels> fixed_code{};
  std::array<std::vector<uint32_t>, kMaxLevels> fixed_single;

  void park_merged() {
    const int L = s->L, R = s->R;
    Support key;
    uint32_t below = 0;
    int64_t combos = 1;
    for (int l = 0; l < L; ++l) {
      const LevelChoice& ch = chosen[l];
      if (l < fixed_levels) {
        uint32_t x = 0, y = 0;
        for (int r = 0; r < R; ++r) {
          x |= uint32_t(ch.x[r] > 1) << r;
          y |= uint32_t(ch.y[r] > 1) << r;
        }
        if (s->always_x[l] | s->always_y[l]) x = s->always_x[l], y = s->always_y[l];
        key.w[l] = x << 8 | y << 16 | uint32_t(ch.keep) << 24;
        fixed_single[l].assign(1, fixed_code[l]);
        park_codes[l] = &fixed_single[l];
        key.o[l] = fixed_code[l];
        below |= ch.keep;
        continue;
      }
      uint32_t t = 0, x = 0, y = 0;
      for (int r = 0; r < R; ++r) {
        t |= uint32_t(ch.t[r] > 1) << r;
        x |= uint32_t(ch.x[r] > 1) << r;
        y |= uint32_t(ch.y[r] > 1) << r;
      }
      if (s->always_x[l] | s->always_y[l]) x = s->always_x[l], y = s->always_y[l];
      key.w[l] = x << 8 | y << 16 | uint32_t(ch.keep) << 24;
      const size_t fast = (static_cast<size_t>(l) << (kMaxTensors + kMaxRanks)) | (below << kMaxRanks) | t;
      const std::vector<std::vector<int>>* cls = order_fast[fast];
      if (!cls) {
        park_ranks.clear();
        const LevelConstraints* lc = s->constraint(l);
        if (lc && lc->order) {
          for (int r : *lc->order)
            if (t >> r & 1) park_ranks.push_back(r);
        } else {
          for (int r = 0; r < R; ++r)
            if (t >> r & 1) park_ranks.push_back(r);
        }
        cls = &order_classes(l, park_ranks, below);
      }
      const std::vector<uint32_t>*& codes = code_fast[fast];
      if (!codes) codes = &codes_of(l, *cls);
      park_codes[l] = codes;
      key.o[l] = (*park_codes[l])[0];
      combos *= static_cast<int64_t>(cls->size());
      below |= ch.keep;
    }
    std::array<size_t, kMaxLevels> pick{};
    for (int64_t combo = 0; combo < combos; ++combo) {
      put(key);
      for (int l = 0; l < L; ++l) {
        if (++pick[l] < park_codes[l]->size()) {
          key.o[l] = (*park_codes[l])[pick[l]];
          break;
        }
        pick[l] = 0;
        key.o[l] = (*park_codes[l])[0];
      }
    }
  }

  void park() {
    if (s->merge) {
      park_merged();
      return;
    }
    const int L = s->L, R = s->R;
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
    put(key);
  }

  void put(const Support& key) {
    const int L = s->L, R = s->R;
    uint64_t h = 0x9E3779B97F4A7C15ull;
    for (int l = 0; l < L; ++l) {
      h = (h ^ (uint64_t(key.w[l]) << 32 | key.o[l])) * 0xFF51AFD7ED558CCDull;
      h ^= h >> 32;
    }
    size_t pos = static_cast<size_t>(h) & table_mask;
    while (table[pos] != 0 && !(bucket_support[table[pos] - 1] == key)) pos = (pos + 1) & table_mask;
    if (table[pos] == 0) {
      if (counts.size() == max_live) {
        flush_all();
        pos = static_cast<size_t>(h) & table_mask;
      }
      table[pos] = static_cast<uint32_t>(counts.size()) + 1;
      counts.push_back(0);
      bucket_support.push_back(key);
    }
    const size_t bi = table[pos] - 1;
    int32_t* f = pool.get() + (bi * kLanes + static_cast<size_t>(counts[bi]++)) * W;
    for (int l = 0; l < L; ++l)
      for (int r = 0; r < R; ++r) {
        f[(l * 3 + 0) * R + r] = static_cast<int32_t>(chosen[l].t[r]);
        f[(l * 3 + 1) * R + r] = static_cast<int32_t>(chosen[l].x[r]);
        f[(l * 3 + 2) * R + r] = static_cast<int32_t>(chosen[l].y[r]);
      }
    if (counts[bi] == kLanes) {
      flush(key, pool.get() + bi * kLanes * W, kLanes);
      counts[bi] = 0;
    }
  }

  void flush_all() {
    for (size_t i = 0; i < counts.size(); ++i)
      if (counts[i] > 0) flush(bucket_support[i], pool.get() + i * kLanes * W, counts[i]);
    counts.clear();
    bucket_support.clear();
    std::fill(table.begin(), table.end(), 0u);
  }

  // Evaluates the bucket's choices under every order combination of its support.
  void flush(const Support& key, const int32_t* lanes, int count) {
    const int L = s->L, R = s->R;
    const TileSearchSpec& spec = s->spec_;
    std::array<const std::vector<std::vector<int>>*, kMaxLevels> classes{};
    std::array<TensorMask, kMaxLevels> keep{};
    uint32_t below = 0;
    int64_t combos = 1;
    std::vector<int> ranks;
    for (int l = 0; l < L; ++l) {
      const uint32_t iterated = key.w[l] & 0xFF;
      keep[l] = static_cast<TensorMask>(key.w[l] >> 24);
      if (s->merge) {  // the structure is the key's: one combination
        merged_orders[l].clear();
        for (uint32_t code = key.o[l]; code; code >>= 4) merged_orders[l].push_back(static_cast<int>(code & 15) - 1);
        merged_class[l].assign(1, merged_orders[l]);
        classes[l] = &merged_class[l];
        continue;
      }
      ranks.clear();
      const LevelConstraints* lc = s->constraint(l);
      if (lc && lc->order) {
        for (int r : *lc->order)
          if (iterated >> r & 1) ranks.push_back(r);
      } else {
        for (int r = 0; r < R; ++r)
          if (iterated >> r & 1) ranks.push_back(r);
      }
      classes[l] = &order_classes(l, ranks, below);
      combos *= static_cast<int64_t>(classes[l]->size());
      below |= keep[l];
    }
    if (spec.max_evaluations > 0 &&
        s->budget_->fetch_add(combos * count, std::memory_order_relaxed) + combos * count > spec.max_evaluations) {
      s->over_->store(true, std::memory_order_relaxed);
      return;
    }
    std::array<size_t, kMaxLevels> pick{};
    std::array<const std::vector<int>*, kMaxLevels> order{};
    FlatMapping fm;
    LaneFactors lf;
    CompactCost out[kLanes];
    TileCandidate cand;
    cand.search = s;
    cand.R = R;
    cand.order = &order;
    cand.keep = &keep;
    for (int64_t combo = 0; combo < combos; ++combo) {
      // The combination's loop nest, outermost first, as flatten() lays it out.
      fm = FlatMapping{};
      fm.n_levels = static_cast<int8_t>(L);
      for (int l = L - 1; l >= 0; --l) {
        fm.keep[l] = keep[l];
        order[l] = &(*classes[l])[pick[l]];
        auto add = [&](int r, LoopKind k) {
          if (fm.n_loops == kMaxLoops) throw InputError({}, "mapping", "more than " + std::to_string(kMaxLoops) + " loops");
          fm.loops[fm.n_loops++] = {static_cast<int8_t>(l), static_cast<int8_t>(r), k, 2};
        };
        for (int r : *order[l]) add(r, LoopKind::Temporal);
        for (int r = 0; r < R; ++r)
          if (key.w[l] >> (8 + r) & 1) add(r, LoopKind::SpatialX);
        for (int r = 0; r < R; ++r)
          if (key.w[l] >> (16 + r) & 1) add(r, LoopKind::SpatialY);
      }
      if (spec.onchip_backing) {  // fused: the on-chip tensors are backed at their level, not DRAM
        fm.keep[L - 1] = static_cast<TensorMask>(fm.keep[L - 1] & ~spec.onchip_backing);
        fm.onchip_backing = spec.onchip_backing;
      }
      const NestStructure& ns = nest_of(fm);
      for (int i = 0; i < fm.n_loops; ++i) {
        const size_t sl = static_cast<size_t>(cand.slot(fm.loops[i].level, fm.loops[i].kind, fm.loops[i].rank));
        for (int k = 0; k < count; ++k) lf[i][k] = lanes[static_cast<size_t>(k) * W + sl];
      }
      evaluate_lanes(s->plan_, ns, lf, count, out);
      if (spec.rest_tiles > 0) {  // the whole Einsum: first tiles plus accumulating ones (fused_total)
        CompactCost rest[kLanes];
        evaluate_lanes(s->rest_plan_, ns, lf, count, rest);
        const double n1 = static_cast<double>(spec.first_tiles), n2 = static_cast<double>(spec.rest_tiles);
        for (int k = 0; k < count; ++k) {
          if (out[k].invalid == Invalid::None && rest[k].invalid != Invalid::None &&
              rest[k].invalid != Invalid::CapacityExceeded)
            out[k].invalid = rest[k].invalid;
          out[k].energy_pj = out[k].energy_pj * n1 + rest[k].energy_pj * n2;
          out[k].cycles = out[k].cycles * n1 + rest[k].cycles * n2;
        }
      }
      ++owner->lane_calls;
      owner->evaluated += count;
      for (int k = 0; k < count; ++k) {
        cand.factors = lanes + static_cast<size_t>(k) * W;
        sink->consume(cand, out[k]);
      }
      for (int l = 0; l < L; ++l) {  // next combination (odometer, level 0 fastest)
        if (++pick[l] < classes[l]->size()) break;
        pick[l] = 0;
      }
    }
  }

  // Branch and bound: whether the sink already beats every completion of levels 0..l.
  bool bound_beaten(int l, const std::array<int64_t, kMaxRanks>& rest) const {
    double energy = 0, cycles = 0;
    s->scalar_bounds(chosen.data(), l, rest, energy, cycles);
    return sink->beaten(energy, cycles, -1, 0);
  }

  void descend(int l, const std::array<int64_t, kMaxRanks>& remaining) {
    if (s->over()) return;
    if (l == s->L) {
      park();
      return;
    }
    std::vector<LevelChoice>& choices = scratch[l];  // this depth's buffer, reused
    s->level_choices(l, remaining, choices);
    for (const LevelChoice& ch : choices) {
      std::array<int64_t, kMaxRanks> rest = remaining;
      for (int r = 0; r < s->R; ++r) rest[r] /= ch.t[r] * ch.x[r] * ch.y[r];
      for (TensorMask keep : s->keep_options[l]) {
        if (l == top_filter && top_beaten(ch, keep)) {
          ++owner->fanout_skipped;
          continue;
        }
        chosen[l] = ch;
        chosen[l].keep = keep;
        if (!s->admissible(chosen[l], l)) continue;
        if (s->spec_.prune && !s->fits(chosen.data(), l)) {
          ++owner->pruned;
          continue;
        }
        if (s->spec_.bound_scalar && bound_beaten(l, rest)) {
          ++owner->bound_pruned[static_cast<size_t>(l)];
          continue;
        }
        descend(l + 1, rest);
      }
    }
  }

  // `to` may be null while nothing is parked (partial pruning evaluates no lanes).
  void bind(const TileSearch& search, TileSink* to) {
    if (s == &search && sink == to) return;
    if (s) flush_all();
    if (s != &search) {
      orders.clear();
      code_cache.clear();
      nests.clear();
      relaxed_nests.clear();
      fanout_cache.clear();
      std::fill(code_fast.begin(), code_fast.end(), nullptr);
      std::fill(order_fast.begin(), order_fast.end(), nullptr);
      bound_orders.clear();
    }
    s = &search;
    W = static_cast<size_t>(3 * search.L * search.R);
    max_live = kPoolWords / (kLanes * W);
    table.assign(std::bit_ceil(2 * max_live), 0u);
    table_mask = table.size() - 1;
    if (!pool) pool.reset(new int32_t[kPoolWords]);
    sink = to;
  }

  // ---- Partial pruning (TileSearchSpec::prune_partial) ------------------------------------
  // After levels 0..d-1 are chosen, every count of the model is, for any choice O of the levels
  // above, (a part fixed by the inner choice) x (a part fixed by O), or a monotone function of
  // such products, provided two inner choices agree on
  //   - what remains of every rank (the boundary tile: outer tiles, occupancies and loop
  //     extents are then equal), and
  //   - per tensor, which of its inner tiles have a real loop over a rank it indexes among the
  //     inner levels above them: a tile with one is refilled (its inner iterations) x (every
  //     outer temporal iteration), one without (its volume) x (the outer iterations down to the
  //     innermost outer loop over its ranks) -- a moved tile shares nothing with the previous
  //     one when every dimension is one rank (TileSearch::partial_). The same holds for the
  //     tile the outer levels refill (the outermost inner one, or compute).
  // Spatial groups multiply level by level. The outputs' first-update discount subtracts
  // (tensor volume) x (instances that share each value), whose inner part is compared too.
  // Energy and latency (block rounding, per-instance bandwidth, the maximum over levels) are
  // monotone in those counts, so an inner choice no worse in every one of them under one
  // reference completion is no worse under every completion: the dominated one is dropped.
  // Completions that stay are enumerated and evaluated as usual.
  std::vector<int32_t> part_pool, next_pool;  // partial choices, `pstride` ints each
  size_t pstride = 0;
  CostResult part_cost;
  std::vector<double> comp;

  // Layout of one partial choice: per level l < s->L: t[R], x[R], y[R], keep, order code; then
  // the remaining extent of every rank.
  int32_t* level_slot(int32_t* p, int l) const { return p + static_cast<size_t>(l) * (3 * s->R + 2); }
  int32_t* rem_slot(int32_t* p) const { return p + static_cast<size_t>(s->L) * (3 * s->R + 2); }
  const int32_t* level_slot(const int32_t* p, int l) const { return p + static_cast<size_t>(l) * (3 * s->R + 2); }
  const int32_t* rem_slot(const int32_t* p) const { return p + static_cast<size_t>(s->L) * (3 * s->R + 2); }

  void load(const int32_t* p, int d, std::array<int64_t, kMaxRanks>& rem) {
    const int R = s->R;
    for (int l = 0; l < d; ++l) {
      const int32_t* q = level_slot(p, l);
      LevelChoice& ch = chosen[l];
      for (int r = 0; r < R; ++r) ch.t[r] = q[r], ch.x[r] = q[R + r], ch.y[r] = q[2 * R + r];
      ch.keep = static_cast<TensorMask>(q[3 * R]);
      fixed_code[l] = static_cast<uint32_t>(q[3 * R + 1]);
    }
    rem.fill(1);
    for (int r = 0; r < R; ++r) rem[r] = rem_slot(p)[r];
  }

  void store(int32_t* p, int d, const std::array<int64_t, kMaxRanks>& rem) const {
    const int R = s->R;
    for (int l = 0; l < d; ++l) {
      int32_t* q = level_slot(p, l);
      const LevelChoice& ch = chosen[l];
      for (int r = 0; r < R; ++r)
        q[r] = static_cast<int32_t>(ch.t[r]), q[R + r] = static_cast<int32_t>(ch.x[r]), q[2 * R + r] = static_cast<int32_t>(ch.y[r]);
      q[3 * R] = ch.keep;
      q[3 * R + 1] = static_cast<int32_t>(fixed_code[l]);
    }
    for (int r = 0; r < R; ++r) rem_slot(p)[r] = static_cast<int32_t>(rem[r]);
  }

  // The comparison key of chosen[0..d) (see above): remaining extents, then per tensor the inner
  // tiles refilled per outer iteration (bit l) and whether the outermost one is (bit 15).
  using GroupKey = std::array<int64_t, kMaxRanks + kMaxTensors>;
  struct GroupKeyHash {
    template <size_t N>
    size_t operator()(const std::array<int64_t, N>& k) const {
      uint64_t h = 0x9E3779B97F4A7C15ull;
      for (int64_t v : k) h = (h ^ static_cast<uint64_t>(v)) * 0xFF51AFD7ED558CCDull, h ^= h >> 29;
      return static_cast<size_t>(h);
    }
  };

  GroupKey group_key(int d, const std::array<int64_t, kMaxRanks>& rem) const {
    const int R = s->R, T = s->T;
    GroupKey k{};
    for (int r = 0; r < R; ++r) k[r] = rem[r];
    for (int t = 0; t < T; ++t) {
      const uint32_t ranks = s->plan_.tensors[t].relevant_ranks;
      // loop_above[l]: a real temporal loop over the tensor's ranks at levels l+1..d-1.
      bool loop_above = false;
      int64_t mask = 0;
      int outermost = -1;
      for (int l = d - 1; l >= 0; --l) {
        const bool kept = chosen[l].keep >> t & 1;
        if (kept && outermost < 0) {
          outermost = l;
          if (loop_above) mask |= int64_t{1} << 15;
        }
        if (kept && loop_above) mask |= int64_t{1} << l;
        for (int r = 0; r < R; ++r) loop_above = loop_above || ((ranks >> r & 1) && chosen[l].t[r] > 1);
      }
      if (outermost < 0) mask |= int64_t{1} << 15;  // compute: one fetch per operation
      k[R + t] = mask;
    }
    return k;
  }

  // Evaluates chosen[0..d) under the reference completion into part_cost (what ref_keep says
  // each level keeps): the remaining extents as temporal loops of the top level in rank order,
  // nothing kept between. False if the model rejects it.
  std::array<TensorMask, kMaxLevels> ref_keep{};
  bool reference(int d, const std::array<int64_t, kMaxRanks>& rem) {
    const int L = s->L, R = s->R, top = s->top;
    const TileSearchSpec& spec = s->spec_;
    FlatMapping fm;
    fm.n_levels = static_cast<int8_t>(L);
    auto add = [&](int l, int r, LoopKind k, int64_t f) {
      if (fm.n_loops == kMaxLoops) throw InputError({}, "mapping", "more than " + std::to_string(kMaxLoops) + " loops");
      fm.loops[fm.n_loops++] = {static_cast<int8_t>(l), static_cast<int8_t>(r), k, f};
    };
    for (int l = L - 1; l >= 0; --l) {
      if (l < d) {
        const LevelChoice& ch = chosen[l];
        fm.keep[l] = ch.keep;
        for (uint32_t code = fixed_code[l]; code; code >>= 4) {
          const int r = static_cast<int>(code & 15) - 1;
          if (ch.t[r] > 1) add(l, r, LoopKind::Temporal, ch.t[r]);
        }
        for (int r = 0; r < R; ++r)
          if (ch.x[r] > 1) add(l, r, LoopKind::SpatialX, ch.x[r]);
        for (int r = 0; r < R; ++r)
          if (ch.y[r] > 1) add(l, r, LoopKind::SpatialY, ch.y[r]);
      } else if (l == top) {
        fm.keep[l] = s->keep_options[l].front();
        for (int r = 0; r < R; ++r)
          if (rem[r] > 1) add(l, r, LoopKind::Temporal, rem[r]);
      } else {
        fm.keep[l] = l > top ? s->keep_options[l].front() : TensorMask{0};
      }
    }
    if (spec.onchip_backing) {
      fm.keep[L - 1] = static_cast<TensorMask>(fm.keep[L - 1] & ~spec.onchip_backing);
      fm.onchip_backing = spec.onchip_backing;
    }
    int64_t factors[kMaxLoops];
    for (int i = 0; i < fm.n_loops; ++i) factors[i] = fm.loops[static_cast<size_t>(i)].factor;
    evaluate(s->relaxed_, nest_of(fm, true), factors, &part_cost);
    ref_keep = fm.keep;
    return part_cost.valid();
  }

  // Fills `comp` with the comparison vector of chosen[0..d) under the reference completion.
  // False if the model rejects it (then it is never dropped).
  bool components(int d, const std::array<int64_t, kMaxRanks>& rem) {
    const int L = s->L, R = s->R, T = s->T;
    ++owner->partial_evaluated;
    if (!reference(d, rem)) return false;
    const CostResult& c = part_cost;
    comp.clear();
    for (int l = 0; l < L; ++l) {
      const PlanLevel& lv = s->plan_.levels[l];
      const bool per_instance = lv.block_size > 1 || lv.read_bw > 0 || lv.write_bw > 0 || lv.shared_bw > 0;
      const double inst = static_cast<double>(std::max<int64_t>(1, c.level_instances[l]));
      for (int t = 0; t < T; ++t) {
        const TensorAccesses& a = c.access[l][t];
        comp.push_back(static_cast<double>(a.reads));
        comp.push_back(static_cast<double>(a.fills));
        comp.push_back(static_cast<double>(a.updates));
        if (per_instance) {
          comp.push_back(static_cast<double>(a.reads) / inst);
          comp.push_back(static_cast<double>(a.fills) / inst);
          comp.push_back(static_cast<double>(a.updates) / inst);
        }
      }
      if (lv.block_size > 1) comp.push_back(inst);
    }
    comp.push_back(c.compute_cycles);
    for (int l = 0; l < d; ++l) comp.push_back(static_cast<double>(c.level_occupancy[l]));
    // The outputs' first updates: more instances sharing a value (spatial loops over ranks it
    // does not index) and more splitting it (over ranks it indexes) both discount more.
    const int out_t = s->plan_.output;
    if (out_t >= 0) {
      const uint32_t ranks = s->plan_.tensors[out_t].relevant_ranks;
      for (int l = 0; l + 1 < d; ++l) {
        int64_t share = 1, split = 1;
        for (int k = l + 1; k < d; ++k)
          for (int r = 0; r < R; ++r) {
            const int64_t f = chosen[k].x[r] * chosen[k].y[r];
            (ranks >> r & 1 ? split : share) *= f;
          }
        comp.push_back(1.0 / static_cast<double>(share));
        comp.push_back(1.0 / static_cast<double>(split));
      }
    }
    return true;
  }

  // Length of the comparison vector of a partial choice of levels 0..d-1 (components()).
  size_t comp_size(int d) const {
    size_t D = 0;
    for (int l = 0; l < s->L; ++l) {
      const PlanLevel& lv = s->plan_.levels[l];
      const bool per_instance = lv.block_size > 1 || lv.read_bw > 0 || lv.write_bw > 0 || lv.shared_bw > 0;
      D += static_cast<size_t>(s->T) * (per_instance ? 6 : 3) + (lv.block_size > 1 ? 1 : 0);
    }
    D += 1 + static_cast<size_t>(d);
    if (s->plan_.output >= 0 && d > 1) D += 2 * static_cast<size_t>(d - 1);
    return D;
  }

  // Lower bounds on the energy and latency of the completions of chosen[0..d) (the levels from
  // d up choose their factors, fan-out, kept tensors and orders; docs/mapper.md, "Completion
  // bounds"), from the reference evaluation: one per way the free levels can use their fan-out
  // (`outer`: a factor per rank, level and axis; every completion uses one of them) and, in a
  // fused context whose backing level b is free and the top, per set of tensors b keeps. Given
  // the fan-out (S instances added; per tensor, `irr` of them over ranks it does not index, `mc`
  // of those on axes that multicast it):
  //   - compute steps: the reference's (all that remains temporal at the top) over S;
  //   - a kept inner tile refilled per outer iteration (group_key bit) is filled exactly as often
  //     in total over its instances under every completion; any other is refilled (volume) x
  //     (outer iterations down to the innermost outer loop over its ranks) x irr. The free levels
  //     are relaxed into one loop per rank (splitting a rank's loop over two levels can only
  //     lengthen the runs that count) and every order of those loops is tried, after a first
  //     order-free pass with each tensor at its fewest iterations. Reads and updates follow the
  //     tile they serve (compute: one per step); an output's first-update discount is at most the
  //     reference's times the output's irr;
  //   - what the outermost inner tile takes from above is its count over mc, and at least the
  //     tensor's volume, served at the cheapest per-word cost of a level that may keep it, plus
  //     the volume that level takes from the backing level;
  //   - a level's bandwidth takes at least its per-instance words over its bandwidth; a backing
  //     level at least the volumes it serves, and all of what a tensor takes from above where no
  //     level between may keep it.
  // Energy is a positive sum of these counts (block rounding only adds) and latency their
  // maximum (whole cycles), so no such completion costs less. False where the model rejects the
  // reference (no bound); no bounds at all means no completion is valid.
  struct OuterFanout {
    double used = 1;                             // S
    std::array<int64_t, kMaxRanks> temporal{};   // what the free levels leave each rank to iterate
    std::array<double, kMaxTensors> irr{}, mc{};
    std::array<double, kMaxLevels> inst{};       // instances of each free level
    FanoutKey at_d{};                            // the spatial factors of level d (x per rank, then y)
  };
  std::vector<OuterFanout> outer_made;           // make_outer_fanouts' result
  const std::vector<OuterFanout>* outer_last = nullptr;  // the last outer_fanouts' result
  // outer_fanouts per (d, rem) of the bound search: a level's choices are bounded one by one,
  // with few distinct remainders among them.
  using FanoutsKey = std::array<int64_t, kMaxRanks + 1>;
  std::unordered_map<FanoutsKey, std::vector<OuterFanout>, GroupKeyHash> fanout_cache;

  const std::vector<OuterFanout>& outer_fanouts(int d, const std::array<int64_t, kMaxRanks>& rem) {
    FanoutsKey ck;
    ck[0] = d;
    std::copy(rem.begin(), rem.end(), ck.begin() + 1);
    auto it = fanout_cache.find(ck);
    if (it == fanout_cache.end()) {
      make_outer_fanouts(d, rem);
      if (fanout_cache.size() >= 4096) fanout_cache.clear();  // bounded memory
      it = fanout_cache.emplace(ck, outer_made).first;
    }
    outer_last = &it->second;
    return it->second;
  }

  void make_outer_fanouts(int d, const std::array<int64_t, kMaxRanks>& rem) {
    const EvalPlan& p = s->plan_;
    const int L = s->L, R = s->R, T = s->T, top = s->top;
    std::vector<OuterFanout>& outer = outer_made;
    outer.clear();
    std::array<int64_t, kMaxRanks> left = rem;
    std::array<std::array<int64_t, 2>, kMaxLevels> used;  // per level and axis
    for (auto& u : used) u = {1, 1};
    OuterFanout cur;
    cur.irr.fill(1);
    cur.mc.fill(1);
    cur.at_d.fill(1);
    // Levels top..d, each axis, each rank: a factor dividing what is left of the rank.
    auto rec = [&](auto&& self, int l, int axis, int r) -> void {
      if (l < d) {
        OuterFanout o = cur;
        o.temporal = left;
        double above = 1;
        for (int k = L - 1; k >= d; --k) {
          o.inst[k] = above;
          if (k <= top) above *= static_cast<double>(used[k][0] * used[k][1]);
        }
        o.used = above;
        outer.push_back(o);
        return;
      }
      const PlanLevel& lv = p.levels[l];
      const int64_t cap = axis == 0 ? lv.fanout_x : lv.fanout_y;
      if (l > top || r == R || cap == 1) {
        if (l <= top && cap > 1 && used[l][axis] < (axis == 0 ? lv.min_x : lv.min_y)) return;  // min_usage
        if (axis == 0) self(self, l, 1, 0);
        else self(self, l - 1, 0, 0);
        return;
      }
      const uint32_t ok = axis == 0 ? s->x_ok[l] : s->y_ok[l];
      self(self, l, axis, r + 1);  // factor 1
      if (!(ok >> r & 1)) return;
      const RoleMask multicast = axis == 0 ? lv.multicast_x : lv.multicast_y;
      const int64_t base_used = used[l][axis], base_left = left[r];
      const auto saved_irr = cur.irr, saved_mc = cur.mc;
      for (int64_t f : s->divs(base_left)) {
        if (f == 1) continue;
        if (base_used * f > cap) break;
        used[l][axis] = base_used * f;
        left[r] = base_left / f;
        if (l == d) cur.at_d[static_cast<size_t>(axis * kMaxRanks + r)] = f;
        for (int t = 0; t < T; ++t) {
          if (p.tensors[t].relevant_ranks >> r & 1) continue;
          cur.irr[t] = saved_irr[t] * static_cast<double>(f);
          if (multicast & role_bit(p.tensors[t].role)) cur.mc[t] = saved_mc[t] * static_cast<double>(f);
        }
        self(self, l, axis, r + 1);
        cur.irr = saved_irr;
        cur.mc = saved_mc;
      }
      if (l == d) cur.at_d[static_cast<size_t>(axis * kMaxRanks + r)] = 1;
      used[l][axis] = base_used;
      left[r] = base_left;
    };
    rec(rec, std::min(top, L - 1), 0, 0);
  }

  // One bound: no completion with this fan-out (and, fused, these tensors kept at the backing
  // level b) costs less energy or time, or reserves fewer own words at b.
  struct Bound {
    double energy = 0, cycles = 0;
    int64_t own = 0;         // words at b beyond the exchanged tiles (0 unfused)
    TensorMask kept_b = 0;   // what b keeps (by_keep)
    bool by_keep = false;
    TensorMask kept_d = 0;   // what level d keeps (by_keep_d: per_keep_d)
    bool by_keep_d = false;
  };
  std::vector<Bound> bounds;
  // The orders of the free levels' ranks (one loop each) that a bound must try, per set of ranks
  // they still iterate: a tensor's refills grow with its run, the loops from the innermost up to
  // the outermost over one of its ranks (mult below), and every term of the bound only grows with
  // the runs. An order whose run of every tensor contains another order's is never cheaper or
  // faster, so only the orders whose runs are minimal are tried (of equal runs, the first). For
  // GPT-3's five-rank projections and matmuls that is 3 orders of 120 (3 of 5,040 for a convolution).
  std::unordered_map<uint32_t, std::vector<std::array<int8_t, kMaxRanks>>> bound_orders;
  const std::vector<std::array<int8_t, kMaxRanks>>& minimal_orders(uint32_t ranks) {
    auto [it, fresh] = bound_orders.try_emplace(ranks);
    if (!fresh) return it->second;
    const int T = s->T;
    std::array<int, kMaxRanks> order{};
    int n = 0;
    for (int r = 0; r < s->R; ++r)
      if (ranks >> r & 1) order[n++] = r;
    struct Runs {
      std::array<int8_t, kMaxRanks> order{};
      std::array<uint32_t, kMaxTensors> run{};
      int size = 0;  // sum of the runs' lengths: an order can only be dominated by a shorter or equal one
    };
    std::vector<Runs> all;
    do {
      Runs x;
      for (int t = 0; t < T; ++t) {
        uint32_t prefix = 0;
        for (int i = 0; i < n; ++i) {
          prefix |= 1u << order[i];
          if (s->plan_.tensors[t].relevant_ranks >> order[i] & 1) x.run[t] = prefix;
        }
        x.size += std::popcount(x.run[t]);
      }
      for (int i = 0; i < n; ++i) x.order[i] = static_cast<int8_t>(order[i]);
      all.push_back(x);
    } while (std::next_permutation(order.begin(), order.begin() + n));
    std::stable_sort(all.begin(), all.end(), [](const Runs& a, const Runs& b) { return a.size < b.size; });
    std::vector<Runs> kept;
    for (const Runs& x : all) {
      bool dominated = false;
      for (const Runs& k : kept) {
        bool within = true;
        for (int t = 0; t < T && within; ++t) within = (k.run[t] & ~x.run[t]) == 0;
        if ((dominated = within)) break;
      }
      if (!dominated) kept.push_back(x);
    }
    for (const Runs& k : kept) it->second.push_back(k.order);
    return it->second;
  }
  std::vector<TensorMask> bound_keeps;
  std::vector<int64_t> bound_own;
  std::vector<double> bound_best, bound_energy, bound_fastest;

  bool completion_bounds(int d, const std::array<int64_t, kMaxRanks>& rem) {
    bounds.clear();
    if (!reference(d, rem)) return false;
    const std::vector<OuterFanout>& outer = outer_fanouts(d, rem);
    if (classify) outer_keep_beaten.clear();
    relaxed_energy.clear();
    relaxed_cycles.clear();
    const EvalPlan& p = s->plan_;
    const int L = s->L, R = s->R, T = s->T;
    const CostResult& c = part_cost;
    const GroupKey key = group_key(d, rem);
    const int b = s->spec_.backing_level;
    const TensorMask onchip = b >= 0 ? s->spec_.onchip_backing : TensorMask{0};
    // Fused with b still free and the top (b's tile is then the whole tile Einsum): one set of
    // bounds per choice of what b keeps.
    const bool by_keep = b >= d && b == s->top;
    // Per tensor, what does not depend on the fan-out or the order: the cost per word it takes
    // from above, served by its backing level (direct), by a level between that may keep it
    // (via: its per-word cost, plus per volume what fills it from the backing level; the two
    // minima taken separately), or, for a tensor b keeps without backing it, through b.
    struct PerTensor {
      double ref_mult = 1;  // the reference's outer iterations down to the innermost own rank
      double volume = 0, from_ref = 0;
      int backing = 0;
      double direct = 0, via_word = 0, via_volume = 0, through_word = 0, through_volume = 0;
      bool via = false, through = false;
      bool forced = false;  // level d keeps it (per_keep_d): d serves the inner tile
    };
    // Per kept set of level d too (per_keep_d, classifying a row): each set is a bound of the
    // completions whose level d keeps exactly it.
    const bool by_d = per_keep_d && d < L - 1 && d != b;
    std::vector<TensorMask>& kds = bound_keeps_d;
    if (by_d) kds.assign(s->keep_options[d].begin(), s->keep_options[d].end());
    else kds.assign(1, TensorMask{0});
    auto may_keep = [&](int l, int t) {
      for (TensorMask m : s->keep_options[l])
        if (m >> t & 1) return true;
      return false;
    };
    // Scratch reused across calls (this runs once per partial choice completed or skipped).
    std::vector<TensorMask>& keeps = bound_keeps;
    if (by_keep) keeps.assign(s->keep_options[b].begin(), s->keep_options[b].end());
    else keeps.assign(1, TensorMask{0});
    const size_t K = keeps.size();
    std::vector<int64_t>& own = bound_own;
    own.assign(K, 0);
    for (size_t k = 0; k < K; ++k)
      for (int t = 0; t < T; ++t)
        if ((keeps[k] >> t & 1) && !(onchip >> t & 1)) own[k] += p.tensors[t].volume;
    std::vector<double> &best = bound_best, &energy = bound_energy, &fastest = bound_fastest;
    best.resize(K), energy.resize(K), fastest.resize(K);
    // Classifying the top level's choices (classify_top) with several fan-outs: first one bound for all of them,
    // every quantity at its most favourable over the fan-outs (most instances and multicast, the
    // largest first-update discount, and each tile refilled as if no fan-out split a rank it does
    // not index: mult below). Each term of the cost only falls with these, so no completion
    // under any fan-out costs less; where the sink beats it, the per-fan-out bounds are not made.
    const bool relaxed_first = (record_relaxed || classify_relaxed) && outer.size() > 1;
    OuterFanout sup;
    if (relaxed_first) {
      sup = outer[0];
      for (const OuterFanout& o : outer) {
        sup.used = std::max(sup.used, o.used);
        for (int t = 0; t < T; ++t) sup.irr[t] = std::max(sup.irr[t], o.irr[t]), sup.mc[t] = std::max(sup.mc[t], o.mc[t]);
        for (int l = 0; l < L; ++l) sup.inst[l] = std::max(sup.inst[l], o.inst[l]);
      }
    }
    for (const TensorMask kd : kds) {
      std::array<PerTensor, kMaxTensors> pt_{};
      for (int t = 0; t < T; ++t) {
        const PlanTensor& pt = p.tensors[t];
        const bool out = t == p.output;
        PerTensor& q = pt_[t];
        q.forced = by_d && (kd >> t & 1);
        int innermost_own = -1;
        for (int r = 0; r < R; ++r)
          if ((pt.relevant_ranks >> r & 1) && rem[r] > 1) innermost_own = r;
        for (int r = 0; r <= innermost_own; ++r) q.ref_mult *= static_cast<double>(rem[r]);
        // The reference's direct parent is the first level from d that keeps t.
        int parent = d;
        while (parent < L - 1 && !(ref_keep[parent] >> t & 1)) ++parent;
        q.from_ref = static_cast<double>(out ? c.access[parent][t].updates : c.access[parent][t].reads);
        q.volume = static_cast<double>(pt.volume);
        q.backing = onchip >> t & 1 ? b : L - 1;
        const PlanLevel& bk = p.levels[q.backing];
        q.direct = out ? bk.update_pj : bk.read_pj;
        const bool keeps_b = by_keep && !(onchip >> t & 1);  // b may keep it without backing it
        for (int l = d; l < q.backing; ++l) {
          if (!may_keep(l, t)) continue;
          if (by_d && l == d && !q.forced) continue;  // d does not keep it
          if (q.forced && l > d) break;                // d keeps it: d serves the inner tile
          const PlanLevel& lv = p.levels[l];
          const double word = out ? lv.update_pj : lv.read_pj;
          if (keeps_b && l <= b) {  // served by l <= b, b filled with the volume from the backing
            const PlanLevel& bl = p.levels[b];
            const double volume = out ? bk.update_pj : bl.write_pj + bk.read_pj;
            q.through_word = q.through ? std::min(q.through_word, word) : word;
            q.through_volume = q.through ? std::min(q.through_volume, volume) : volume;
            q.through = true;
          }
          if (keeps_b && l == b) continue;  // b does not keep it in the other case
          const double volume = out ? bk.update_pj : lv.write_pj + bk.read_pj;
          q.via_word = q.via ? std::min(q.via_word, word) : word;
          q.via_volume = q.via ? std::min(q.via_volume, volume) : volume;
          q.via = true;
        }
      }
      std::array<double, kMaxTensors> extra{};  // words from above beyond the volume, per instance
      const size_t first = bounds.size();
      bounds.resize(first + K * outer.size());
      if (classify) outer_keep_beaten.resize(first + K * outer.size(), 0);
      std::array<double, kMaxTensors> mult{};
      for (ptrdiff_t oi_ = relaxed_first ? -1 : 0; oi_ < static_cast<ptrdiff_t>(outer.size()); ++oi_) {
        const size_t oi = static_cast<size_t>(std::max<ptrdiff_t>(oi_, 0));
        const OuterFanout& o = oi_ < 0 ? sup : outer[oi];
        const double steps = std::ceil(c.compute_cycles / o.used);
        std::fill(best.begin(), best.end(), std::numeric_limits<double>::infinity());
        std::fill(fastest.begin(), fastest.end(), std::numeric_limits<double>::infinity());
        // Energy and latency (per kept set) with `mult[t]` outer iterations down to the innermost
        // loop over t's ranks; the minima go to best / fastest.
        auto cost_with = [&]() {
          std::array<double, kMaxLevels> rd{}, wr{};
          std::fill(energy.begin(), energy.end(), static_cast<double>(p.operations) * p.op_pj);
          for (int t = 0; t < T; ++t) {
            const PerTensor& q = pt_[t];
            const bool out = t == p.output;
            const double spread = mult[t] * o.used / q.ref_mult;  // a tile not refilled per outer iteration
            const int64_t mask = key[R + t];
            int child = -1;  // compute
            double inner = 0;
            for (int l = 0; l < d; ++l) {
              if (!(chosen[l].keep >> t & 1)) continue;
              const TensorAccesses& a = c.access[l][t];
              const double serve = child >= 0 && !(mask >> child & 1) ? spread : 1;
              const double refill = mask >> l & 1 ? 1 : spread;
              double reads, fills, updates = 0;
              if (!out) {
                reads = static_cast<double>(a.reads) * serve;
                fills = static_cast<double>(a.fills) * refill;
              } else {
                updates = static_cast<double>(a.updates) * serve;
                // The reference's discount (updates - reads), when its reads show it.
                const double discount = a.reads > 0 ? static_cast<double>(a.updates - a.reads) * o.irr[t] : -1;
                reads = discount >= 0 ? std::max(0.0, updates - discount) : 0;
                fills = discount >= 0 ? std::max(0.0, static_cast<double>(a.fills) * refill - discount) : 0;
              }
              const PlanLevel& lv = p.levels[l];
              inner += reads * lv.read_pj + fills * lv.write_pj + updates * lv.update_pj;
              const double inst = static_cast<double>(std::max<int64_t>(1, c.level_instances[l])) * o.used;
              rd[l] += reads / inst;
              wr[l] += (fills + updates) / inst;
              child = l;
            }
            const double from_above = std::max(q.volume, q.from_ref * (mask >> 15 & 1 ? 1 : spread) / o.mc[t]);
            double other = q.forced ? std::numeric_limits<double>::infinity() : from_above * q.direct;
            if (q.via) other = std::min(other, from_above * q.via_word + q.volume * q.via_volume);
            const double through = q.through ? from_above * q.through_word + q.volume * q.through_volume : other;
            for (size_t k = 0; k < K; ++k)
              energy[k] += inner + ((keeps[k] >> t & 1) && !(onchip >> t & 1) ? through : other);
            // The backing level serves at least the volume; all of from_above where no level
            // between may take the tensor (then it serves the inner tile directly).
            (out ? wr : rd)[q.backing] += q.volume / o.inst[q.backing];
            extra[t] = (from_above - q.volume) / o.inst[q.backing];
          }
          // Latency is a whole number of cycles (compute steps, or a bandwidth time rounded up),
          // so each bound rounds up; the bandwidth times first give way for rounding (the model's
          // threshold, sums in another order).
          auto time_of = [&](int l, double r, double w) {
            const PlanLevel& lv = p.levels[l];
            double time = 0;
            if (lv.read_bw > 0) time = std::max(time, r / lv.read_bw);
            if (lv.write_bw > 0) time = std::max(time, w / lv.write_bw);
            if (lv.shared_bw > 0) time = std::max(time, (r + w) / lv.shared_bw);
            return std::ceil(time * (1 - 1e-9));
          };
          double cycles = steps;
          for (int l = 0; l < L; ++l) cycles = std::max(cycles, time_of(l, rd[l], wr[l]));
          for (size_t k = 0; k < K; ++k) {
            best[k] = std::min(best[k], energy[k]);
            // Per kept set: tensors that must come straight from their backing level.
            std::array<double, kMaxLevels> r2 = rd, w2 = wr;
            bool any = false;
            for (int t = 0; t < T; ++t) {
              const PerTensor& q = pt_[t];
              if (((keeps[k] >> t & 1) && !(onchip >> t & 1)) || q.via || extra[t] <= 0) continue;
              (t == p.output ? w2 : r2)[q.backing] += extra[t];
              any = true;
            }
            double c_k = cycles;
            if (any)
              for (int l = d; l < L; ++l) c_k = std::max(c_k, time_of(l, r2[l], w2[l]));
            fastest[k] = std::min(fastest[k], c_k);
          }
        };
        // Laid out per kept set, then per fan-out. Energy: sums in another order than the model's.
        // Classifying, every kept set is checked (outer_keep_beaten); a later, tighter bound of
        // the same fan-out only adds beaten ones.
        auto store = [&](bool check) {
          bool all = true;
          for (size_t k = 0; k < K; ++k) {
            Bound& bd = bounds[first + k * outer.size() + oi];
            bd = {best[k] * (1 - 1e-12), fastest[k], own[k], keeps[k], by_keep, kd, by_d};
            if (check && (all || classify)) {
              const bool beaten = sink->beaten(bd.energy, bd.cycles, b, bd.own);
              if (classify) outer_keep_beaten[first + k * outer.size() + oi] |= static_cast<uint8_t>(beaten);
              all = all && beaten;
            }
          }
          return all;
        };
        if (oi_ < 0) {  // spread = mult * used / ref_mult at its least: no irrelevant rank split
          for (int t = 0; t < T; ++t) {
            mult[t] = 1 / o.used;
            for (int r = 0; r < R; ++r)
              if (p.tensors[t].relevant_ranks >> r & 1) mult[t] *= static_cast<double>(rem[r]);
          }
          cost_with();
          bool all = classify_relaxed;
          for (size_t k = 0; k < K; ++k) {
            relaxed_energy.push_back(best[k] * (1 - 1e-12));
            relaxed_cycles.push_back(fastest[k]);
            if (all) all = sink->beaten(relaxed_energy.back(), fastest[k], b, own[k]);
          }
          if (all) {  // every completion is beaten (bounds not filled: not needed)
            relaxed_beaten = true;
            return true;
          }
          continue;
        }
        // First every tensor at its own fewest iterations (its ranks innermost), a bound for any
        // order: where the sink beats it, no order needs trying.
        for (int t = 0; t < T; ++t) {
          mult[t] = 1;
          for (int r = 0; r < R; ++r)
            if (p.tensors[t].relevant_ranks >> r & 1) mult[t] *= static_cast<double>(o.temporal[r]);
        }
        cost_with();
        if (classify && store(true)) continue;
        // Then the ranks the free levels still iterate, every order of them (one loop per rank:
        // splitting a rank's loop over two levels can only lengthen the runs that count, see
        // above); the cheapest and the fastest order may differ, each is a bound on its own.
        std::fill(best.begin(), best.end(), std::numeric_limits<double>::infinity());
        std::fill(fastest.begin(), fastest.end(), std::numeric_limits<double>::infinity());
        int n = 0;
        uint32_t free_ranks = 0;
        for (int r = 0; r < R; ++r)
          if (o.temporal[r] > 1) ++n, free_ranks |= 1u << r;
        for (const std::array<int8_t, kMaxRanks>& order : minimal_orders(free_ranks)) {
          for (int t = 0; t < T; ++t) {
            double run = 1;
            mult[t] = 1;
            for (int i = 0; i < n; ++i) {
              run *= static_cast<double>(o.temporal[order[i]]);
              if (p.tensors[t].relevant_ranks >> order[i] & 1) mult[t] = run;
            }
          }
          cost_with();
        }
        store(classify);
      }
    }
    return true;
  }
  // The bound for all fan-outs at once, per kept set (check_bounds tests it: record_relaxed).
  bool record_relaxed = false;
  std::vector<double> relaxed_energy, relaxed_cycles;
  // classify_fanouts, classify_top: whether the sink beats each bound (outer_keep_beaten).
  bool classify = false;
  // classify_top: the bound for all fan-outs at once first; relaxed_beaten when it is beaten
  // (then nothing else is made).
  bool classify_relaxed = false, relaxed_beaten = false;
  std::vector<uint8_t> outer_keep_beaten;  // per bound (classify): whether the sink beats it
  // Bounds per kept set of level d as well (the row classification of complete, check_bounds).
  bool per_keep_d = false;
  std::vector<TensorMask> bound_keeps_d;

  // Level d's spatial factors after classify_fanouts whose every completion is beaten (all outer
  // fan-outs that include them), sorted; extend_level skips the choices of level `filter_level`
  // with these factors.
  std::vector<std::pair<FanoutKey, bool>> fanout_dead;
  int filter_level = -1;

  // Classifies the outer fan-outs of chosen[0..d) (bounds above, computed for every fan-out);
  // false if no bound was made. `all_beaten`: every completion is beaten.
  bool classify_fanouts(int d, const std::array<int64_t, kMaxRanks>& rem, bool& all_beaten) {
    classify = true;
    const int64_t tried = s->keep_rows.load(std::memory_order_relaxed);
    per_keep_d = force_keep_d || tried < kKeepTrial || s->keep_hits.load(std::memory_order_relaxed) > 0;
    const bool made = completion_bounds(d, rem);
    classify = false;
    per_keep_d = false;
    if (!made) return false;
    fanout_dead.clear();
    keep_dead.clear();
    all_beaten = true;
    const std::vector<OuterFanout>& outer = *outer_last;
    for (size_t j = 0; j < bounds.size(); ++j) {
      const OuterFanout& o = outer[j % outer.size()];
      const bool beaten = outer_keep_beaten[j] != 0;
      all_beaten = all_beaten && beaten;
      fanout_dead.emplace_back(o.at_d, beaten);
      if (bounds[j].by_keep_d) keep_dead.push_back({{o.at_d, bounds[j].kept_d}, beaten});
    }
    only_beaten(fanout_dead);
    only_beaten(keep_dead);
    // A row counts as a trial once the front beats any of its bounds (before that, nothing can
    // tell whether kept sets would be).
    if (!bounds.empty() && bounds.front().by_keep_d &&
        std::find(outer_keep_beaten.begin(), outer_keep_beaten.end(), uint8_t{1}) != outer_keep_beaten.end()) {
      s->keep_rows.fetch_add(1, std::memory_order_relaxed);
      if (!keep_dead.empty()) s->keep_hits.fetch_add(1, std::memory_order_relaxed);
    }
    return true;
  }
  static constexpr int64_t kKeepTrial = 8;  // rows classified per kept set before giving up on it
  bool force_keep_d = false;                // check_classification: always per kept set
  // Level d's (spatial factors, kept set) after classify_fanouts whose every completion is
  // beaten: a choice keeping one set at d is bounded apart from those keeping another (what d
  // keeps decides which levels serve each tensor), so beaten kept sets are skipped before any of
  // their temporal factors is enumerated.
  std::vector<std::pair<ChoiceKey, bool>> keep_dead;
  bool keep_beaten(const LevelChoice& ch, TensorMask keep) const {
    return in_beaten(keep_dead, ChoiceKey{fanout_key(ch, s->R), keep});
  }

  // The top level's choices (spatial factors, what it keeps) whose every completion is beaten,
  // sorted; descend skips them at level `top_filter`. Fused with b the top, the bounds are per
  // kept set of b, so a choice is skipped by its fan-out and what it keeps together: GPT-3's
  // projections complete 39 top-level choices per choice of the level below on average, of which
  // few can reach the front.
  std::vector<std::pair<ChoiceKey, bool>> top_dead;
  int top_filter = -1;

  // Bounds chosen[0..top) at the top level: false if every completion is beaten; else the
  // beaten top-level choices go to top_dead.
  bool classify_top(int d, const std::array<int64_t, kMaxRanks>& rem) {
    top_dead.clear();
    classify = classify_relaxed = true;
    relaxed_beaten = false;
    const bool made = completion_bounds(d, rem);
    classify = classify_relaxed = false;
    if (!made) return true;  // no bound: complete everything
    if (relaxed_beaten) return false;
    const std::vector<OuterFanout>& outer = *outer_last;
    const bool by_keep = !bounds.empty() && bounds.front().by_keep;
    bool all = true;
    for (size_t j = 0; j < bounds.size(); ++j) {
      const bool beaten = outer_keep_beaten[j] != 0;
      all = all && beaten;
      top_dead.push_back({{outer[j % outer.size()].at_d, by_keep ? bounds[j].kept_b : TensorMask{0}}, beaten});
    }
    if (all) return false;
    only_beaten(top_dead);  // without kept sets at b, a choice is beaten only if all its sets are
    top_by_keep = by_keep;
    return true;
  }
  bool top_by_keep = false;
  bool top_beaten(const LevelChoice& ch, TensorMask keep) const {
    return in_beaten(top_dead, ChoiceKey{fanout_key(ch, s->R), top_by_keep ? keep : TensorMask{0}});
  }

  // Completes chosen[0..top) (d = top): skipped if every completion is beaten, else the top
  // level's beaten choices are skipped.
  void complete_top(int d, const std::array<int64_t, kMaxRanks>& rem) {
    if (!classify_top(d, rem)) {
      ++owner->bound_skipped;
      return;
    }
    if (!top_dead.empty()) top_filter = d;
    descend(d, rem);
    top_filter = -1;
  }

  bool fanout_beaten(const LevelChoice& ch) const { return in_beaten(fanout_dead, fanout_key(ch, s->R)); }

  std::vector<double> comps;  // per stored partial choice of the next level, `D` each
  std::vector<uint8_t> alive;
  std::unordered_map<GroupKey, std::vector<uint32_t>, GroupKeyHash> groups;
  std::vector<int> top_ranks;

  // Loop-order classes of the top level over the ranks it still iterates, given the tensors the
  // chosen levels below it keep (chosen[0..top)).
  size_t top_orders(const std::array<int64_t, kMaxRanks>& rest) {
    const int top = s->top;
    uint32_t below = 0;
    for (int l = 0; l < top; ++l) below |= chosen[l].keep;
    std::vector<int>& ranks = top_ranks;
    ranks.clear();
    const LevelConstraints* lc = s->constraint(top);
    if (lc && lc->order) {
      for (int r : *lc->order)
        if (rest[r] > 1) ranks.push_back(r);
    } else {
      for (int r = 0; r < s->R; ++r)
        if (rest[r] > 1) ranks.push_back(r);
    }
    return order_classes(top, ranks, below).size();
  }

  // Extends `n` rows (levels 0..d-1 chosen) by every choice of level d; the choices that another
  // one of their group dominates are dropped, the survivors left in next_pool where alive[i].
  // `last` (d = top - 1, a sink bound): choices with fewer top-level order classes than
  // TileSearchSpec::last_level_min_orders are completed at once instead.
  void extend_level(int d, const int32_t* rows, size_t n, bool last) {
    const int R = s->R;
    std::vector<int> ranks;
    std::array<int64_t, kMaxRanks> rem{};
    int64_t rejected = 0;  // choices the model rejects, each in a group of its own
    size_t dead = 0;       // dropped after they were stored
    next_pool.clear();
    comps.clear();
    alive.clear();
    groups.clear();
    const size_t D = comp_size(d + 1);
    for (size_t i = 0; i < n; ++i) {
      load(rows + i * pstride, d, rem);
      uint32_t below = 0;
      for (int l = 0; l < d; ++l) below |= chosen[l].keep;
      std::vector<LevelChoice>& choices = scratch[d];
      s->level_choices(d, rem, choices);
      for (const LevelChoice& ch : choices) {
        if (d == filter_level && fanout_beaten(ch)) {
          ++owner->fanout_skipped;
          continue;
        }
        std::array<int64_t, kMaxRanks> rest = rem;
        for (int r = 0; r < R; ++r) rest[r] /= ch.t[r] * ch.x[r] * ch.y[r];
        ranks.clear();
        const LevelConstraints* lc = s->constraint(d);
        if (lc && lc->order) {
          for (int r : *lc->order)
            if (ch.t[r] > 1) ranks.push_back(r);
        } else {
          for (int r = 0; r < R; ++r)
            if (ch.t[r] > 1) ranks.push_back(r);
        }
        const std::vector<uint32_t>& codes = codes_of(d, order_classes(d, ranks, below));
        for (TensorMask keep : s->keep_options[d]) {
          if (d == filter_level && keep_beaten(ch, keep)) {
            ++owner->fanout_skipped;
            continue;
          }
          chosen[d] = ch;
          chosen[d].keep = keep;
          if (!s->admissible(chosen[d], d)) continue;
          if (!s->fits(chosen.data(), d)) {
            ++owner->pruned;
            continue;
          }
          const bool compare = !last || top_orders(rest) >= s->spec_.last_level_min_orders;
          for (uint32_t code : codes) {
            fixed_code[d] = code;
            if (!compare) {  // few completions: evaluating them is cheaper than comparing
              complete_top(d + 1, rest);
              continue;
            }
            const bool ok = components(d + 1, rest);
            // Rejected by the model: kept on its own (never compared).
            GroupKey key = group_key(d + 1, rest);
            if (!ok) key[0] = -(++rejected);
            if (ok && comp.size() != D) throw std::logic_error("partial pruning: comparison vector length");
            std::vector<uint32_t>& g = groups[key];
            bool dropped = false;
            if (ok)
              for (uint32_t j : g) {
                const double* o = comps.data() + static_cast<size_t>(j) * D;
                bool le = true;
                for (size_t q = 0; q < D && le; ++q) le = o[q] <= comp[q];
                if (le) {  // dominated or equal: the earlier one stays
                  dropped = true;
                  break;
                }
              }
            if (dropped) {
              ++owner->partial_dropped;
              continue;
            }
            if (ok)
              std::erase_if(g, [&](uint32_t j) {
                const double* o = comps.data() + static_cast<size_t>(j) * D;
                for (size_t q = 0; q < D; ++q)
                  if (comp[q] > o[q]) return false;
                alive[j] = 0;
                ++dead;
                ++owner->partial_dropped;
                return true;
              });
            const uint32_t idx = static_cast<uint32_t>(alive.size());
            g.push_back(idx);
            alive.push_back(1);
            comps.resize(comps.size() + D, 0.0);
            if (ok) std::copy(comp.begin(), comp.end(), comps.end() - static_cast<std::ptrdiff_t>(D));
            next_pool.resize(next_pool.size() + pstride);
            store(next_pool.data() + next_pool.size() - pstride, d + 1, rest);
            if (dead > 65536 && 2 * dead > alive.size()) {  // reclaim the dropped ones' rows
              std::vector<uint32_t> to(alive.size());
              uint32_t m = 0;
              for (size_t j = 0; j < alive.size(); ++j) {
                if (!alive[j]) continue;
                to[j] = m;
                if (m != j) {
                  std::copy_n(comps.begin() + static_cast<std::ptrdiff_t>(j * D), D, comps.begin() + static_cast<std::ptrdiff_t>(m * D));
                  std::copy_n(next_pool.begin() + static_cast<std::ptrdiff_t>(j * pstride), pstride,
                              next_pool.begin() + static_cast<std::ptrdiff_t>(size_t{m} * pstride));
                }
                ++m;
              }
              alive.assign(m, 1);
              comps.resize(size_t{m} * D);
              next_pool.resize(size_t{m} * pstride);
              for (auto& [gk, members] : groups)
                for (uint32_t& j : members) j = to[j];
              dead = 0;
            }
          }
        }
      }
    }
  }

  // Levels 0..top-2 chosen and pruned; the survivors go to `out`.
  void prune_levels(PartialChoices& out) {
    const int R = s->R, top = s->top;
    pstride = static_cast<size_t>(s->L) * (3 * R + 2) + static_cast<size_t>(R);
    part_pool.assign(pstride, 0);  // one empty partial choice
    {
      std::array<int64_t, kMaxRanks> rem{};
      rem.fill(1);
      for (int r = 0; r < R; ++r) rem[r] = s->e_.ranks[r].size;
      store(part_pool.data(), 0, rem);
    }
    const int stop = top - 1;  // the level below the top is compared block by block (complete)
    for (int d = 0; d < stop && !s->over(); ++d) {
      extend_level(d, part_pool.data(), part_pool.size() / pstride, false);
      // Survivors, in the order they were found.
      part_pool.clear();
      for (size_t i = 0; i < alive.size(); ++i)
        if (alive[i]) part_pool.insert(part_pool.end(), next_pool.begin() + i * pstride, next_pool.begin() + (i + 1) * pstride);
    }
    out.levels = stop;
    out.stride = pstride;
    // The most promising first (smallest bounds), so that the sink's front holds good points
    // early and later rows can be skipped (complete).
    const size_t n = part_pool.size() / pstride;
    std::vector<double> score(n, 0.0);
    std::array<int64_t, kMaxRanks> rem{};
    for (size_t i = 0; i < n && !s->over(); ++i) {
      load(part_pool.data() + i * pstride, stop, rem);
      if (!completion_bounds(stop, rem)) continue;
      double e = std::numeric_limits<double>::infinity(), c = e;
      for (const Bound& bd : bounds) e = std::min(e, bd.energy), c = std::min(c, bd.cycles);
      score[i] = e * c;
    }
    std::vector<uint32_t> order(n);
    std::iota(order.begin(), order.end(), 0u);
    std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return score[a] < score[b]; });
    out.rows.resize(part_pool.size());
    for (size_t i = 0; i < n; ++i)
      std::copy_n(part_pool.begin() + static_cast<std::ptrdiff_t>(order[i] * pstride), pstride,
                  out.rows.begin() + static_cast<std::ptrdiff_t>(i * pstride));
  }


  // Testing (check_bounds, check_classification): every choice of level d (kept tensors, order
  // class) as extend_level makes them, each set in chosen[d] / fixed_code[d] while `fn` runs
  // with what it leaves of every rank.
  template <class Fn>
  void each_choice(int d, const std::array<int64_t, kMaxRanks>& rem, Fn&& fn) {
    std::vector<LevelChoice> choices;
    s->level_choices(d, rem, choices);
    uint32_t below = 0;
    for (int l = 0; l < d; ++l) below |= chosen[l].keep;
    for (const LevelChoice& ch : choices) {
      std::array<int64_t, kMaxRanks> rest = rem;
      for (int r = 0; r < s->R; ++r) rest[r] /= ch.t[r] * ch.x[r] * ch.y[r];
      std::vector<int> ranks;
      for (int r = 0; r < s->R; ++r)
        if (ch.t[r] > 1) ranks.push_back(r);
      const std::vector<uint32_t> codes = codes_of(d, order_classes(d, ranks, below));
      for (TensorMask keep : s->keep_options[d]) {
        chosen[d] = ch;
        chosen[d].keep = keep;
        if (!s->admissible(chosen[d], d) || !s->fits(chosen.data(), d)) continue;
        for (uint32_t code : codes) {
          fixed_code[d] = code;
          fn(rest);
        }
      }
    }
  }

  // Rows [begin, end) completed one by one. Everything parked so far is evaluated first, so that
  // the front holds the earlier rows' best; then the bounds of each outer fan-out of the row
  // (classify_fanouts). The row is skipped if what the sink holds beats all of them; otherwise
  // the choices of the level below the top are made (extend_level) except those whose spatial
  // factors only occur in beaten fan-outs, compared where their completions are many, and each
  // survivor is bounded on its own before the top level completes it, every order. (Bounding
  // each survivor costs about one scalar evaluation. Also where the top level only adds loop
  // orders it pays: GPT-3 at 1,024 tokens on ffm_edge takes 94 CPU-s instead of 125, and the
  // same on accelforge_tpu_v4i.)
  void complete(const PartialChoices& p, size_t begin, size_t end) {
    pstride = p.stride;
    const int d = p.levels;
    fixed_levels = d + 1;
    std::array<int64_t, kMaxRanks> rem{};
    for (size_t row = begin; row < end && !s->over(); ++row) {
      const int32_t* r = p.rows.data() + row * pstride;
      flush_all();
      load(r, d, rem);
      // The bounds of every outer fan-out: the row is skipped if all are beaten, else the
      // choices of level d whose fan-out is beaten in every completion.
      bool all_beaten = false;
      if (classify_fanouts(d, rem, all_beaten)) {
        if (all_beaten) {
          ++owner->bound_skipped;
          continue;
        }
        if (!fanout_dead.empty() || !keep_dead.empty()) filter_level = d;  // else no choice can be skipped
      }
      extend_level(d, r, 1, true);
      filter_level = -1;
      for (size_t i = 0; i < alive.size() && !s->over(); ++i) {
        if (!alive[i]) continue;
        load(next_pool.data() + i * pstride, d + 1, rem);
        complete_top(d + 1, rem);
      }
    }
    fixed_levels = 0;
  }
};

namespace {

// check_bounds: matches each lane to the fan-out its free levels use and reports its bounds.
struct BoundCheckSink final : TileSink {
  const TileSearch* s = nullptr;
  int d = 0;
  std::array<int64_t, kMaxRanks> rem{};
  std::function<int(const TileCandidate&)> match;  // index of the lane's bound, -1 if none
  std::function<void(const CompactCost&, int)> report;
  void consume(const TileCandidate& cand, const CompactCost& cost) override {
    if (cost.invalid != Invalid::None && cost.invalid != Invalid::CapacityExceeded) return;
    const int k = match(cand);
    if (k < 0) throw std::logic_error("check_bounds: a completion uses a fan-out the bounds do not list");
    report(cost, k);
  }
};

}  // namespace

bool TileWorker::check_bounds(const TileSearch& s, const PartialChoices& p, size_t i, const BoundCheck& check,
                              bool level_more) {
  State& st = *st_;
  BoundCheckSink sink;
  st.bind(s, &sink);
  st.pstride = p.stride;
  const int d0 = p.levels;
  std::array<int64_t, kMaxRanks> rem0{};
  st.load(p.rows.data() + i * p.stride, d0, rem0);
  const EvalPlan& plan = s.plan();
  bool any = false;
  // The bounds of chosen[0..d) with `rem` left, against every completion.
  auto check_one = [&](int d, const std::array<int64_t, kMaxRanks>& rem) {
    st.record_relaxed = true;
    st.per_keep_d = true;  // and per kept set of level d, as complete classifies a row
    const bool made = st.completion_bounds(d, rem);
    st.record_relaxed = false;
    st.per_keep_d = false;
    if (!made) return;
    any = true;
    const std::vector<State::OuterFanout> outer = *st.outer_last;
    const auto bounds = st.bounds;
    const std::vector<double> relaxed_energy = st.relaxed_energy, relaxed_cycles = st.relaxed_cycles;
    sink.report = [&](const CompactCost& cost, int k) {
      check(cost, bounds[static_cast<size_t>(k)].energy, bounds[static_cast<size_t>(k)].cycles);
      if (!relaxed_energy.empty()) {  // the bound for every fan-out at once, of the lane's kept set
        const size_t j = static_cast<size_t>(k) / outer.size();
        check(cost, relaxed_energy[j], relaxed_cycles[j]);
      }
    };
    sink.match = [&](const TileCandidate& cand) {
      State::OuterFanout o;
      o.irr.fill(1);
      o.mc.fill(1);
      o.temporal = rem;
      double above = 1;
      for (int l = s.L - 1; l >= d; --l) {
        o.inst[l] = above;
        for (int axis = 0; axis < 2; ++axis) {
          const LoopKind k = axis == 0 ? LoopKind::SpatialX : LoopKind::SpatialY;
          const RoleMask multicast = axis == 0 ? plan.levels[l].multicast_x : plan.levels[l].multicast_y;
          for (int r = 0; r < s.R; ++r) {
            const int64_t f = cand.factor(l, k, r);
            if (f == 1) continue;
            above *= static_cast<double>(f);
            o.temporal[r] /= f;
            for (int t = 0; t < s.T; ++t) {
              if (plan.tensors[t].relevant_ranks >> r & 1) continue;
              o.irr[t] *= static_cast<double>(f);
              if (multicast & role_bit(plan.tensors[t].role)) o.mc[t] *= static_cast<double>(f);
            }
          }
        }
      }
      o.used = above;
      for (size_t k = 0; k < outer.size(); ++k) {
        const State::OuterFanout& q = outer[k];
        bool same = q.used == o.used && q.temporal == o.temporal;
        for (int t = 0; t < s.T && same; ++t) same = q.irr[t] == o.irr[t] && q.mc[t] == o.mc[t];
        for (int l = d; l < s.L && same; ++l) same = q.inst[l] == o.inst[l];
        if (!same) continue;
        // Bounds come per kept set at b and at d (if any), each with one per fan-out in `outer` order.
        for (size_t j = k; j < bounds.size(); j += outer.size())
          if ((!bounds[j].by_keep || bounds[j].kept_b == (*cand.keep)[s.spec_.backing_level]) &&
              (!bounds[j].by_keep_d || bounds[j].kept_d == (*cand.keep)[d]))
            return static_cast<int>(j);
      }
      return -1;
    };
    st.fixed_levels = d;
    st.descend(d, rem);
    st.flush_all();
  };
  if (!level_more) check_one(d0, rem0);
  else st.each_choice(d0, rem0, [&](const std::array<int64_t, kMaxRanks>& rest) { check_one(d0 + 1, rest); });
  st.fixed_levels = 0;
  st.sink = nullptr;
  st.s = nullptr;
  return any;
}

namespace {

// check_classification: a front of one point at `threshold` pJ (and no time, no words).
struct ThresholdSink final : TileSink {
  double threshold = 0;
  std::function<void(const TileCandidate&, const CompactCost&)> each;
  void consume(const TileCandidate& cand, const CompactCost& cost) override {
    if (cost.invalid != Invalid::None && cost.invalid != Invalid::CapacityExceeded) return;
    each(cand, cost);
  }
  bool beaten(double energy_pj, double /*cycles*/, int /*level*/, int64_t /*words*/) override {
    return energy_pj > threshold;
  }
};

}  // namespace

bool TileWorker::check_classification(const TileSearch& s, const PartialChoices& p, size_t i, double threshold,
                                      const ClassCheck& check, bool level_more) {
  State& st = *st_;
  ThresholdSink sink;
  sink.threshold = threshold;
  st.bind(s, &sink);
  st.pstride = p.stride;
  const int d0 = p.levels;
  std::array<int64_t, kMaxRanks> rem0{};
  st.load(p.rows.data() + i * p.stride, d0, rem0);
  bool any = false;
  // Classifies chosen[0..d) as complete() does (the top level's choices when `top`), then
  // completes it with nothing skipped and reports each lane with the verdict for its choice of
  // level d.
  auto run = [&](int d, const std::array<int64_t, kMaxRanks>& rem, bool top) {
    bool all = false;
    if (top) {
      all = !st.classify_top(d, rem);
    } else {
      st.force_keep_d = true;
      const bool made = st.classify_fanouts(d, rem, all);
      st.force_keep_d = false;
      if (!made) return;
    }
    any = true;
    sink.each = [&](const TileCandidate& cand, const CompactCost& cost) {
      LevelChoice ch;
      for (int r = 0; r < s.R; ++r) {
        ch.x[r] = cand.factor(d, LoopKind::SpatialX, r);
        ch.y[r] = cand.factor(d, LoopKind::SpatialY, r);
      }
      const TensorMask keep = (*cand.keep)[d];
      const bool skipped = all || (top ? st.top_beaten(ch, keep) : st.fanout_beaten(ch) || st.keep_beaten(ch, keep));
      check(cost, skipped);
    };
    st.fixed_levels = d;
    st.descend(d, rem);
    st.flush_all();
  };
  if (!level_more) run(d0, rem0, false);
  else if (d0 + 1 == s.top)
    st.each_choice(d0, rem0, [&](const std::array<int64_t, kMaxRanks>& rest) { run(d0 + 1, rest, true); });
  st.fixed_levels = 0;
  st.sink = nullptr;
  st.s = nullptr;
  return any;
}

TileWorker::TileWorker() : st_(std::make_unique<State>()) { st_->owner = this; }
TileWorker::~TileWorker() = default;

void TileWorker::prune(const TileSearch& s, PartialChoices& out) {
  if (!s.partial_pruning()) throw std::logic_error("TileWorker::prune: the search has no partial pruning");
  st_->bind(s, nullptr);
  out = {};
  if (!s.over()) st_->prune_levels(out);
}

void TileWorker::complete(const TileSearch& s, const PartialChoices& p, size_t begin, size_t end, TileSink& sink) {
  st_->bind(s, &sink);
  if (!s.over()) st_->complete(p, begin, std::min(end, p.size()));
}

void TileWorker::run(const TileSearch& s, size_t i, TileSink& sink) {
  State& st = *st_;
  st.bind(s, &sink);
  if (s.over()) return;
  const LevelChoice& root = s.roots_[i];
  st.chosen[0] = root;
  if (s.spec_.prune && !s.fits(st.chosen.data(), 0)) {
    ++pruned;
    return;
  }
  std::array<int64_t, kMaxRanks> rest{};
  for (int r = 0; r < s.R; ++r) rest[r] = s.e_.ranks[r].size / (root.t[r] * root.x[r] * root.y[r]);
  if (s.spec_.bound_scalar && st.bound_beaten(0, rest)) {
    ++bound_pruned[0];
    return;
  }
  st.descend(1, rest);
}

void TileWorker::finish() {
  if (st_->s) st_->flush_all();
}

}  // namespace mapfuse
