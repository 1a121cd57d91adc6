#include "engine/cost/model.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace mapfuse {
namespace {

// Volume of a tensor tile whose rank extents are `ext`.
inline int64_t tile_volume(const PlanTensor& t, const int64_t* ext) {
  int64_t v = 1;
  for (int d = 0; d < t.n_dims; ++d) {
    const PlanDim& dim = t.dims[d];
    int64_t e = 1;
    for (int k = 0; k < dim.n_terms; ++k) e += dim.terms[k].coeff * (ext[dim.terms[k].rank] - 1);
    v *= e;
  }
  return v;
}

// Words moved into one instance of a level over the whole run (Timeloop's temporal delta
// analysis). Timeloop visits, for every temporal loop above the tile, only its first and second
// iteration and weights the second by (factor - 1); consecutive visits differ by a step of one loop
// with every inner loop moved back by one step. A visit reuses the overlap with the previous tile
// only while the translation equals the one established by the innermost loop (its "same-stride"
// rule); otherwise the whole tile is fetched. Replaying that visit order in closed form gives:
//   fills = V + N_in * new(T_in) + sum_{j outer} N_j * (T_j == T_in ? new(T_j) : V)
// where T_j is the translation at a step of loop j, N_j its number of steps, and new(T) the part of
// a tile not covered by its copy moved by -T.
int64_t refill_count(const PlanTensor& t, const int64_t* ext, int64_t vol, const FlatMapping& m,
                     int boundary, const int64_t (*suffix_ext)[kMaxRanks],
                     const int64_t* prefix_iters) {
  int inner = -1;
  for (int j = boundary - 1; j >= 0; --j)
    if (m.loops[j].kind == LoopKind::Temporal) {
      inner = j;
      break;
    }
  if (inner < 0) return vol;
  // Translation of each tensor dimension at a step of loop j: loop j advances one step, every
  // temporal loop between j and the tile steps back by one.
  auto translation = [&](int j, int64_t* out) {
    int64_t rank_shift[kMaxRanks] = {};
    rank_shift[m.loops[j].rank] += suffix_ext[j + 1][m.loops[j].rank];
    for (int k = j + 1; k < boundary; ++k)
      if (m.loops[k].kind == LoopKind::Temporal)
        rank_shift[m.loops[k].rank] -= suffix_ext[k + 1][m.loops[k].rank];
    for (int d = 0; d < t.n_dims; ++d) {
      int64_t sh = 0;
      for (int q = 0; q < t.dims[d].n_terms; ++q)
        sh += t.dims[d].terms[q].coeff * rank_shift[t.dims[d].terms[q].rank];
      out[d] = sh;
    }
  };
  int64_t extent[kMaxTensorDims];
  for (int d = 0; d < t.n_dims; ++d) {
    int64_t e = 1;
    for (int q = 0; q < t.dims[d].n_terms; ++q)
      e += t.dims[d].terms[q].coeff * (ext[t.dims[d].terms[q].rank] - 1);
    extent[d] = e;
  }
  auto fresh = [&](const int64_t* shift) {
    int64_t overlap = 1;
    for (int d = 0; d < t.n_dims; ++d) {
      const int64_t o = extent[d] - (shift[d] < 0 ? -shift[d] : shift[d]);
      if (o <= 0) return vol;
      overlap *= o;
    }
    return vol - overlap;
  };
  int64_t t_in[kMaxTensorDims], t_j[kMaxTensorDims];
  translation(inner, t_in);
  const FlatLoop& li = m.loops[inner];
  int64_t fills = vol + (li.factor - 1) * prefix_iters[inner] * fresh(t_in);
  for (int j = inner - 1; j >= 0; --j) {
    const FlatLoop& lp = m.loops[j];
    if (lp.kind != LoopKind::Temporal) continue;
    translation(j, t_j);
    const bool same = std::equal(t_j, t_j + t.n_dims, t_in);
    fills += (lp.factor - 1) * prefix_iters[j] * (same ? fresh(t_j) : vol);
  }
  return fills;
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
  out = CostResult{};
  out.operations = p.operations;
  auto fail = [&](Invalid why, int level) {
    out.invalid = why;
    out.invalid_level = static_cast<int8_t>(level);
  };
  if (m.n_levels != L) return fail(Invalid::LevelCount, -1);

  // --- Structure: factor products, fan-out, keep rules. -----------------------------------
  int64_t product[kMaxRanks];
  std::fill_n(product, R, int64_t{1});
  int64_t fan_x[kMaxLevels] = {}, fan_y[kMaxLevels] = {};
  std::fill_n(fan_x, L, int64_t{1});
  std::fill_n(fan_y, L, int64_t{1});
  for (int i = 0; i < n; ++i) {
    const FlatLoop& lp = m.loops[i];
    product[lp.rank] *= lp.factor;
    if (lp.kind == LoopKind::SpatialX) fan_x[lp.level] *= lp.factor;
    if (lp.kind == LoopKind::SpatialY) fan_y[lp.level] *= lp.factor;
  }
  for (int r = 0; r < R; ++r)
    if (product[r] != p.rank_size[r]) return fail(Invalid::FactorProduct, -1);
  for (int l = 0; l < L; ++l) {
    if (fan_x[l] > p.levels[l].fanout_x || fan_y[l] > p.levels[l].fanout_y)
      return fail(Invalid::FanoutExceeded, l);
    for (int t = 0; t < T; ++t)
      if ((m.keep[l] >> t & 1) && !(p.levels[l].may_keep & role_bit(p.tensors[t].role)))
        return fail(Invalid::KeepNotAllowed, l);
  }
  for (int t = 0; t < T; ++t)
    if (!(m.keep[L - 1] >> t & 1)) return fail(Invalid::BackingMissing, L - 1);

  // --- Nest geometry. ------------------------------------------------------------------------
  // boundary[l]: index of the first loop of level l. Level l's loops iterate over the tiles of
  // the inner levels while its buffer holds their union, so its tile spans loops boundary[l]..n-1
  // and the temporal loops before boundary[l] (outer levels) decide what it is refilled with.
  // suffix_ext[i][r]: extent of rank r over loops i..n-1.
  int boundary[kMaxLevels + 1];
  {
    int i = 0;
    for (int l = L - 1; l >= 0; --l) {
      boundary[l] = i;
      while (i < n && m.loops[i].level == l) ++i;
    }
  }
  int64_t suffix_ext[kMaxLoops + 1][kMaxRanks];
  std::fill_n(suffix_ext[n], R, int64_t{1});
  for (int i = n - 1; i >= 0; --i) {
    std::copy_n(suffix_ext[i + 1], R, suffix_ext[i]);
    suffix_ext[i][m.loops[i].rank] *= m.loops[i].factor;
  }
  // Instances of each level used: product of spatial factors of all outer levels.
  int64_t instances[kMaxLevels + 1];
  {
    int64_t acc = 1;
    for (int l = L - 1; l >= 0; --l) {
      out.level_instances[l] = instances[l] = acc;
      acc *= fan_x[l] * fan_y[l];
    }
    instances[L] = 1;
    out.utilization = static_cast<double>(acc);  // compute instances used; normalised below
  }
  // prefix_iters[i]: product of the temporal factors of loops 0..i-1 (all loops outside i).
  int64_t prefix_iters[kMaxLoops + 1];
  prefix_iters[0] = 1;
  for (int i = 0; i < n; ++i)
    prefix_iters[i + 1] =
        prefix_iters[i] * (m.loops[i].kind == LoopKind::Temporal ? m.loops[i].factor : 1);
  const int64_t temporal_iterations = prefix_iters[n];

  // --- Per tensor: tiles, fills per instance, then traffic between kept levels. --------------
  int64_t fills_per_instance[kMaxLevels];
  for (int t = 0; t < T; ++t) {
    const PlanTensor& pt = p.tensors[t];
    for (int l = 0; l < L; ++l) {
      if (!(m.keep[l] >> t & 1)) continue;
      const int b = boundary[l];
      const int64_t* ext = suffix_ext[b];
      const int64_t vol = tile_volume(pt, ext);
      out.access[l][t].tile = vol;
      out.level_occupancy[l] += vol;
      if (l == L - 1) continue;  // the backing store is never filled
      int64_t fills;
      fills = refill_count(pt, ext, vol, m, b, suffix_ext, prefix_iters);
      fills_per_instance[l] = fills;
      out.access[l][t].fills = fills * instances[l];
    }
    // Traffic from each kept level to the next inner kept level (or compute, child = -1).
    int child = -1;
    for (int l = 0; l < L; ++l) {
      if (!(m.keep[l] >> t & 1)) continue;
      const int64_t per_child = child < 0 ? temporal_iterations : fills_per_instance[child];
      // Children that need different data (spatial loops over ranks relevant to t) each get
      // their own transfer; the rest share it (multicast) or are reduced spatially (outputs).
      int64_t distinct = 1;
      for (int i = boundary[l]; i < n; ++i) {
        const FlatLoop& lp = m.loops[i];
        if (lp.kind == LoopKind::Temporal || lp.level <= child) continue;
        if (pt.relevant_ranks >> lp.rank & 1) distinct *= lp.factor;
      }
      const int64_t transfers = per_child * distinct * instances[l];
      TensorAccesses& a = out.access[l][t];
      if (pt.role == TensorRole::Output) {
        // The first update of every output value writes onto zero: that value is neither read
        // for accumulation nor (since Timeloop 2023) filled from above. Instances that split a
        // reduction spatially each start their own partial sums.
        int64_t elided = pt.volume;
        for (int i = 0; i < boundary[l]; ++i)
          if (m.loops[i].kind != LoopKind::Temporal && !(pt.relevant_ranks >> m.loops[i].rank & 1))
            elided *= m.loops[i].factor;
        a.updates = transfers;
        a.reads = std::max<int64_t>(0, transfers - elided);
        if (!p.legacy_output_fills) a.fills = std::max<int64_t>(0, a.fills - elided);
      } else {
        a.reads = transfers;
      }
      child = l;
    }
  }

  // --- Capacity. ----------------------------------------------------------------------------
  for (int l = 0; l < L; ++l) {
    const PlanLevel& lv = p.levels[l];
    if (lv.entries > 0 && out.level_occupancy[l] * lv.multiple_buffering > lv.entries) {
      fail(Invalid::CapacityExceeded, l);
      // Keep going: the breakdown of an over-capacity mapping is still informative.
    }
  }

  // --- Energy and latency. ------------------------------------------------------------------
  out.compute_cycles = static_cast<double>(temporal_iterations);
  out.compute_energy_pj = static_cast<double>(p.operations) * p.op_pj;
  double energy = out.compute_energy_pj;
  double cycles = out.compute_cycles;
  for (int l = 0; l < L; ++l) {
    const PlanLevel& lv = p.levels[l];
    int64_t reads = 0, writes = 0;
    double e = 0;
    // Energy is charged per vector access of block_size words, rounded up per instance and
    // action as Timeloop does.
    const int64_t inst = instances[l], block = lv.block_size;
    auto vectors = [&](int64_t words) -> double {
      if (block == 1 || words == 0) return static_cast<double>(words);
      const int64_t per = words / inst;
      return static_cast<double>(((per + block - 1) / block) * block * inst);
    };
    for (int t = 0; t < T; ++t) {
      const TensorAccesses& a = out.access[l][t];
      reads += a.reads;
      writes += a.fills + a.updates;
      e += vectors(a.reads) * lv.read_pj + vectors(a.fills) * lv.write_pj +
           vectors(a.updates) * lv.update_pj;
    }
    out.level_energy_pj[l] = e;
    energy += e;
    // Bandwidth-bound cycles of one instance, in whole cycles (Timeloop rounds up).
    const double per_inst = static_cast<double>(inst);
    double c = 0;
    if (lv.shared_bw > 0) c = std::max(c, static_cast<double>(reads + writes) / per_inst / lv.shared_bw);
    if (lv.read_bw > 0) c = std::max(c, static_cast<double>(reads) / per_inst / lv.read_bw);
    if (lv.write_bw > 0) c = std::max(c, static_cast<double>(writes) / per_inst / lv.write_bw);
    c = std::ceil(c - 1e-9);
    out.level_cycles[l] = c;
    cycles = std::max(cycles, c);
  }
  int64_t available = 1;
  for (int l = 0; l < L; ++l) available *= p.levels[l].fanout_x * p.levels[l].fanout_y;
  out.utilization /= static_cast<double>(available);
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
