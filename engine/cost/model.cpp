#include "engine/cost/model.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <vector>

namespace mapfuse {
namespace {

using DimVec = std::array<int64_t, kMaxTensorDims>;
using u128 = unsigned __int128;

inline bool equal(const DimVec& a, const DimVec& b) {
  bool eq = true;
  for (int d = 0; d < kMaxTensorDims; ++d) eq &= a[d] == b[d];
  return eq;
}

// Per-evaluation quantities derived from the factors.
struct Work {
  int64_t stride[kMaxLoops];                    // extent of loop i's rank over the loops inside it
  int64_t ext[kMaxLevels][kMaxRanks + 1];       // rank extents of each level's tile (+ pad slot)
  int64_t steps[kMaxLoops];                     // per temporal loop j: (f - 1) * outer iterations
  int64_t iterations_before[kMaxLoops + 1];     // per temporal loop j: product of outer factors
  int64_t instances[kMaxLevels];
};

// --- Refills: Timeloop's temporal delta analysis in closed form. ---------------------------------
// Timeloop visits, for every temporal loop above a tile, only its first and second iteration and
// weights the second by (factor - 1); consecutive visits differ by a step of one loop with every
// loop inside it moved back by one step. A visit reuses the overlap with the previous tile only
// while the translation equals the one the innermost loop established (its "same-stride" rule);
// otherwise the whole tile is fetched again. Replaying that visit order gives
//   fills = V * prod(f) - (V - new(T_in)) * (steps of the loops whose translation equals T_in)
// with new(T) the part of a tile not covered by its copy moved by -T. Loops of factor 1 are no
// loops (Timeloop drops them).
//
// With P_j the sum of the steps of the temporal loops outside loop j, a step of loop j moves the
// tile of a level under `above` loops by T_j = P_j + 2 step_j - P_above, and T_in = P_above - P_in,
// so T_j == T_in  <=>  A_j == B with A_j = P_j + 2 step_j (per tensor) and B = 2 P_above - P_in
// (per level). PlanTensor::packing makes these vectors exact 64- or 128-bit words.
template <class Key>
struct PackedSteps {
  Key a[kMaxLoops];
  Key prefix[kMaxLoops + 1];
};

template <class Key>
inline void pack_steps(const PlanTensor& t, const NestStructure& s, const int64_t* f, const Work& w,
                       PackedSteps<Key>& ps) {
  const auto& keys = [&]() -> const auto& {
    if constexpr (sizeof(Key) == 8) return t.key64;
    else return t.key128;
  }();
  Key sum = 0;
  for (int j = 0; j < s.n_temporal; ++j) {
    const int i = s.temporal[j];
    ps.prefix[j] = sum;
    ps.a[j] = sum;  // a loop over a rank the tensor does not index moves nothing
    if (f[i] == 1 || t.rank_terms[s.rank[i]] == 0) continue;  // (factor 1: no loop, steps 0)
    const Key step = keys[s.rank[i]] * static_cast<uint64_t>(w.stride[i]);
    ps.a[j] = sum + 2 * step;
    sum += step;
  }
  ps.prefix[s.n_temporal] = sum;
}

// new(T_in) for the innermost loop `i` above the tile: it moves only the dimensions its rank
// indexes.
inline int64_t fresh_after_step(const PlanTensor& t, const DimVec& extent, int64_t vol, int rank,
                                int64_t stride) {
  DimVec shift{};
  for (int k = 0; k < t.rank_terms[rank]; ++k) shift[t.rank_dim[rank][k]] = t.rank_coeff[rank][k] * stride;
  int64_t overlap = 1;
  for (int d = 0; d < kMaxTensorDims; ++d) overlap *= std::max<int64_t>(0, extent[d] - shift[d]);
  return vol - overlap;
}

// The innermost temporal loop (index into s.temporal) among the first `above` that is a real
// loop (factor > 1), or -1.
inline int innermost_step(const NestStructure& s, const int64_t* f, int above) {
  int inner = above - 1;
  while (inner >= 0 && f[s.temporal[inner]] == 1) --inner;
  return inner;
}

template <class Key>
inline int64_t refill_packed(const PlanTensor& t, const DimVec& extent, int64_t vol,
                             const NestStructure& s, const int64_t* f, const Work& w,
                             const PackedSteps<Key>& ps, int level) {
  const int above = s.temporal_above[level];
  const int inner = innermost_step(s, f, above);
  if (inner < 0) return vol;
  const int ii = s.temporal[inner];
  const int64_t fresh_in = fresh_after_step(t, extent, vol, s.rank[ii], w.stride[ii]);
  const Key b = 2 * ps.prefix[above] - ps.prefix[inner];
  int64_t same_steps = 0;
  for (int j = 0; j <= inner; ++j) same_steps += ps.a[j] == b ? w.steps[j] : 0;
  return vol * w.iterations_before[above] - (vol - fresh_in) * same_steps;
}

// The same without packing (a tensor too large for exact packed keys): explicit vectors.
int64_t refill_vectors(const PlanTensor& t, const DimVec& extent, int64_t vol, const NestStructure& s,
                       const int64_t* f, const Work& w, int level) {
  const int above = s.temporal_above[level];
  const int inner = innermost_step(s, f, above);
  if (inner < 0) return vol;
  const int ii = s.temporal[inner];
  const int64_t fresh_in = fresh_after_step(t, extent, vol, s.rank[ii], w.stride[ii]);
  DimVec t_in{}, rewind{};
  for (int k = 0; k < t.rank_terms[s.rank[ii]]; ++k) {
    t_in[t.rank_dim[s.rank[ii]][k]] = t.rank_coeff[s.rank[ii]][k] * w.stride[ii];
    rewind[t.rank_dim[s.rank[ii]][k]] = -t_in[t.rank_dim[s.rank[ii]][k]];
  }
  int64_t same_steps = w.steps[inner];
  for (int j = inner - 1; j >= 0; --j) {
    const int i = s.temporal[j];
    if (f[i] == 1) continue;
    DimVec t_j = rewind;
    for (int k = 0; k < t.rank_terms[s.rank[i]]; ++k) {
      const int64_t step = t.rank_coeff[s.rank[i]][k] * w.stride[i];
      t_j[t.rank_dim[s.rank[i]][k]] += step;
      rewind[t.rank_dim[s.rank[i]][k]] -= step;
    }
    if (equal(t_j, t_in)) same_steps += w.steps[j];
  }
  return vol * w.iterations_before[above] - (vol - fresh_in) * same_steps;
}

// --- Multicast groups. -------------------------------------------------------------------------
// Instances whose tiles start at the same point of the tensor share one transfer (multicast of
// inputs, spatial reduction of outputs); Timeloop compares the start points, so partly
// overlapping windows still count separately. It counts the groups of each fan-out on its own and
// multiplies them across bypassed levels.

// Distinct values of sum_s w_s * i_s over 0 <= i_s < f_s.
int64_t distinct_sums(const int64_t* w, const int64_t* f, int k) {
  if (k == 1) return f[0];
  if (k == 2) {
    // a*i + b*j repeats exactly when (i, j) -> (i - b', j + a') stays in range, with a', b' the
    // weights divided by their gcd.
    const int64_t gcd = std::gcd(w[0], w[1]);
    const int64_t a = w[0] / gcd, b = w[1] / gcd;
    return f[0] * f[1] - std::max<int64_t>(0, f[0] - b) * std::max<int64_t>(0, f[1] - a);
  }
  std::vector<int64_t> values{0};
  for (int q = 0; q < k; ++q) {
    const size_t size = values.size();
    for (int64_t i = 1; i < f[q]; ++i)
      for (size_t v = 0; v < size; ++v) values.push_back(values[v] + i * w[q]);
    std::sort(values.begin(), values.end());
    values.erase(std::unique(values.begin(), values.end()), values.end());
  }
  return static_cast<int64_t>(values.size());
}

// General case (a rank in several dimensions of one tensor): enumerate start points.
int64_t distinct_points(const PlanTensor& t, const NestStructure& s, const int64_t* f, const Work& w,
                        const std::vector<int>& loops) {
  std::vector<int64_t> idx(loops.size(), 0), points;
  while (true) {
    int64_t off[kMaxRanks + 1] = {};
    for (size_t q = 0; q < loops.size(); ++q) off[s.rank[loops[q]]] += idx[q] * w.stride[loops[q]];
    for (int d = 0; d < t.n_dims; ++d) {
      int64_t o = 0;
      for (int k = 0; k < kMaxTerms; ++k) o += t.dims[d].terms[k].coeff * off[t.dims[d].terms[k].rank];
      points.push_back(o);
    }
    size_t q = 0;
    while (q < loops.size() && ++idx[q] == f[loops[q]]) idx[q++] = 0;
    if (q == loops.size()) break;
  }
  const size_t D = static_cast<size_t>(t.n_dims);
  std::vector<size_t> order(points.size() / D);
  std::iota(order.begin(), order.end(), size_t{0});
  auto less = [&](size_t a, size_t b) {
    return std::lexicographical_compare(points.begin() + a * D, points.begin() + (a + 1) * D,
                                        points.begin() + b * D, points.begin() + (b + 1) * D);
  };
  std::sort(order.begin(), order.end(), less);
  int64_t distinct = order.empty() ? 0 : 1;
  for (size_t i = 1; i < order.size(); ++i) distinct += less(order[i - 1], order[i]);
  return distinct;
}

int64_t groups_general(const PlanTensor& t, const NestStructure& s, const int64_t* f, const Work& w,
                       uint64_t between) {
  int64_t groups = 1;
  for (int lv = 0; lv < s.n_levels; ++lv) {
    int hits[kMaxTensorDims] = {};
    int64_t wt[kMaxTensorDims][kMaxLoops], ft[kMaxTensorDims][kMaxLoops];
    std::vector<int> several;
    bool general = false;
    for (uint64_t m = between; m; m &= m - 1) {
      const int i = std::countr_zero(m);
      if (s.level[i] != lv) continue;
      several.push_back(i);
      if (t.rank_terms[s.rank[i]] != 1) {
        general = true;
        continue;
      }
      const int d = t.rank_dim[s.rank[i]][0];
      wt[d][hits[d]] = t.rank_coeff[s.rank[i]][0] * w.stride[i];
      ft[d][hits[d]] = f[i];
      ++hits[d];
    }
    if (several.empty()) continue;
    if (general) {
      groups *= distinct_points(t, s, f, w, several);
      continue;
    }
    for (int d = 0; d < t.n_dims; ++d)
      if (hits[d] > 0) groups *= distinct_sums(wt[d], ft[d], hits[d]);
  }
  return groups;
}

}  // namespace

std::string_view to_string(Invalid k) {
  switch (k) {
    case Invalid::None: return "valid";
    case Invalid::LevelCount: return "level count differs from the architecture";
    case Invalid::FactorProduct: return "factors do not multiply to the rank size";
    case Invalid::FanoutExceeded: return "spatial fan-out exceeded";
    case Invalid::KeepNotAllowed: return "tensor kept where the level may not hold it";
    case Invalid::BackingMissing: return "outermost level does not keep every tensor";
    case Invalid::CapacityExceeded: return "capacity exceeded";
    case Invalid::KeepMissing: return "a level does not keep a tensor it must keep";
    case Invalid::FanoutUnderused: return "spatial fan-out used below its minimum";
  }
  return "?";
}

// --- Structure. --------------------------------------------------------------------------------
// Level l's loops iterate over the tiles of the inner levels while its buffer holds their union,
// so its tile spans its own loops and every inner one, and the temporal loops of outer levels
// decide what it is refilled with. Spatial loops of level l fan out into level l-1.
NestStructure analyze(const EvalPlan& p, const FlatMapping& m) {
  NestStructure s;
  const int L = p.n_levels, T = p.n_tensors, n = m.n_loops;
  s.n = static_cast<int8_t>(n);
  s.n_levels = static_cast<int8_t>(L);
  if (m.n_levels != L) {
    s.structural = Invalid::LevelCount;
    return s;
  }
  int level = L;
  for (int i = 0; i < n; ++i) {
    const FlatLoop& lp = m.loops[i];
    s.rank[i] = lp.rank;
    s.level[i] = lp.level;
    s.kind[i] = lp.kind;
    while (level > lp.level) s.boundary[--level] = static_cast<int8_t>(i);
    if (lp.kind == LoopKind::Temporal) s.temporal[s.n_temporal++] = static_cast<int8_t>(i);
    else if (lp.kind == LoopKind::SpatialX) s.spatial_x[lp.level] |= uint64_t{1} << i;
    else s.spatial_y[lp.level] |= uint64_t{1} << i;
  }
  while (level > 0) s.boundary[--level] = static_cast<int8_t>(n);
  for (int l = 0, j = 0; l < L; ++l) {
    j = 0;
    while (j < s.n_temporal && s.temporal[j] < s.boundary[l]) ++j;
    s.temporal_above[l] = static_cast<int8_t>(j);
  }
  for (int l = 0; l < L; ++l) s.keep[l] = m.keep[l];
  // Keep rules, reported (like fan-out) from the outermost level inwards.
  for (int l = L - 1; l >= 0 && s.structural == Invalid::None; --l)
    for (int t = 0; t < T; ++t)
      if ((m.keep[l] >> t & 1) && !(p.levels[l].may_keep & role_bit(p.tensors[t].role))) {
        s.structural = Invalid::KeepNotAllowed;
        s.structural_level = static_cast<int8_t>(l);
        break;
      }
  // Must-keep rules: every level below the outermost holds the roles it must, except above the
  // level an on-chip tensor is backed at (nothing is kept between it and DRAM).
  for (int l = L - 2; l >= 0 && s.structural == Invalid::None; --l) {
    if (!p.levels[l].must_keep) continue;
    for (int t = 0; t < T; ++t) {
      if ((m.keep[l] >> t & 1) || !(p.levels[l].must_keep & role_bit(p.tensors[t].role))) continue;
      if (m.onchip_backing >> t & 1) {
        int backing = -1;
        for (int k = 0; k < L; ++k)
          if (m.keep[k] >> t & 1) backing = k;
        if (l > backing) continue;
      }
      s.structural = Invalid::KeepMissing;
      s.structural_level = static_cast<int8_t>(l);
      break;
    }
  }
  if (s.structural == Invalid::None)
    for (int t = 0; t < T; ++t)
      if (!(m.keep[L - 1] >> t & 1) && !(m.onchip_backing >> t & 1)) {
        s.structural = Invalid::BackingMissing;
        s.structural_level = static_cast<int8_t>(L - 1);
      }
  // Loop index ranges as bit masks: loops [lo, hi).
  auto range = [](int lo, int hi) -> uint64_t {
    const uint64_t below_hi = hi >= 64 ? ~uint64_t{0} : (uint64_t{1} << hi) - 1;
    const uint64_t below_lo = lo >= 64 ? ~uint64_t{0} : (uint64_t{1} << lo) - 1;
    return below_hi & ~below_lo;
  };
  for (int t = 0; t < T; ++t) {
    const PlanTensor& pt = p.tensors[t];
    // Spatial loops over ranks this tensor indexes; levels where two of them move one dimension
    // (or one moves several), which need the exact group count instead of a product.
    uint64_t relevant = 0, replicated = 0;
    uint8_t crowded = 0;  // bit l
    for (int i = 0; i < n; ++i) {
      if (s.kind[i] == LoopKind::Temporal || pt.rank_terms[s.rank[i]] != 0) continue;
      const RoleMask mc = s.kind[i] == LoopKind::SpatialX ? p.levels[s.level[i]].multicast_x : p.levels[s.level[i]].multicast_y;
      if (!(mc & role_bit(pt.role))) replicated |= uint64_t{1} << i;
    }
    {
      uint8_t seen[kMaxLevels][kMaxTensorDims] = {};
      for (int i = 0; i < n; ++i) {
        if (s.kind[i] == LoopKind::Temporal || pt.rank_terms[s.rank[i]] == 0) continue;
        relevant |= uint64_t{1} << i;
        if (pt.rank_terms[s.rank[i]] != 1 || ++seen[s.level[i]][pt.rank_dim[s.rank[i]][0]] > 1)
          crowded |= static_cast<uint8_t>(1u << s.level[i]);
      }
    }
    // The backing store: the outermost level keeping the tensor (the outermost level itself unless
    // the tensor is backed on chip).
    int top = -1;
    for (int l = 0; l < L; ++l)
      if (m.keep[l] >> t & 1) top = l;
    int child = -1;
    for (int l = 0; l < L; ++l) {
      if (!(m.keep[l] >> t & 1)) continue;
      const int child_begin = child < 0 ? n : s.boundary[child];
      const uint8_t levels_between = static_cast<uint8_t>(((1u << (l + 1)) - 1) & ~((1u << (child + 1)) - 1));
      NestStructure::Pair pr{static_cast<int8_t>(t), static_cast<int8_t>(l), static_cast<int8_t>(child),
                             pt.role == TensorRole::Output, l == top, (crowded & levels_between) == 0,
                             relevant & range(s.boundary[l], child_begin), relevant & range(0, s.boundary[l]),
                             replicated & range(s.boundary[l], child_begin)};
      if (l < top) s.refilled |= static_cast<uint8_t>(1u << t);
      s.pairs[s.n_pairs++] = pr;
      child = l;
    }
  }
  return s;
}

// --- Arithmetic. -------------------------------------------------------------------------------
CompactCost evaluate(const EvalPlan& p, const NestStructure& s, const int64_t* f, CostResult* full) {
  const int R = p.n_ranks, T = p.n_tensors, L = s.n_levels, n = s.n;
  CompactCost out;
  auto fail = [&](Invalid why, int level) {
    out.invalid = why;
    if (full) {
      full->invalid = why;
      full->invalid_level = static_cast<int8_t>(level);
      full->energy_pj = full->cycles = 0;
    }
    return out;
  };
  if (full) {
    CostResult& r = *full;
    r.invalid = Invalid::None;
    r.invalid_level = -1;
    r.operations = p.operations;
    for (int l = 0; l < L; ++l) {
      for (int t = 0; t < T; ++t) r.access[l][t] = {};
      r.level_energy_pj[l] = r.level_cycles[l] = 0;
      r.level_occupancy[l] = 0;
    }
  }
  if (s.structural == Invalid::LevelCount) return fail(Invalid::LevelCount, -1);

  Work w;
  {
    int64_t run[kMaxRanks + 1];
    std::fill_n(run, kMaxRanks + 1, int64_t{1});
    int end = n;
    for (int l = 0; l < L; ++l) {
      for (int i = end - 1; i >= s.boundary[l]; --i) {
        w.stride[i] = run[s.rank[i]];
        run[s.rank[i]] *= f[i];
      }
      end = s.boundary[l];
      std::copy_n(run, kMaxRanks + 1, w.ext[l]);
    }
    for (int r = 0; r < R; ++r)
      if (run[r] != p.rank_size[r]) return fail(Invalid::FactorProduct, -1);
  }
  int64_t used_compute = 1;
  for (int l = L - 1; l >= 0; --l) {
    int64_t fx = 1, fy = 1;
    for (uint64_t mask = s.spatial_x[l]; mask; mask &= mask - 1) fx *= f[std::countr_zero(mask)];
    for (uint64_t mask = s.spatial_y[l]; mask; mask &= mask - 1) fy *= f[std::countr_zero(mask)];
    if (fx > p.levels[l].fanout_x || fy > p.levels[l].fanout_y) return fail(Invalid::FanoutExceeded, l);
    if (fx < p.levels[l].min_x || fy < p.levels[l].min_y) return fail(Invalid::FanoutUnderused, l);
    if (s.structural == Invalid::KeepNotAllowed && s.structural_level == l) return fail(s.structural, l);
    w.instances[l] = used_compute;
    used_compute *= fx * fy;
  }
  if (s.structural != Invalid::None) return fail(s.structural, s.structural_level);
  {
    int64_t before = 1;
    for (int j = 0; j < s.n_temporal; ++j) {
      const int64_t fj = f[s.temporal[j]];
      w.iterations_before[j] = before;
      w.steps[j] = (fj - 1) * before;
      before *= fj;
    }
    w.iterations_before[s.n_temporal] = before;
  }
  const int64_t temporal_iterations = w.iterations_before[s.n_temporal];

  // Per (tensor, kept level), innermost first: tile, refills, and the traffic to the next inner
  // kept level (or compute), per instance.
  struct Counts {
    int64_t reads, fills, updates;
  };
  Counts per[kMaxLevels][kMaxTensors];
  int64_t occupancy[kMaxLevels] = {};
  int64_t child_fills = 0;
  PackedSteps<uint64_t> packed64;
  PackedSteps<u128> packed128;
  int packed_for = -1;
  for (int q = 0; q < s.n_pairs; ++q) {
    const NestStructure::Pair& pr = s.pairs[q];
    const int t = pr.tensor, l = pr.level;
    const PlanTensor& pt = p.tensors[t];
    if (pr.child < 0) child_fills = temporal_iterations;  // compute takes a value per operation
    DimVec extent;
    extent.fill(1);
    int64_t vol = 1;
    for (int d = 0; d < pt.n_dims; ++d) {
      const int r = pt.plain_rank[d];
      vol *= extent[d] = r >= 0 ? w.ext[l][r] : dim_extent(pt.dims[d], w.ext[l]);
    }
    occupancy[l] += vol;
    int64_t fills = 0;
    if (!pr.backing) {
      if (pt.packing == PlanTensor::Packing::Word64) {
        if (packed_for != t) pack_steps(pt, s, f, w, packed64), packed_for = t;
        fills = refill_packed(pt, extent, vol, s, f, w, packed64, l);
      } else if (pt.packing == PlanTensor::Packing::Word128) {
        if (packed_for != t) pack_steps(pt, s, f, w, packed128), packed_for = t;
        fills = refill_packed(pt, extent, vol, s, f, w, packed128, l);
      } else {
        fills = refill_vectors(pt, extent, vol, s, f, w, l);
      }
    }
    int64_t groups = 1;
    if (pr.between_simple)
      for (uint64_t mask = pr.between; mask; mask &= mask - 1) groups *= f[std::countr_zero(mask)];
    else
      groups = groups_general(pt, s, f, w, pr.between);
    for (uint64_t mask = pr.replicated; mask; mask &= mask - 1) groups *= f[std::countr_zero(mask)];
    const int64_t transfers = child_fills * groups;
    Counts& c = per[l][t];
    c.fills = fills;
    if (pr.output) {
      // The first update of every output value lands on zero: it is neither read for
      // accumulation nor (since Timeloop 2023) filled from above. One instance starts the partial
      // sums of its partition of the outputs: the whole tensor over the instances that split
      // ranks the outputs index (instances that split a reduction each start their own).
      int64_t split = 1;
      for (uint64_t mask = pr.partition; mask; mask &= mask - 1) split *= f[std::countr_zero(mask)];
      const int64_t partition = split == 1 ? pt.volume : pt.volume / split;
      c.updates = transfers;
      if (p.output_accumulates) {
        c.reads = transfers;
      } else {
        c.reads = std::max<int64_t>(0, transfers - partition);
        if (!p.legacy_output_fills) c.fills = std::max<int64_t>(0, fills - partition);
      }
    } else {
      c.updates = 0;
      c.reads = transfers;
    }
    child_fills = fills;
    if (full) {
      TensorAccesses& a = full->access[l][t];
      const int64_t inst = w.instances[l];
      a.tile = vol;
      a.reads = c.reads * inst;
      a.fills = c.fills * inst;
      a.updates = c.updates * inst;
    }
  }

  // Capacity (the breakdown of an over-capacity mapping is still computed: it is informative).
  for (int l = 0; l < L; ++l) {
    const PlanLevel& lv = p.levels[l];
    if (lv.entries > 0 && occupancy[l] * lv.multiple_buffering > lv.entries) {
      out.invalid = Invalid::CapacityExceeded;
      if (full) {
        full->invalid = Invalid::CapacityExceeded;
        full->invalid_level = static_cast<int8_t>(l);
      }
      break;
    }
  }

  // Energy and latency.
  const double cc = static_cast<double>(temporal_iterations);
  double energy = static_cast<double>(p.operations) * p.op_pj;
  double cycles = cc;
  for (int l = 0; l < L; ++l) {
    const PlanLevel& lv = p.levels[l];
    const int64_t block = lv.block_size;
    // Energy is charged per vector access of block_size words, rounded up per instance and
    // action, as Timeloop does.
    auto vectors = [&](int64_t words) -> int64_t { return block == 1 ? words : (words + block - 1) / block * block; };
    double e = 0;
    int64_t rd_words = 0, wr_words = 0;
    for (int t = 0; t < T; ++t) {
      if (!(s.keep[l] >> t & 1)) continue;
      const Counts& c = per[l][t];
      e += static_cast<double>(vectors(c.reads)) * lv.read_pj + static_cast<double>(vectors(c.fills)) * lv.write_pj +
           static_cast<double>(vectors(c.updates)) * lv.update_pj;
      rd_words += c.reads;
      wr_words += c.fills + c.updates;
    }
    e *= static_cast<double>(w.instances[l]);
    energy += e;
    // Bandwidth: only a level whose demand reaches its bandwidth slows the run down. Near or past
    // that point, sum the per-instance demand tensor by tensor in double precision in Timeloop's
    // order, so that rounding up lands on the same whole cycle.
    const double limit = cc * (1 - 1e-9);
    const double rdx = static_cast<double>(rd_words) + lv.extra_read_words,
                 wrx = static_cast<double>(wr_words) + lv.extra_write_words;
    double c = 0;
    if ((lv.read_bw > 0 && rdx > lv.read_bw * limit) || (lv.write_bw > 0 && wrx > lv.write_bw * limit) ||
        (lv.shared_bw > 0 && rdx + wrx > lv.shared_bw * limit)) {
      double rd = 0, wr = 0;
      for (int t = 0; t < T; ++t) {
        if (!(s.keep[l] >> t & 1)) continue;
        rd += static_cast<double>(per[l][t].reads) / cc;
        wr += static_cast<double>(per[l][t].fills + per[l][t].updates) / cc;
      }
      rd += lv.extra_read_words / cc;
      wr += lv.extra_write_words / cc;
      double slowdown = 1;
      if (lv.read_bw > 0 && lv.read_bw < rd) slowdown = std::min(slowdown, lv.read_bw / rd);
      if (lv.write_bw > 0 && lv.write_bw < wr) slowdown = std::min(slowdown, lv.write_bw / wr);
      if (lv.shared_bw > 0 && lv.shared_bw < wr + rd) slowdown = std::min(slowdown, lv.shared_bw / (wr + rd));
      if (slowdown < 1) c = std::ceil(cc / slowdown);
    }
    cycles = std::max(cycles, c);
    if (full) {
      full->level_energy_pj[l] = e;
      full->level_cycles[l] = c;
      full->level_occupancy[l] = occupancy[l];
      full->level_instances[l] = w.instances[l];
    }
  }
  out.energy_pj = energy;
  out.cycles = cycles;
  if (full) {
    int64_t available = 1;
    for (int l = 0; l < L; ++l) available *= p.levels[l].fanout_x * p.levels[l].fanout_y;
    full->utilization = static_cast<double>(used_compute) / static_cast<double>(available);
    full->compute_cycles = cc;
    full->compute_energy_pj = static_cast<double>(p.operations) * p.op_pj;
    full->energy_pj = energy;
    full->cycles = cycles;
  }
  return out;
}

void evaluate(const EvalPlan& plan, const FlatMapping& m, CostResult& out) {
  const NestStructure s = analyze(plan, m);
  int64_t factors[kMaxLoops];
  for (int i = 0; i < m.n_loops; ++i) factors[i] = m.loops[i].factor;
  evaluate(plan, s, factors, &out);
}

CostResult evaluate(const EvalPlan& plan, const FlatMapping& m) {
  CostResult r;
  evaluate(plan, m, r);
  return r;
}

void evaluate_batch(const EvalPlan& plan, std::span<const FlatMapping> mappings,
                    std::span<CostResult> out) {
  const int64_t n = static_cast<int64_t>(std::min(mappings.size(), out.size()));
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) evaluate(plan, mappings[i], out[i]);
}

}  // namespace mapfuse
