// TileSearch: one Einsum's mapspace on one core worked out once (divisor tables, temporal factor
// bounds from the constraints, kept-set choices per level, the energy tables branch and bound
// uses, what merged supports and partial pruning may do) and the roots the workers start from;
// TileCandidate: an evaluated lane turned into a Mapping or a tie-break key.
#include <algorithm>
#include <cmath>
#include <bit>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>

#include "engine/common/error.hpp"
#include "engine/search/tile_search/tile_search.hpp"

namespace mapfuse {
namespace {

// Distinct values of tensor t that compute touches: per dimension, the distinct sums of its
// terms (one term: the rank's size; a sliding window s*p + r: all (P-1)*s + R positions when
// the window is at least the stride, else P*R; other sums at least their largest term's size),
// multiplied over dimensions that share no rank. With a
// rank in two dimensions the values are a subset of that product: the largest dimension's count.
int64_t touched_values(const Einsum& e, int t) {
  const TensorAccess& ta = e.tensors[static_cast<size_t>(t)];
  int64_t product = 1, largest = 1;
  uint64_t seen = 0;
  bool shared = false;
  for (const Projection& p : ta.dims) {
    int64_t n = 1;
    if (p.size() == 1) {
      n = e.ranks[static_cast<size_t>(p[0].rank)].size;
    } else if (p.size() == 2 && p[0].rank == p[1].rank) {
      n = e.ranks[static_cast<size_t>(p[0].rank)].size;  // (a + b) * r: one value per r
    } else if (p.size() == 2) {
      int64_t s = p[0].coeff, P = e.ranks[static_cast<size_t>(p[0].rank)].size;
      int64_t c = p[1].coeff, Q = e.ranks[static_cast<size_t>(p[1].rank)].size;
      if (s < c) std::swap(s, c), std::swap(P, Q);
      if (c == 1 && s <= Q) n = (P - 1) * s + Q;          // windows overlap or touch
      else if (c == 1 && s > Q) n = P * Q;                // windows leave gaps
      else n = std::max(P, Q);
    } else {
      for (const ProjectionTerm& term : p) n = std::max(n, e.ranks[static_cast<size_t>(term.rank)].size);
    }
    for (const ProjectionTerm& term : p) {
      if (seen >> term.rank & 1) shared = true;
      seen |= uint64_t{1} << term.rank;
    }
    product *= n;
    largest = std::max(largest, n);
  }
  return shared ? largest : product;
}

}  // namespace

namespace {
uint64_t next_search_id() {
  static std::atomic<uint64_t> next{0};
  return next.fetch_add(1, std::memory_order_relaxed) + 1;
}
}  // namespace

TileSearch::TileSearch(const Einsum& e, const Core& core, const Mapspace& space, const TileSearchSpec& spec)
    : id_(next_search_id()), e_(e), c_(core_for(core, e)), space_(space), spec_(spec), plan_(compile_plan(e, core)) {
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
  // The most of each rank the levels above l can still take (temporal bound times the fan-outs
  // that may spread it), so that level l leaves no rest they cannot hold: with an on-chip operand
  // held whole at its home, no level above the home iterates its ranks, and without this every
  // factor split below would be enumerated only to find no choice at the top.
  for (int l = 0; l < L; ++l)
    for (int r = 0; r < R; ++r) {
      int64_t reach = 1;
      for (int m = l + 1; m <= top && m < L; ++m) {
        int64_t f = t_max[m][r];
        if (x_ok[m] >> r & 1) f *= c.levels[m].fanout.x;
        if (y_ok[m] >> r & 1) f *= c.levels[m].fanout.y;
        reach = std::min<int64_t>(int64_t{1} << 40, reach * f);
      }
      reach_above[l][r] = reach;
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
  // A kept set whose tiles cannot fit even at their smallest: each rank's extent over levels
  // 0..l is a divisor of its size that leaves at most reach_above[l][r] to the levels above, so
  // at least the least such divisor; the footprint only grows with the extents. Dropping such
  // sets is exact (every mapping with them overflows) and spares enumerating every inner choice
  // only to find the level full (Stream's per-tile problems: 20-50 M partial choices, 15-30 s, for
  // a whole FSRCNN layer whose on-chip input leaves no room for the output's tile).
  if (spec.prune)
    for (int l = 0; l < L - 1; ++l) {
      const Level& lv = c.levels[l];
      if (lv.entries == 0) continue;
      int64_t least[kMaxRanks];
      for (int r = 0; r < R; ++r) {
        const int64_t n = e.ranks[r].size;
        least[r] = n;
        for (int64_t d : divisors(n))
          if (n / d <= reach_above[l][r]) {
            least[r] = d;
            break;
          }
      }
      std::erase_if(keep_options[l], [&](TensorMask m) {
        int64_t words = 0;
        for (int t = 0; t < T; ++t) {
          if (!(m >> t & 1)) continue;
          int64_t v = 1;
          for (const auto& dim : e.tensors[t].dims) v *= Einsum::dim_extent(dim, least);
          words += v;
        }
        return words * lv.multiple_buffering > lv.entries;
      });
    }
  for (int l = 0; l < L; ++l) {
    const PlanLevel& lv = plan_.levels[static_cast<size_t>(l)];
    inv_bw_[static_cast<size_t>(l)] = {lv.read_bw > 0 ? 1 / lv.read_bw : 0, lv.write_bw > 0 ? 1 / lv.write_bw : 0,
                                       lv.shared_bw > 0 ? 1 / lv.shared_bw : 0};
    for (int t = 0; t < T; ++t)
      serve_pj[l][t] = t == plan_.output ? plan_.levels[l].update_pj : plan_.levels[l].read_pj;
    must_keep_at[l] = static_cast<TensorMask>(~TensorMask{0});
    for (TensorMask k : keep_options[l]) may_keep_at[l] |= k, must_keep_at[l] &= k;
    if (keep_options[l].empty()) must_keep_at[l] = 0;
  }
  for (int l = L - 1; l >= 0; --l) {
    if (l == L - 1) {
      fanout_above[l] = 1;
    } else {
      const PlanLevel& up = plan_.levels[l + 1];
      fanout_above[l] = std::min<int64_t>(int64_t{1} << 40, fanout_above[l + 1] * up.fanout_x * up.fanout_y);
    }
    for (int t = 0; t < T; ++t)
      for (int m = l + 1; m < L; ++m) {
        if (may_keep_at[m] >> t & 1) may_keep_above[l] |= static_cast<TensorMask>(1u << t);
        if (must_keep_at[m] >> t & 1) break;  // the next level keeping t is no further out
      }
  }
  keep_sets_.may = may_keep_at;
  keep_sets_.must = must_keep_at;
  keep_sets_.above = may_keep_above;
  if (plan_.output >= 0)
    reduction_ranks_ = ~static_cast<uint32_t>(plan_.tensors[static_cast<size_t>(plan_.output)].relevant_ranks) & ((1u << R) - 1);
  for (int t = 0; t < T; ++t) {
    touched_[t] = static_cast<double>(touched_values(e, t));
    const PlanTensor& pt = plan_.tensors[static_cast<size_t>(t)];
    uint32_t seen = 0;
    bool disjoint = true;
    for (int d = 0; d < pt.n_dims; ++d) {
      if (pt.plain_rank[d] >= 0) plain_ranks_[t] |= 1u << pt.plain_rank[d];
      else window_tensors_ |= 1u << t;
      for (int i = 0; i < pt.dims[d].n_terms; ++i) {
        const PlanTerm& term = pt.dims[d].terms[i];
        if (term.coeff == 0) continue;
        disjoint = disjoint && term.coeff > 0 && !(seen >> term.rank & 1);
        seen |= 1u << term.rank;
      }
    }
    if ((window_tensors_ >> t & 1) && disjoint) window_disjoint_ |= 1u << t;
    if (!(window_tensors_ >> t & 1)) continue;
    // Loops over the ranks of one dimension of t at one level take at least as many distinct
    // offsets as the largest of them alone (|A + B| >= |A| + |B| - 1): only a loop beside another
    // on the same dimension (or over a rank in several dimensions) can share values.
    for (int l = 0; l < L; ++l) {
      const uint32_t any = x_ok[l] | y_ok[l];
      for (int axis = 0; axis < 2; ++axis) {
        const uint32_t ok = axis == 0 ? x_ok[l] : y_ok[l], other = axis == 0 ? y_ok[l] : x_ok[l];
        bool shares = false;
        for (int r = 0; r < R && !shares; ++r) {
          if (!(ok >> r & 1) || pt.rank_terms[r] == 0 || e.ranks[static_cast<size_t>(r)].size <= 1) continue;
          if (pt.rank_terms[r] > 1 || (other >> r & 1)) {
            shares = true;
            break;
          }
          const int d = pt.rank_dim[r][0];
          for (int r2 = 0; r2 < R && !shares; ++r2)
            shares = r2 != r && (any >> r2 & 1) && e.ranks[static_cast<size_t>(r2)].size > 1 && pt.rank_terms[r2] > 0 &&
                     (pt.rank_terms[r2] > 1 || pt.rank_dim[r2][0] == d);
        }
        if (shares) window_axes_[static_cast<size_t>(l)][static_cast<size_t>(t)] |= static_cast<uint8_t>(1u << axis);
      }
    }
  }
  make_spread_tables();
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
  // A level with no kept set left (none fits, or the constraints allow none): no mapping, no root.
  for (int l = 0; l < L; ++l)
    if (keep_options[l].empty()) {
      partial_ = false;
      return;
    }
  // Partial pruning has its own bounds (the rows' completions) and enumerates without roots; the
  // per-level scalar bounds would find no bounds made for the choices it parks.
  if (partial_) spec_.bound_scalar = false;
  if (partial_) return;  // enumerated level by level from nothing (TileWorker::prune), not from roots
  if (spec.break_symmetry) find_mirror();
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

void TileSearch::find_mirror() {
  // Only where nothing but the Einsum and the core shape the mapspace: no constraint, no backing
  // or fused context (their tiles are not mirror images), the whole Einsum from the top.
  if (spec_.onchip_backing || spec_.backing_level >= 0 || top != L - 1 || spec_.rest_tiles > 0 || lanes_level >= 0)
    return;
  for (const LevelConstraints& lc : space_.levels)
    if (!(lc == LevelConstraints{})) return;
  // A swap of disjoint pairs of equal-size ranks that maps every tensor's dimensions onto its own
  // (each dimension's terms, ranks swapped, are another of its dimensions) and every level's
  // spatial ranks onto themselves: the model then counts a mapping and its mirror alike (every
  // count is a product or a sum over dimensions and loops, which the swap only relabels).
  auto valid = [&](const std::array<int, kMaxRanks>& pi) {
    for (const TensorAccess& ta : e_.tensors) {
      std::vector<std::vector<std::pair<int, int64_t>>> dims, mapped;
      for (const Projection& p : ta.dims) {
        std::vector<std::pair<int, int64_t>> d, m;
        for (const ProjectionTerm& term : p) {
          d.emplace_back(term.rank, term.coeff);
          m.emplace_back(pi[static_cast<size_t>(term.rank)], term.coeff);
        }
        std::sort(d.begin(), d.end());
        std::sort(m.begin(), m.end());
        dims.push_back(std::move(d));
        mapped.push_back(std::move(m));
      }
      std::sort(dims.begin(), dims.end());
      std::sort(mapped.begin(), mapped.end());
      if (dims != mapped) return false;
    }
    for (int l = 0; l < L; ++l)
      for (int r = 0; r < R; ++r) {
        const int q = pi[static_cast<size_t>(r)];
        if ((x_ok[l] >> r & 1) != (x_ok[l] >> q & 1) || (y_ok[l] >> r & 1) != (y_ok[l] >> q & 1)) return false;
        if (t_min[l][r] != t_min[l][q] || t_max[l][r] != t_max[l][q]) return false;
      }
    return true;
  };
  // Every matching of equal-size ranks (at most 8 ranks: a few hundred), the one with the most
  // pairs that is valid.
  std::array<int, kMaxRanks> pi{}, best{};
  for (int r = 0; r < R; ++r) pi[static_cast<size_t>(r)] = r;
  int best_pairs = 0;
  auto rec = [&](auto&& self, int r, int pairs) -> void {
    if (r == R) {
      if (pairs > best_pairs && valid(pi)) best_pairs = pairs, best = pi;
      return;
    }
    if (pi[static_cast<size_t>(r)] != r) return self(self, r + 1, pairs);  // paired already
    self(self, r + 1, pairs);
    for (int q = r + 1; q < R; ++q) {
      if (pi[static_cast<size_t>(q)] != q || e_.ranks[static_cast<size_t>(q)].size != e_.ranks[static_cast<size_t>(r)].size)
        continue;
      pi[static_cast<size_t>(r)] = q, pi[static_cast<size_t>(q)] = r;
      self(self, r + 1, pairs + 1);
      pi[static_cast<size_t>(r)] = r, pi[static_cast<size_t>(q)] = q;
    }
  };
  rec(rec, 0, 0);
  for (int r = 0; r < R; ++r)
    if (best_pairs > 0 && best[static_cast<size_t>(r)] > r) mirror_pairs_.emplace_back(r, best[static_cast<size_t>(r)]);
}

Mapping TileSearch::mirrored(const Mapping& m) const {
  std::array<int, kMaxRanks> pi{};
  for (int r = 0; r < R; ++r) pi[static_cast<size_t>(r)] = r;
  for (const auto& [a, b] : mirror_pairs_) pi[static_cast<size_t>(a)] = b, pi[static_cast<size_t>(b)] = a;
  Mapping out = m;
  for (LevelMapping& lm : out.levels) {
    for (Loop& lp : lm.loops) lp.rank = pi[static_cast<size_t>(lp.rank)];
    // Temporal loops keep their (mirrored) order; spatial loops go by kind, then rank.
    std::stable_sort(lm.loops.begin(), lm.loops.end(), [](const Loop& a, const Loop& b) {
      if (a.kind != b.kind) return static_cast<int>(a.kind) < static_cast<int>(b.kind);
      return a.kind != LoopKind::Temporal && a.rank < b.rank;
    });
  }
  return out;
}

void TileSearch::root_bounds(size_t i, double& energy, double& cycles) const {
  const LevelChoice& root = roots_[i];
  std::array<int64_t, kMaxRanks> rest{};
  for (int r = 0; r < R; ++r) rest[r] = e_.ranks[r].size / (root.t[r] * root.x[r] * root.y[r]);
  scalar_bounds(&root, 0, rest, energy, cycles);
}

std::vector<size_t> TileSearch::roots_best_first(const TileSink& sink) const {
  std::vector<std::array<double, 3>> key(roots_.size());
  for (size_t i = 0; i < roots_.size(); ++i) {
    double energy = 0, cycles = 0;
    root_bounds(i, energy, cycles);
    key[i] = {sink.priority(energy, cycles), energy, cycles};
  }
  std::vector<size_t> order(roots_.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return key[a] < key[b]; });
  return order;
}

void TileSearch::make_spread_tables() {
  // The best use of a level's fan-out is a small knapsack over divisors (a 14x12 array with 16
  // output channels and 64 input channels left uses at most 8x8); the lower bounds of branch and
  // bound take it instead of the whole fan-out, so that compute steps are not underestimated
  // 2-3x on arrays that the ranks cannot fill.
  constexpr size_t kMaxEntries = size_t{1} << 14;
  for (int m = 0; m <= top && m < L; ++m) {
    SpreadTable& st = spread_table[static_cast<size_t>(m)];
    const int64_t fx = c_.levels[static_cast<size_t>(m)].fanout.x, fy = c_.levels[static_cast<size_t>(m)].fanout.y;
    if (fx * fy <= 1) continue;
    size_t entries = 1;
    for (int r = 0; r < R; ++r)
      if (((x_ok[m] | y_ok[m]) >> r & 1) && e_.ranks[r].size > 1) {
        st.ranks.push_back(r);
        st.stride.push_back(entries);
        entries *= divs(e_.ranks[r].size).size();
      }
    if (st.ranks.empty() || entries > kMaxEntries) {
      st = {};
      continue;
    }
    st.most.assign(entries, 1);
    const size_t n = st.ranks.size();
    std::vector<int64_t> left(n);
    for (size_t i = 0; i < entries; ++i) {
      for (size_t k = 0; k < n; ++k) {
        const std::vector<int64_t>& d = divs(e_.ranks[static_cast<size_t>(st.ranks[k])].size);
        left[k] = d[i / st.stride[k] % d.size()];
      }
      double best = 1;
      // Rank by rank: a factor on x, then one on y, dividing what is left of the rank.
      auto rec = [&](auto&& self, size_t k, int64_t ux, int64_t uy) -> void {
        if (k == n) {
          best = std::max(best, static_cast<double>(ux * uy));
          return;
        }
        const int r = st.ranks[k];
        for (int64_t sx : divs(left[k])) {
          if (sx > 1 && (!(x_ok[m] >> r & 1) || ux * sx > fx)) break;
          for (int64_t sy : divs(left[k] / sx)) {
            if (sy > 1 && (!(y_ok[m] >> r & 1) || uy * sy > fy)) break;
            self(self, k + 1, ux * sx, uy * sy);
          }
        }
      };
      rec(rec, 0, 1, 1);
      st.most[i] = best;
    }
  }
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

}  // namespace mapfuse
