#include "engine/cost/batch.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace mapfuse {
namespace {

using DimVec = std::array<int64_t, kMaxTensorDims>;

inline bool equal(const DimVec& a, const DimVec& b) {
  bool eq = true;
  for (int d = 0; d < kMaxTensorDims; ++d) eq &= a[d] == b[d];
  return eq;
}

// Distinct values of w0*i + w1*j over i < f0, j < f1 (see model.cpp).
inline int64_t distinct_pair(int64_t w0, int64_t f0, int64_t w1, int64_t f1) {
  const int64_t gcd = std::gcd(w0, w1);
  const int64_t a = w0 / gcd, b = w1 / gcd;
  return f0 * f1 - std::max<int64_t>(0, f0 - b) * std::max<int64_t>(0, f1 - a);
}

}  // namespace

BatchEvaluator::BatchEvaluator(const EvalPlan& plan, const FlatMapping& shape) : plan_(&plan) {
  n_ = shape.n_loops;
  L_ = plan.n_levels;
  T_ = plan.n_tensors;
  R_ = plan.n_ranks;
  if (shape.n_levels != L_) {
    structural_ = Invalid::LevelCount;
    return;
  }
  for (int i = 0; i < n_; ++i) {
    rank_[i] = shape.loops[i].rank;
    level_[i] = shape.loops[i].level;
    kind_[i] = shape.loops[i].kind;
  }
  int level = L_;
  for (int i = 0; i < n_; ++i)
    while (level > level_[i]) boundary_[--level] = i;
  while (level > 0) boundary_[--level] = n_;
  for (int i = 0; i < n_; ++i)
    if (kind_[i] == LoopKind::Temporal) temporal_.push_back(static_cast<int8_t>(i));
  for (int l = 0; l < L_; ++l) {
    int k = 0;
    while (k < static_cast<int>(temporal_.size()) && temporal_[k] < boundary_[l]) ++k;
    temporal_above_[l] = k;
  }
  for (int t = 0; t < T_; ++t) {
    const PlanTensor& pt = plan.tensors[t];
    int child = -1;
    for (int l = 0; l < L_; ++l) {
      if (!(shape.keep[l] >> t & 1)) continue;
      Pair p;
      p.tensor = static_cast<int8_t>(t);
      p.level = static_cast<int8_t>(l);
      p.child = static_cast<int8_t>(child);
      p.output = pt.role == TensorRole::Output;
      p.backing = l == L_ - 1;
      p.n_dims = pt.n_dims;
      for (int d = 0; d < pt.n_dims; ++d)
        for (int q = 0; q < kMaxTerms; ++q) {
          p.dim_rank[d][q] = pt.dims[d].terms[q].rank;
          p.dim_coeff[d][q] = pt.dims[d].terms[q].coeff;
        }
      for (int i = 0; i < n_; ++i) {
        if (kind_[i] == LoopKind::Temporal || pt.rank_terms[rank_[i]] == 0) continue;
        const int8_t dim = pt.rank_terms[rank_[i]] == 1 ? pt.rank_dim[rank_[i]][0] : int8_t{-1};
        if (level_[i] > child && level_[i] <= l) {
          for (const Spatial& s : p.between)
            if (s.level == level_[i] && (s.dim == dim || s.dim < 0 || dim < 0)) p.between_simple = false;
          p.between.push_back({static_cast<int8_t>(i), level_[i], dim, pt.rank_coeff[rank_[i]][0]});
        }
        if (level_[i] > l) p.partition.push_back(static_cast<int8_t>(i));
      }
      pairs_.push_back(std::move(p));
      child = l;
    }
  }
  // Structural failures are reported in the scalar model's order, interleaved with the lanes'
  // fan-out checks in evaluate().
}

