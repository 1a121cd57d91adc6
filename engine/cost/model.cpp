#include "engine/cost/model.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <vector>

namespace mapfuse {
namespace {

// A temporal loop as the refill walks see it.
struct TemporalLoop {
  int rank;
  int64_t factor;
  int64_t stride;  // extent of the loop's rank over the loops inside it
  int64_t steps;   // (factor - 1) * product of the temporal factors outside it
};

struct Geometry {
  int n = 0;
  int n_temporal = 0;
  TemporalLoop temporal[kMaxLoops];          // outermost first
  int temporal_above[kMaxLevels];            // temporal loops outside level l's tile
  int64_t iterations_above[kMaxLevels];      // product of their factors
  int boundary[kMaxLevels];               // index of the first loop of each level
  int64_t stride[kMaxLoops];              // extent of loop i's rank over the loops inside i
  int64_t prefix_iters[kMaxLoops + 1];    // product of temporal factors of loops 0..i-1
  int spatial_begin[kMaxLevels];          // spatial loops of level l: [spatial_begin, level_end)
  int level_end[kMaxLevels];
  int64_t tile_ext[kMaxLevels][kMaxRanks + 1];  // rank extents of each level's tile (+ pad slot)
  int64_t instances[kMaxLevels];          // instances of each level used (outer spatial product)
};

inline int64_t dim_extent(const PlanDim& d, const int64_t* ext) {
  // Most dimensions have one term; the branch is the same for every evaluation of a plan.
  int64_t e = 1 + d.terms[0].coeff * (ext[d.terms[0].rank] - 1);
  if (d.n_terms > 1)
    for (int k = 1; k < kMaxTerms; ++k) e += d.terms[k].coeff * (ext[d.terms[k].rank] - 1);
  return e;
}

// Words moved into one instance of a level over the whole run (Timeloop's temporal delta
// analysis). Timeloop visits, for every temporal loop above the tile, only its first and second
// iteration and weights the second by (factor - 1); consecutive visits differ by a step of one loop
// with every loop inside it moved back by one step. A visit reuses the overlap with the previous
// tile only while the translation equals the one the innermost loop established (its
// "same-stride" rule); otherwise the whole tile is fetched again. Replaying that visit order in
// closed form gives
//   fills = V + N_in * new(T_in) + sum_{j outer} N_j * (T_j == T_in ? new(T_j) : V)
// with T_j the translation of the tile at a step of loop j, N_j = (f_j - 1) * prod(outer f) its
// number of steps, and new(T) the part of a tile not covered by its copy moved by -T.
// Per-dimension vectors are padded to kMaxTensorDims (extent 1, shift 0) so that the loops over
// them have a constant trip count and compile to a few vector instructions.
using DimVec = std::array<int64_t, kMaxTensorDims>;

inline bool equal(const DimVec& a, const DimVec& b) {
  bool eq = true;
  for (int d = 0; d < kMaxTensorDims; ++d) eq &= a[d] == b[d];
  return eq;
}

// The same count with exact packed keys (PlanTensor::packed). With P_j the sum of the steps of
// the temporal loops outside loop j, the translation of a step of loop j relative to a tile under
// temporal loop `above` is T_j = P_j + 2 step_j - P_above, and T_in = P_above - P_in, so
// T_j == T_in  <=>  A_j == B with A_j = P_j + 2 step_j (per tensor) and B = 2 P_above - P_in
// (per level): one comparison per loop, all values non-negative.
struct PackedSteps {
  unsigned __int128 a[kMaxLoops];
  unsigned __int128 prefix[kMaxLoops + 1];
};

inline void pack_steps(const PlanTensor& t, const Geometry& g, PackedSteps& ps) {
  unsigned __int128 sum = 0;
  for (int j = 0; j < g.n_temporal; ++j) {
    const unsigned __int128 step = t.packed_key[g.temporal[j].rank] * static_cast<uint64_t>(g.temporal[j].stride);
    ps.prefix[j] = sum;
    ps.a[j] = sum + 2 * step;
    sum += step;
  }
  ps.prefix[g.n_temporal] = sum;
}

inline int64_t refill_count_packed(const PlanTensor& t, const DimVec& extent, int64_t vol,
                                   const Geometry& g, const PackedSteps& ps, int level) {
  const int above = g.temporal_above[level];
  if (above == 0) return vol;
  const int inner = above - 1;
  const TemporalLoop& in = g.temporal[inner];
  // new(T_in): T_in moves only the dimensions the innermost loop's rank indexes.
  DimVec t_in{};
  for (int k = 0; k < t.rank_terms[in.rank]; ++k) t_in[t.rank_dim[in.rank][k]] = t.rank_coeff[in.rank][k] * in.stride;
  int64_t overlap = 1;
  for (int d = 0; d < kMaxTensorDims; ++d) overlap *= std::max<int64_t>(0, extent[d] - t_in[d]);
  const int64_t fresh_in = vol - overlap;
  const unsigned __int128 b = 2 * ps.prefix[above] - ps.prefix[inner];
  int64_t same_steps = 0;
  for (int j = 0; j < above; ++j)
    if (ps.a[j] == b) same_steps += g.temporal[j].steps;
  return vol * g.iterations_above[level] - (vol - fresh_in) * same_steps;
}

inline int64_t refill_count(const PlanTensor& t, const DimVec& extent, int64_t vol,
                            const Geometry& g, int level) {
  // Innermost temporal loop above the tile: it sets the reference translation T_in.
  const int inner = g.temporal_above[level] - 1;
  if (inner < 0) return vol;
  const TemporalLoop& in = g.temporal[inner];
  DimVec t_in{}, rewind{};
  for (int k = 0; k < t.rank_terms[in.rank]; ++k) {
    t_in[t.rank_dim[in.rank][k]] = t.rank_coeff[in.rank][k] * in.stride;
    rewind[t.rank_dim[in.rank][k]] = -t_in[t.rank_dim[in.rank][k]];
  }
  const uint64_t key_in = t.rank_key[in.rank] * static_cast<uint64_t>(in.stride);
  uint64_t key_rewind = 0 - key_in;
  // new(T_in): the part of the tile not covered by its copy moved by -T_in.
  int64_t overlap = 1;
  for (int d = 0; d < kMaxTensorDims; ++d)
    overlap *= std::max<int64_t>(0, extent[d] - (t_in[d] < 0 ? -t_in[d] : t_in[d]));
  const int64_t fresh_in = vol - overlap;
  // Since the steps of all loops above the tile add up to prod(f) - 1, only the steps whose
  // translation equals T_in need counting: fills = V * prod(f) - (V - new(T_in)) * same_steps.
  // rewind: the translation from the loops between the current one and the tile each stepping
  // back once.
  int64_t same_steps = in.steps;
  bool rewind_is_t_in = key_rewind == key_in && equal(rewind, t_in);
  for (int j = inner - 1; j >= 0; --j) {
    const TemporalLoop& lp = g.temporal[j];
    const int r = lp.rank;
    bool same = rewind_is_t_in;  // a loop over a rank t does not index moves only the rewinds
    if (t.rank_terms[r] != 0) {
      const uint64_t key_step = t.rank_key[r] * static_cast<uint64_t>(lp.stride);
      same = key_rewind + key_step == key_in;
      if (same) {
        DimVec t_j = rewind;
        for (int k = 0; k < t.rank_terms[r]; ++k) t_j[t.rank_dim[r][k]] += t.rank_coeff[r][k] * lp.stride;
        same = equal(t_j, t_in);
      }
      for (int k = 0; k < t.rank_terms[r]; ++k) rewind[t.rank_dim[r][k]] -= t.rank_coeff[r][k] * lp.stride;
      key_rewind -= key_step;
      rewind_is_t_in = key_rewind == key_in && equal(rewind, t_in);
    }
    if (same) same_steps += lp.steps;
  }
  return vol * g.iterations_above[level] - (vol - fresh_in) * same_steps;
}

// General case (a rank in several dimensions of one tensor): enumerate start points.
int64_t distinct_groups_slow(const PlanTensor& t, const FlatMapping& m, const Geometry& g,
                             const std::vector<int>& loops) {
  std::vector<int64_t> idx(loops.size(), 0), points;
  while (true) {
    int64_t off[kMaxRanks + 1] = {};
    for (size_t q = 0; q < loops.size(); ++q) off[m.loops[loops[q]].rank] += idx[q] * g.stride[loops[q]];
    for (int d = 0; d < t.n_dims; ++d) {
      int64_t o = 0;
      for (int k = 0; k < kMaxTerms; ++k) o += t.dims[d].terms[k].coeff * off[t.dims[d].terms[k].rank];
      points.push_back(o);
    }
    size_t q = 0;
    while (q < loops.size() && ++idx[q] == m.loops[loops[q]].factor) idx[q++] = 0;
    if (q == loops.size()) break;
  }
  const size_t D = static_cast<size_t>(t.n_dims);
  std::vector<size_t> order(points.size() / D);
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  auto less = [&](size_t a, size_t b) {
    return std::lexicographical_compare(points.begin() + a * D, points.begin() + (a + 1) * D,
                                        points.begin() + b * D, points.begin() + (b + 1) * D);
  };
  std::sort(order.begin(), order.end(), less);
  int64_t distinct = order.empty() ? 0 : 1;
  for (size_t i = 1; i < order.size(); ++i) distinct += less(order[i - 1], order[i]);
  return distinct;
}

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

// Number of distinct data sets that the spatial loops of one level hand to the instances below:
// instances whose tiles start at the same point of the tensor share one transfer (multicast of
// inputs, spatial reduction of outputs). Timeloop compares the start points of the instances'
// tiles, so partly overlapping windows still count separately.
int64_t level_groups(const PlanTensor& t, const FlatMapping& m, const Geometry& g, int lv) {
  int64_t product = 1;
  int hits[kMaxTensorDims] = {};
  int64_t w[kMaxTensorDims][kMaxLoops], f[kMaxTensorDims][kMaxLoops];
  bool collide = false, general = false;
  for (int i = g.spatial_begin[lv]; i < g.level_end[lv]; ++i) {
    const FlatLoop& lp = m.loops[i];
    const int terms = t.rank_terms[lp.rank];
    if (terms == 0) continue;
    product *= lp.factor;
    if (terms != 1) {
      general = true;
      continue;
    }
    const int d = t.rank_dim[lp.rank][0];
    w[d][hits[d]] = t.rank_coeff[lp.rank][0] * g.stride[i];
    f[d][hits[d]] = lp.factor;
    collide |= ++hits[d] > 1;
  }
  if (general) {
    std::vector<int> loops;
    for (int i = g.spatial_begin[lv]; i < g.level_end[lv]; ++i)
      if (t.rank_terms[m.loops[i].rank] != 0) loops.push_back(i);
    return distinct_groups_slow(t, m, g, loops);
  }
  if (!collide) return product;
  // Two spatial loops move the same dimension (e.g. P and R over an input row): count the
  // distinct start points of each dimension.
  int64_t groups = 1;
  for (int d = 0; d < t.n_dims; ++d)
    if (hits[d] > 0) groups *= distinct_sums(w[d], f[d], hits[d]);
  return groups;
}

// Transfers from a level to the next inner level that keeps the tensor go through the fan-outs of
// every level in between; Timeloop counts the groups of each fan-out on its own and multiplies
// them (an instance of a bypassed level forwards what its children need without merging it).
int64_t distinct_groups(const PlanTensor& t, const FlatMapping& m, const Geometry& g, int child,
                        int level) {
  int64_t groups = 1;
  for (int lv = child + 1; lv <= level; ++lv)
    if (g.spatial_begin[lv] < g.level_end[lv]) groups *= level_groups(t, m, g, lv);
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
  }
  return "?";
}

void evaluate(const EvalPlan& p, const FlatMapping& m, CostResult& out) {
  const int R = p.n_ranks, T = p.n_tensors, L = p.n_levels, n = m.n_loops;
  // Reset only the part of the result this plan uses.
  out.invalid = Invalid::None;
  out.invalid_level = -1;
  out.operations = p.operations;
  for (int l = 0; l < L; ++l) {
    for (int t = 0; t < T; ++t) out.access[l][t] = {};
    out.level_energy_pj[l] = out.level_cycles[l] = 0;
    out.level_occupancy[l] = 0;
  }
  auto fail = [&](Invalid why, int level) {
    out.invalid = why;
    out.invalid_level = static_cast<int8_t>(level);
    out.energy_pj = out.cycles = 0;
  };
  if (m.n_levels != L) return fail(Invalid::LevelCount, -1);

  // --- Structure and geometry in two passes over the loops. ---------------------------------
  // Level l's loops iterate over the tiles of the inner levels while its buffer holds their
  // union, so its tile spans loops boundary[l]..n-1, and the temporal loops before boundary[l]
  // decide what it is refilled with. Spatial loops of level l fan out into level l-1.
  Geometry g;
  int64_t fan_x[kMaxLevels], fan_y[kMaxLevels];
  std::fill_n(fan_x, L, int64_t{1});
  std::fill_n(fan_y, L, int64_t{1});
  g.prefix_iters[0] = 1;
  {
    int level = L;
    for (int l = 0; l < L; ++l) g.spatial_begin[l] = -1;
    for (int i = 0; i < n; ++i) {
      const FlatLoop& lp = m.loops[i];
      while (level > lp.level) g.boundary[--level] = i;
      if (lp.kind != LoopKind::Temporal && g.spatial_begin[lp.level] < 0) g.spatial_begin[lp.level] = i;
      g.prefix_iters[i + 1] = g.prefix_iters[i] * (lp.kind == LoopKind::Temporal ? lp.factor : 1);
      if (lp.kind == LoopKind::SpatialX) fan_x[lp.level] *= lp.factor;
      else if (lp.kind == LoopKind::SpatialY) fan_y[lp.level] *= lp.factor;
    }
    while (level > 0) g.boundary[--level] = n;
    for (int l = 0; l < L; ++l) {
      g.level_end[l] = l == 0 ? n : g.boundary[l - 1];
      if (g.spatial_begin[l] < 0) g.spatial_begin[l] = g.level_end[l];
    }
  }
  {
    // Walk the loops inside out, level by level, recording each loop's stride (the extent of
    // its rank over the loops inside it) and each level's tile extents.
    int64_t run[kMaxRanks + 1];
    std::fill_n(run, kMaxRanks + 1, int64_t{1});
    int end = n;
    for (int l = 0; l < L; ++l) {
      for (int i = end - 1; i >= g.boundary[l]; --i) {
        g.stride[i] = run[m.loops[i].rank];
        run[m.loops[i].rank] *= m.loops[i].factor;
      }
      end = g.boundary[l];
      std::copy_n(run, kMaxRanks + 1, g.tile_ext[l]);
    }
    for (int r = 0; r < R; ++r)
      if (run[r] != p.rank_size[r]) return fail(Invalid::FactorProduct, -1);
    int level = L - 1, k = 0;
    for (int i = 0; i < n; ++i) {
      const FlatLoop& lp = m.loops[i];
      while (level >= 0 && g.boundary[level] <= i) {
        g.temporal_above[level] = k;
        g.iterations_above[level] = g.prefix_iters[i];
        --level;
      }
      // A loop of factor 1 is no loop (Timeloop drops them; a mapper may leave them in).
      if (lp.kind == LoopKind::Temporal && lp.factor > 1)
        g.temporal[k++] = {lp.rank, lp.factor, g.stride[i], (lp.factor - 1) * g.prefix_iters[i]};
    }
    for (; level >= 0; --level) {
      g.temporal_above[level] = k;
      g.iterations_above[level] = g.prefix_iters[n];
    }
    g.n_temporal = k;
  }
  int64_t used_compute = 1;
  for (int l = L - 1; l >= 0; --l) {
    const PlanLevel& lv = p.levels[l];
    if (fan_x[l] > lv.fanout_x || fan_y[l] > lv.fanout_y) return fail(Invalid::FanoutExceeded, l);
    for (int t = 0; t < T; ++t)
      if ((m.keep[l] >> t & 1) && !(lv.may_keep & role_bit(p.tensors[t].role)))
        return fail(Invalid::KeepNotAllowed, l);
    out.level_instances[l] = g.instances[l] = used_compute;
    used_compute *= fan_x[l] * fan_y[l];
  }
  for (int t = 0; t < T; ++t)
    if (!(m.keep[L - 1] >> t & 1)) return fail(Invalid::BackingMissing, L - 1);
  const int64_t temporal_iterations = g.prefix_iters[n];

  // --- Per tensor: tiles and refills of every level that keeps it, then the traffic between
  // each kept level and the next inner one (or compute). Counts are kept per instance too, for
  // Timeloop's per-instance rounding and bandwidth demand. ----------------------------------------
  struct PerInstance {
    int64_t reads, fills, updates;
  };
  PerInstance per[kMaxLevels][kMaxTensors];
  PackedSteps packed_steps;
  for (int t = 0; t < T; ++t) {
    const PlanTensor& pt = p.tensors[t];
    const bool is_output = pt.role == TensorRole::Output;
    if (pt.packed) pack_steps(pt, g, packed_steps);
    int child = -1;
    int64_t child_fills = temporal_iterations;  // compute takes one value per operation
    for (int l = 0; l < L; ++l) {
      if (!(m.keep[l] >> t & 1)) continue;
      TensorAccesses& a = out.access[l][t];
      const int64_t* ext = g.tile_ext[l];
      DimVec extent;
      extent.fill(1);
      int64_t vol = 1;
      for (int d = 0; d < pt.n_dims; ++d) vol *= extent[d] = dim_extent(pt.dims[d], ext);
      a.tile = vol;
      out.level_occupancy[l] += vol;
      const int64_t fills = l == L - 1 ? 0
                            : pt.packed ? refill_count_packed(pt, extent, vol, g, packed_steps, l)
                                        : refill_count(pt, extent, vol, g, l);
      // Instances that need different data (spatial loops over ranks t indexes) get their own
      // transfer; the others share it: multicast for inputs, spatial reduction for outputs.
      const int64_t transfers = child_fills * distinct_groups(pt, m, g, child, l);
      PerInstance& pi = per[l][t];
      pi.fills = fills;
      if (is_output) {
        // The first update of every output value lands on zero: it is neither read for
        // accumulation nor (since Timeloop 2023) filled from above. One instance starts the
        // partial sums of its partition of the outputs: the whole tensor over the instances that
        // split ranks the outputs index (instances that split a reduction each start their own).
        int64_t partition = pt.volume;
        for (int lv = l + 1; lv < L; ++lv)
          for (int i = g.spatial_begin[lv]; i < g.level_end[lv]; ++i)
            if (pt.rank_terms[m.loops[i].rank] != 0) partition /= m.loops[i].factor;
        pi.updates = transfers;
        pi.reads = std::max<int64_t>(0, transfers - partition);
        if (!p.legacy_output_fills) pi.fills = std::max<int64_t>(0, fills - partition);
      } else {
        pi.updates = 0;
        pi.reads = transfers;
      }
      const int64_t inst = g.instances[l];
      a.reads = pi.reads * inst;
      a.fills = pi.fills * inst;
      a.updates = pi.updates * inst;
      child = l;
      child_fills = fills;
    }
  }

  // --- Capacity. ----------------------------------------------------------------------------
  for (int l = 0; l < L; ++l) {
    const PlanLevel& lv = p.levels[l];
    if (lv.entries > 0 && out.level_occupancy[l] * lv.multiple_buffering > lv.entries) {
      out.invalid = Invalid::CapacityExceeded;
      out.invalid_level = static_cast<int8_t>(l);
      // Keep going: the breakdown of an over-capacity mapping is still informative.
    }
  }

  // --- Energy and latency. ------------------------------------------------------------------
  out.compute_cycles = static_cast<double>(temporal_iterations);
  out.compute_energy_pj = static_cast<double>(p.operations) * p.op_pj;
  double energy = out.compute_energy_pj;
  double cycles = out.compute_cycles;
  int64_t available = 1;
  for (int l = 0; l < L; ++l) {
    const PlanLevel& lv = p.levels[l];
    available *= lv.fanout_x * lv.fanout_y;
    // Energy is charged per vector access of block_size words, rounded up per instance and
    // action, as Timeloop does.
    const int64_t inst = g.instances[l], block = lv.block_size;
    auto vectors = [&](int64_t words) -> int64_t {
      return block == 1 ? words : (words + block - 1) / block * block;
    };
    double e = 0;
    int64_t rd_words = 0, wr_words = 0;
    for (int t = 0; t < T; ++t) {
      if (!(m.keep[l] >> t & 1)) continue;
      const PerInstance& pi = per[l][t];
      e += static_cast<double>(vectors(pi.reads)) * lv.read_pj +
           static_cast<double>(vectors(pi.fills)) * lv.write_pj +
           static_cast<double>(vectors(pi.updates)) * lv.update_pj;
      rd_words += pi.reads;
      wr_words += pi.fills + pi.updates;
    }
    e *= static_cast<double>(inst);
    out.level_energy_pj[l] = e;
    energy += e;
    // Bandwidth: only a level whose demand reaches its bandwidth slows the run down. Near or past
    // that point, sum the per-instance demand tensor by tensor in double precision in Timeloop's
    // order, so that rounding up lands on the same whole cycle.
    const double cc = out.compute_cycles;
    const double limit = cc * (1 - 1e-9);
    double c = 0;
    const bool maybe_bound = (lv.read_bw > 0 && static_cast<double>(rd_words) > lv.read_bw * limit) ||
                             (lv.write_bw > 0 && static_cast<double>(wr_words) > lv.write_bw * limit) ||
                             (lv.shared_bw > 0 && static_cast<double>(rd_words + wr_words) > lv.shared_bw * limit);
    if (maybe_bound) {
      double rd = 0, wr = 0;
      for (int t = 0; t < T; ++t) {
        if (!(m.keep[l] >> t & 1)) continue;
        rd += static_cast<double>(per[l][t].reads) / cc;
        wr += static_cast<double>(per[l][t].fills + per[l][t].updates) / cc;
      }
      double slowdown = 1;
      if (lv.read_bw > 0 && lv.read_bw < rd) slowdown = std::min(slowdown, lv.read_bw / rd);
      if (lv.write_bw > 0 && lv.write_bw < wr) slowdown = std::min(slowdown, lv.write_bw / wr);
      if (lv.shared_bw > 0 && lv.shared_bw < wr + rd) slowdown = std::min(slowdown, lv.shared_bw / (wr + rd));
      c = slowdown < 1 ? std::ceil(cc / slowdown) : 0.0;
    }
    out.level_cycles[l] = c;
    cycles = std::max(cycles, c);
  }
  out.utilization = static_cast<double>(used_compute) / static_cast<double>(available);
  out.energy_pj = energy;
  out.cycles = cycles;
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