void BatchEvaluator::evaluate(const LaneFactors& f, int count, BatchResult& out) const {
  const EvalPlan& p = *plan_;
  const int n = n_, L = L_, T = T_, K = count;
  for (int k = 0; k < K; ++k) {
    out.invalid[k] = structural_;
    out.energy_pj[k] = out.cycles[k] = 0;
  }
  if (structural_ != Invalid::None) return;

  // Strides (extent of each loop's rank over the loops inside it) and tile extents per level.
  int64_t stride[kMaxLoops][kBatchLanes];
  int64_t ext[kMaxLevels][kMaxRanks + 1][kBatchLanes];
  int64_t run[kMaxRanks + 1][kBatchLanes];
  for (auto& r : run) std::fill_n(r, kBatchLanes, int64_t{1});
  {
    int end = n;
    for (int l = 0; l < L; ++l) {
      for (int i = end - 1; i >= boundary_[l]; --i)
        for (int k = 0; k < K; ++k) {
          stride[i][k] = run[rank_[i]][k];
          run[rank_[i]][k] *= f[i][k];
        }
      end = boundary_[l];
      std::copy(&run[0][0], &run[0][0] + (kMaxRanks + 1) * kBatchLanes, &ext[l][0][0]);
    }
  }
  bool alive[kBatchLanes];
  for (int k = 0; k < K; ++k) {
    alive[k] = true;
    for (int r = 0; r < R_; ++r)
      if (run[r][k] != p.rank_size[r]) alive[k] = false;
    if (!alive[k]) out.invalid[k] = Invalid::FactorProduct;
  }
  // Fan-out per level and axis, instances, and the structural keep rules, in the scalar order.
  int64_t instances[kMaxLevels][kBatchLanes];
  int64_t used[kBatchLanes];
  std::fill_n(used, kBatchLanes, int64_t{1});
  for (int l = L - 1; l >= 0; --l) {
    int64_t fx[kBatchLanes], fy[kBatchLanes];
    std::fill_n(fx, kBatchLanes, int64_t{1});
    std::fill_n(fy, kBatchLanes, int64_t{1});
    for (int i = 0; i < n; ++i) {
      if (level_[i] != l || kind_[i] == LoopKind::Temporal) continue;
      for (int k = 0; k < K; ++k) (kind_[i] == LoopKind::SpatialX ? fx : fy)[k] *= f[i][k];
    }
    bool keep_bad = false;
    for (const Pair& pr : pairs_)
      if (pr.level == l && !(p.levels[l].may_keep & role_bit(p.tensors[pr.tensor].role))) keep_bad = true;
    for (int k = 0; k < K; ++k) {
      if (alive[k] && (fx[k] > p.levels[l].fanout_x || fy[k] > p.levels[l].fanout_y)) {
        alive[k] = false;
        out.invalid[k] = Invalid::FanoutExceeded;
      }
      if (alive[k] && keep_bad) {
        alive[k] = false;
        out.invalid[k] = Invalid::KeepNotAllowed;
      }
      instances[l][k] = used[k];
      used[k] *= fx[k] * fy[k];
    }
  }
  bool backing_ok = true;
  for (int t = 0; t < T; ++t) {
    bool kept = false;
    for (const Pair& pr : pairs_) kept |= pr.tensor == t && pr.backing;
    backing_ok &= kept;
  }
  bool any = false;
  for (int k = 0; k < K; ++k) {
    if (alive[k] && !backing_ok) {
      alive[k] = false;
      out.invalid[k] = Invalid::BackingMissing;
    }
    any |= alive[k];
  }
  if (!any) return;

  // Temporal loops: steps of each and the iterations outside each level's tile.
  const int nt = static_cast<int>(temporal_.size());
  int64_t steps[kMaxLoops][kBatchLanes], above[kMaxLevels][kBatchLanes], prefix[kBatchLanes];
  std::fill_n(prefix, kBatchLanes, int64_t{1});
  for (int j = 0, l = L - 1; j <= nt; ++j) {
    while (l >= 0 && temporal_above_[l] == j) {
      std::copy_n(prefix, kBatchLanes, above[l]);
      --l;
    }
    if (j == nt) break;
    const int i = temporal_[j];
    for (int k = 0; k < K; ++k) {
      steps[j][k] = (f[i][k] - 1) * prefix[k];
      prefix[k] *= f[i][k];
    }
  }
  const int64_t* iterations = prefix;  // all temporal factors = compute cycles

  struct Counts {
    int64_t reads, fills, updates;
  };
  Counts per[kMaxLevels][kMaxTensors][kBatchLanes];
  int64_t occupancy[kMaxLevels][kBatchLanes] = {};
  bool kept_at[kMaxLevels][kMaxTensors] = {};
  int64_t child_fills[kMaxTensors][kBatchLanes];
  for (int t = 0; t < T; ++t) std::copy_n(iterations, kBatchLanes, child_fills[t]);

  for (const Pair& pr : pairs_) {
    const int t = pr.tensor, l = pr.level;
    const PlanTensor& pt = p.tensors[t];
    kept_at[l][t] = true;
    for (int k = 0; k < K; ++k) {
      if (!alive[k]) continue;
      DimVec extent;
      extent.fill(1);
      int64_t vol = 1;
      for (int d = 0; d < pr.n_dims; ++d) {
        int64_t e = 1;
        for (int q = 0; q < kMaxTerms; ++q) e += pr.dim_coeff[d][q] * (ext[l][pr.dim_rank[d][q]][k] - 1);
        extent[d] = e;
        vol *= e;
      }
      occupancy[l][k] += vol;
      // Refills: as refill_count() in model.cpp.
      int64_t fills = 0;
      if (!pr.backing) {
        // Loops of factor 1 in this lane are no loops (as flatten() drops them).
        int inner = temporal_above_[l] - 1;
        while (inner >= 0 && f[temporal_[inner]][k] == 1) --inner;
        if (inner < 0) {
          fills = vol;
        } else {
          const int ii = temporal_[inner];
          const int rin = rank_[ii];
          DimVec t_in{}, rewind{};
          for (int q = 0; q < pt.rank_terms[rin]; ++q) {
            t_in[pt.rank_dim[rin][q]] = pt.rank_coeff[rin][q] * stride[ii][k];
            rewind[pt.rank_dim[rin][q]] = -t_in[pt.rank_dim[rin][q]];
          }
          const uint64_t key_in = pt.rank_key[rin] * static_cast<uint64_t>(stride[ii][k]);
          uint64_t key_rewind = 0 - key_in;
          int64_t overlap = 1;
          for (int d = 0; d < kMaxTensorDims; ++d)
            overlap *= std::max<int64_t>(0, extent[d] - (t_in[d] < 0 ? -t_in[d] : t_in[d]));
          const int64_t fresh_in = vol - overlap;
          int64_t same_steps = steps[inner][k];
          bool rewind_is_t_in = key_rewind == key_in && equal(rewind, t_in);
          for (int j = inner - 1; j >= 0; --j) {
            const int i = temporal_[j];
            if (f[i][k] == 1) continue;
            const int r = rank_[i];
            bool same = rewind_is_t_in;
            if (pt.rank_terms[r] != 0) {
              const uint64_t key_step = pt.rank_key[r] * static_cast<uint64_t>(stride[i][k]);
              same = key_rewind + key_step == key_in;
              if (same) {
                DimVec t_j = rewind;
                for (int q = 0; q < pt.rank_terms[r]; ++q) t_j[pt.rank_dim[r][q]] += pt.rank_coeff[r][q] * stride[i][k];
                same = equal(t_j, t_in);
              }
              for (int q = 0; q < pt.rank_terms[r]; ++q) rewind[pt.rank_dim[r][q]] -= pt.rank_coeff[r][q] * stride[i][k];
              key_rewind -= key_step;
              rewind_is_t_in = key_rewind == key_in && equal(rewind, t_in);
            }
            if (same) same_steps += steps[j][k];
          }
          fills = vol * above[l][k] - (vol - fresh_in) * same_steps;
        }
      }
      // Multicast / reduction groups of the spatial loops between the child and this level.
      int64_t groups = 1;
      if (pr.between_simple) {
        for (const Spatial& s : pr.between) groups *= f[s.loop][k];
      } else {
        // Per level: loops on distinct dimensions multiply; two on one dimension count distinct
        // sums; anything else falls back to the scalar model's enumeration via evaluate().
        for (int lv = pr.child + 1; lv <= l; ++lv) {
          int64_t lg = 1;
          const Spatial* first_on[kMaxTensorDims] = {};
          int hits[kMaxTensorDims] = {};
          int64_t dim_groups[kMaxTensorDims];
          bool general = false;
          for (const Spatial& s : pr.between) {
            if (s.level != lv) continue;
            if (s.dim < 0) {
              general = true;
              continue;
            }
            if (hits[s.dim] == 0) {
              first_on[s.dim] = &s;
              dim_groups[s.dim] = f[s.loop][k];
            } else if (hits[s.dim] == 1) {
              const Spatial& a = *first_on[s.dim];
              dim_groups[s.dim] = distinct_pair(a.coeff * stride[a.loop][k], f[a.loop][k],
                                                s.coeff * stride[s.loop][k], f[s.loop][k]);
            } else {
              general = true;
            }
            ++hits[s.dim];
          }
          if (general) {
            groups = -1;
            break;
          }
          for (int d = 0; d < kMaxTensorDims; ++d)
            if (hits[d] > 0) lg *= dim_groups[d];
          groups *= lg;
        }
      }
      if (groups < 0) {
        // Rare: a rank in several dimensions of one tensor, or three spatial loops on one
        // dimension. Take the scalar model's answer for this lane.
        FlatMapping one;
        one.n_loops = static_cast<int8_t>(n);
        one.n_levels = static_cast<int8_t>(L);
        for (int i = 0; i < n; ++i) one.loops[i] = {level_[i], rank_[i], kind_[i], f[i][k]};
        for (const Pair& q : pairs_) one.keep[q.level] |= static_cast<TensorMask>(1u << q.tensor);
        const CostResult r = mapfuse::evaluate(p, one);
        out.invalid[k] = r.invalid;
        out.energy_pj[k] = r.energy_pj;
        out.cycles[k] = r.cycles;
        alive[k] = false;
        continue;
      }
      const int64_t transfers = child_fills[t][k] * groups;
      Counts& c = per[l][t][k];
      c.fills = fills;
      if (pr.output) {
        int64_t partition = pt.volume;
        for (int8_t i : pr.partition) partition /= f[i][k];
        c.updates = transfers;
        c.reads = std::max<int64_t>(0, transfers - partition);
        if (!p.legacy_output_fills) c.fills = std::max<int64_t>(0, fills - partition);
      } else {
        c.updates = 0;
        c.reads = transfers;
      }
      child_fills[t][k] = fills;
    }
  }

  for (int k = 0; k < K; ++k) {
    if (!alive[k]) continue;
    for (int l = 0; l < L; ++l) {
      const PlanLevel& lv = p.levels[l];
      if (lv.entries > 0 && occupancy[l][k] * lv.multiple_buffering > lv.entries) {
        out.invalid[k] = Invalid::CapacityExceeded;
        break;
      }
    }
    const double cc = static_cast<double>(iterations[k]);
    double energy = static_cast<double>(p.operations) * p.op_pj;
    double cycles = cc;
    for (int l = 0; l < L; ++l) {
      const PlanLevel& lv = p.levels[l];
      const int64_t block = lv.block_size;
      auto vectors = [&](int64_t words) -> int64_t {
        return block == 1 ? words : (words + block - 1) / block * block;
      };
      double e = 0;
      int64_t rd_words = 0, wr_words = 0;
      for (int t = 0; t < T; ++t) {
        if (!kept_at[l][t]) continue;
        const Counts& c = per[l][t][k];
        e += static_cast<double>(vectors(c.reads)) * lv.read_pj +
             static_cast<double>(vectors(c.fills)) * lv.write_pj +
             static_cast<double>(vectors(c.updates)) * lv.update_pj;
        rd_words += c.reads;
        wr_words += c.fills + c.updates;
      }
      energy += e * static_cast<double>(instances[l][k]);
      const double limit = cc * (1 - 1e-9);
      const bool maybe_bound = (lv.read_bw > 0 && static_cast<double>(rd_words) > lv.read_bw * limit) ||
                               (lv.write_bw > 0 && static_cast<double>(wr_words) > lv.write_bw * limit) ||
                               (lv.shared_bw > 0 && static_cast<double>(rd_words + wr_words) > lv.shared_bw * limit);
      if (maybe_bound) {
        double rd = 0, wr = 0;
        for (int t = 0; t < T; ++t) {
          if (!kept_at[l][t]) continue;
          rd += static_cast<double>(per[l][t][k].reads) / cc;
          wr += static_cast<double>(per[l][t][k].fills + per[l][t][k].updates) / cc;
        }
        double slowdown = 1;
        if (lv.read_bw > 0 && lv.read_bw < rd) slowdown = std::min(slowdown, lv.read_bw / rd);
        if (lv.write_bw > 0 && lv.write_bw < wr) slowdown = std::min(slowdown, lv.write_bw / wr);
        if (lv.shared_bw > 0 && lv.shared_bw < wr + rd) slowdown = std::min(slowdown, lv.shared_bw / (wr + rd));
        if (slowdown < 1) cycles = std::max(cycles, std::ceil(cc / slowdown));
      }
    }
    out.energy_pj[k] = energy;
    out.cycles[k] = cycles;
  }
}

}  // namespace mapfuse
