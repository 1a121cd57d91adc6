#include "engine/cost/lanes.hpp"

#include <bit>
#include <cmath>

namespace mapfuse {
namespace {

constexpr int K = kLanes;
constexpr double kExactLimit = 4503599627370496.0;  // 2^52
constexpr int kScalarBelow = 4;  // batches of at most this many lanes go through the scalar model

// Lane vectors are plain double arrays; masks are 0.0 / 1.0 so every per-lane step is
// branch-free and vectorises.
struct alignas(64) Lane {
  double v[K];
};

struct LaneWork {
  Lane f[kMaxLoops], stride[kMaxLoops], steps[kMaxLoops], before[kMaxLoops + 1];
  Lane ext[kMaxLevels][kMaxRanks + 1];
  Lane inst[kMaxLevels], occupancy[kMaxLevels];
  Lane reads[kMaxLevels][kMaxTensors], fills[kMaxLevels][kMaxTensors], updates[kMaxLevels][kMaxTensors];
};

#define LANES _Pragma("omp simd") for (int k = 0; k < K; ++k)

__attribute__((target_clones("avx512f", "avx2", "default")))
void run_lanes(const EvalPlan& p, const NestStructure& s, const LaneFactors& fi, int count,
               LaneWork& w, Lane& energy_out, Lane& cycles_out, Lane& alive_out, int* invalid,
               Lane& biggest) {
  const int L = s.n_levels, T = p.n_tensors, R = p.n_ranks, n = s.n;
  for (int i = 0; i < n; ++i) {
    LANES w.f[i].v[k] = static_cast<double>(fi[i][k]);
    for (int k = count; k < K; ++k) w.f[i].v[k] = w.f[i].v[0];  // unused lanes repeat lane 0
  }
  Lane run[kMaxRanks + 1];
  for (int r = 0; r <= kMaxRanks; ++r) LANES run[r].v[k] = 1;
  {
    int end = n;
    for (int l = 0; l < L; ++l) {
      for (int i = end - 1; i >= s.boundary[l]; --i) {
        Lane& rr = run[s.rank[i]];
        const Lane& fv = w.f[i];
        Lane& st = w.stride[i];
        LANES {
          st.v[k] = rr.v[k];
          rr.v[k] *= fv.v[k];
        }
      }
      end = s.boundary[l];
      for (int r = 0; r <= kMaxRanks; ++r) w.ext[l][r] = run[r];
    }
  }
  // Invalidity codes per lane, in the scalar model's order (0 = none yet).
  Lane alive;
  LANES alive.v[k] = 1;
  for (int r = 0; r < R; ++r) {
    const double size = static_cast<double>(p.rank_size[r]);
    LANES alive.v[k] = run[r].v[k] == size ? alive.v[k] : 0;
  }
  for (int k = 0; k < K; ++k)
    if (alive.v[k] == 0) invalid[k] = static_cast<int>(Invalid::FactorProduct);
  Lane used;
  LANES used.v[k] = 1;
  for (int l = L - 1; l >= 0; --l) {
    Lane fx, fy;
    LANES fx.v[k] = fy.v[k] = 1;
    for (uint64_t m = s.spatial_x[l]; m; m &= m - 1) {
      const Lane& fv = w.f[std::countr_zero(m)];
      LANES fx.v[k] *= fv.v[k];
    }
    for (uint64_t m = s.spatial_y[l]; m; m &= m - 1) {
      const Lane& fv = w.f[std::countr_zero(m)];
      LANES fy.v[k] *= fv.v[k];
    }
    const double mx = static_cast<double>(p.levels[l].fanout_x), my = static_cast<double>(p.levels[l].fanout_y);
    for (int k = 0; k < K; ++k)
      if (alive.v[k] != 0 && (fx.v[k] > mx || fy.v[k] > my)) {
        alive.v[k] = 0;
        invalid[k] = static_cast<int>(Invalid::FanoutExceeded);
      }
    const double nx = static_cast<double>(p.levels[l].min_x), ny = static_cast<double>(p.levels[l].min_y);
    if (nx > 1 || ny > 1)
      for (int k = 0; k < K; ++k)
        if (alive.v[k] != 0 && (fx.v[k] < nx || fy.v[k] < ny)) {
          alive.v[k] = 0;
          invalid[k] = static_cast<int>(Invalid::FanoutUnderused);
        }
    if (s.structural == Invalid::KeepNotAllowed && s.structural_level == l)
      for (int k = 0; k < K; ++k)
        if (alive.v[k] != 0) alive.v[k] = 0, invalid[k] = static_cast<int>(Invalid::KeepNotAllowed);
    Lane& in = w.inst[l];
    LANES {
      in.v[k] = used.v[k];
      used.v[k] *= fx.v[k] * fy.v[k];
    }
  }
  if (s.structural == Invalid::BackingMissing || s.structural == Invalid::KeepMissing)
    for (int k = 0; k < K; ++k)
      if (alive.v[k] != 0) alive.v[k] = 0, invalid[k] = static_cast<int>(s.structural);
  alive_out = alive;
  bool any = false;
  for (int k = 0; k < K; ++k) any |= alive.v[k] != 0;
  if (!any) return;

  {
    Lane bef;
    LANES bef.v[k] = 1;
    for (int j = 0; j < s.n_temporal; ++j) {
      const Lane& fv = w.f[s.temporal[j]];
      Lane &b = w.before[j], &st = w.steps[j];
      LANES {
        b.v[k] = bef.v[k];
        st.v[k] = (fv.v[k] - 1) * bef.v[k];
        bef.v[k] *= fv.v[k];
      }
    }
    w.before[s.n_temporal] = bef;
  }
  const Lane& iterations = w.before[s.n_temporal];
  for (int l = 0; l < L; ++l) LANES w.occupancy[l].v[k] = 0;
  LANES biggest.v[k] = 0;
  Lane child_fills;
  for (int q = 0; q < s.n_pairs; ++q) {
    const NestStructure::Pair& pr = s.pairs[q];
    const int t = pr.tensor, l = pr.level;
    const PlanTensor& pt = p.tensors[t];
    const int D = pt.n_dims;
    if (pr.child < 0) child_fills = iterations;
    Lane extent[kMaxTensorDims], vol;
    LANES vol.v[k] = 1;
    for (int d = 0; d < D; ++d) {
      const int r = pt.plain_rank[d];
      if (r >= 0) {
        extent[d] = w.ext[l][r];
      } else {
        const PlanDim& dim = pt.dims[d];
        const Lane& e0 = w.ext[l][dim.terms[0].rank];
        const double c0 = static_cast<double>(dim.terms[0].coeff);
        LANES extent[d].v[k] = 1 + c0 * (e0.v[k] - 1);
        for (int m = 1; m < kMaxTerms; ++m) {
          const Lane& em = w.ext[l][dim.terms[m].rank];
          const double cm = static_cast<double>(dim.terms[m].coeff);
          LANES extent[d].v[k] += cm * (em.v[k] - 1);
        }
      }
      LANES vol.v[k] *= extent[d].v[k];
    }
    LANES w.occupancy[l].v[k] += vol.v[k];
    Lane fills;
    if (pr.backing) {
      LANES fills.v[k] = 0;
    } else {
      // The rewind form of the closed-form delta analysis (model.cpp, refill_vectors).
      const int above = s.temporal_above[l];
      Lane found, same, t_in[kMaxTensorDims], rewind[kMaxTensorDims];
      LANES found.v[k] = same.v[k] = 0;
      for (int d = 0; d < D; ++d) LANES t_in[d].v[k] = rewind[d].v[k] = 0;
      for (int j = above - 1; j >= 0; --j) {
        const int i = s.temporal[j];
        const int r = s.rank[i];
        const Lane& fv = w.f[i];
        const Lane& st = w.stride[i];
        const Lane& sp = w.steps[j];
        double coeff[kMaxTensorDims] = {};
        for (int m = 0; m < pt.rank_terms[r]; ++m) coeff[pt.rank_dim[r][m]] = static_cast<double>(pt.rank_coeff[r][m]);
        Lane eq;
        LANES eq.v[k] = 1;
        for (int d = 0; d < D; ++d) {
          const double c = coeff[d];
          LANES eq.v[k] = rewind[d].v[k] + c * st.v[k] == t_in[d].v[k] ? eq.v[k] : 0;
        }
        Lane first, later;
        LANES {
          const double loop = fv.v[k] > 1 ? 1 : 0;
          first.v[k] = loop * (1 - found.v[k]);
          later.v[k] = loop * found.v[k];
          same.v[k] = first.v[k] != 0 ? sp.v[k] : (later.v[k] * eq.v[k] != 0 ? same.v[k] + sp.v[k] : same.v[k]);
          found.v[k] = found.v[k] != 0 || loop != 0 ? 1 : 0;
        }
        for (int d = 0; d < D; ++d) {
          const double c = coeff[d];
          if (c == 0) continue;
          LANES {
            const double step = c * st.v[k];
            t_in[d].v[k] = first.v[k] != 0 ? step : t_in[d].v[k];
            rewind[d].v[k] = first.v[k] != 0 ? -step : (later.v[k] != 0 ? rewind[d].v[k] - step : rewind[d].v[k]);
          }
        }
      }
      Lane overlap;
      LANES overlap.v[k] = 1;
      for (int d = 0; d < D; ++d)
        LANES {
          const double o = extent[d].v[k] - t_in[d].v[k];
          overlap.v[k] *= o > 0 ? o : 0;
        }
      const Lane& bf = w.before[above];
      LANES {
        const double fresh = vol.v[k] - overlap.v[k];
        const double whole = vol.v[k] * bf.v[k];
        fills.v[k] = found.v[k] != 0 ? whole - (vol.v[k] - fresh) * same.v[k] : vol.v[k];
        biggest.v[k] = whole > biggest.v[k] ? whole : biggest.v[k];
      }
    }
    Lane groups, split;
    LANES groups.v[k] = split.v[k] = 1;
    for (uint64_t m = pr.between | pr.replicated; m; m &= m - 1) {
      const Lane& fv = w.f[std::countr_zero(m)];
      LANES groups.v[k] *= fv.v[k];
    }
    if (pr.output)
      for (uint64_t m = pr.partition; m; m &= m - 1) {
        const Lane& fv = w.f[std::countr_zero(m)];
        LANES split.v[k] *= fv.v[k];
      }
    const double volume = static_cast<double>(pt.volume);
    Lane &rd = w.reads[l][t], &fl = w.fills[l][t], &up = w.updates[l][t];
    if (pr.output) {
      const bool legacy = p.legacy_output_fills;
      if (p.output_accumulates) {  // no update lands on zero (a separate loop keeps the common one as it was)
        LANES {
          const double transfers = child_fills.v[k] * groups.v[k];
          biggest.v[k] = transfers > biggest.v[k] ? transfers : biggest.v[k];
          up.v[k] = rd.v[k] = transfers;
          fl.v[k] = child_fills.v[k] = fills.v[k];
        }
      } else {
        LANES {
          const double transfers = child_fills.v[k] * groups.v[k];
          biggest.v[k] = transfers > biggest.v[k] ? transfers : biggest.v[k];
          const double partition = volume / split.v[k];
          up.v[k] = transfers;
          const double r = transfers - partition;
          rd.v[k] = r > 0 ? r : 0;
          const double f = fills.v[k] - partition;
          fl.v[k] = legacy ? fills.v[k] : (f > 0 ? f : 0);
          child_fills.v[k] = fills.v[k];
        }
      }
    } else {
      LANES {
        const double transfers = child_fills.v[k] * groups.v[k];
        biggest.v[k] = transfers > biggest.v[k] ? transfers : biggest.v[k];
        up.v[k] = 0;
        rd.v[k] = transfers;
        fl.v[k] = fills.v[k];
        child_fills.v[k] = fills.v[k];
      }
    }
  }
  for (int k = 0; k < K; ++k) {
    if (alive.v[k] == 0) continue;
    for (int l = 0; l < L; ++l) {
      const PlanLevel& lv = p.levels[l];
      if (lv.entries > 0 && w.occupancy[l].v[k] * lv.multiple_buffering > static_cast<double>(lv.entries)) {
        invalid[k] = static_cast<int>(Invalid::CapacityExceeded);
        break;
      }
    }
  }
  Lane energy, cycles;
  const double ops = static_cast<double>(p.operations) * p.op_pj;
  LANES {
    energy.v[k] = ops;
    cycles.v[k] = iterations.v[k];
  }
  for (int l = 0; l < L; ++l) {
    const PlanLevel& lv = p.levels[l];
    const double block = static_cast<double>(lv.block_size);
    Lane e, rdw, wrw;
    LANES e.v[k] = rdw.v[k] = wrw.v[k] = 0;
    for (int t = 0; t < T; ++t) {
      if (!(s.keep[l] >> t & 1)) continue;
      const Lane &rd = w.reads[l][t], &fl = w.fills[l][t], &up = w.updates[l][t];
      const double rp = lv.read_pj, wp = lv.write_pj, upj = lv.update_pj;
      if (block == 1) {
        LANES {
          e.v[k] += rd.v[k] * rp + fl.v[k] * wp + up.v[k] * upj;
          rdw.v[k] += rd.v[k];
          wrw.v[k] += fl.v[k] + up.v[k];
        }
      } else {
        LANES {
          const double vr = std::ceil(rd.v[k] / block) * block, vf = std::ceil(fl.v[k] / block) * block,
                       vu = std::ceil(up.v[k] / block) * block;
          e.v[k] += vr * rp + vf * wp + vu * upj;
          rdw.v[k] += rd.v[k];
          wrw.v[k] += fl.v[k] + up.v[k];
        }
      }
    }
    if (lv.extra_read_words != 0 || lv.extra_write_words != 0)
      LANES {
        rdw.v[k] += lv.extra_read_words;
        wrw.v[k] += lv.extra_write_words;
      }
    const Lane& in = w.inst[l];
    LANES {
      e.v[k] *= in.v[k];
      energy.v[k] += e.v[k];
    }
    if (lv.read_bw <= 0 && lv.write_bw <= 0 && lv.shared_bw <= 0) continue;
    // Lanes whose demand reaches a bandwidth (as in the scalar model); only those need the exact
    // per-tensor demand in Timeloop's order.
    const double rbw = lv.read_bw > 0 ? lv.read_bw : INFINITY, wbw = lv.write_bw > 0 ? lv.write_bw : INFINITY,
                 sbw = lv.shared_bw > 0 ? lv.shared_bw : INFINITY;
    Lane bound;
    LANES {
      const double limit = iterations.v[k] * (1 - 1e-9);
      bound.v[k] = rdw.v[k] > rbw * limit || wrw.v[k] > wbw * limit || rdw.v[k] + wrw.v[k] > sbw * limit ? 1 : 0;
    }
    for (int k = 0; k < K; ++k) {
      const double cc = iterations.v[k];
      if (bound.v[k] != 0) {
        double rd = 0, wr = 0;
        for (int t = 0; t < T; ++t) {
          if (!(s.keep[l] >> t & 1)) continue;
          rd += w.reads[l][t].v[k] / cc;
          wr += (w.fills[l][t].v[k] + w.updates[l][t].v[k]) / cc;
        }
        rd += lv.extra_read_words / cc;
        wr += lv.extra_write_words / cc;
        double slowdown = 1;
        if (lv.read_bw > 0 && lv.read_bw < rd) slowdown = std::min(slowdown, lv.read_bw / rd);
        if (lv.write_bw > 0 && lv.write_bw < wr) slowdown = std::min(slowdown, lv.write_bw / wr);
        if (lv.shared_bw > 0 && lv.shared_bw < wr + rd) slowdown = std::min(slowdown, lv.shared_bw / (wr + rd));
        if (slowdown < 1) cycles.v[k] = std::max(cycles.v[k], std::ceil(cc / slowdown));
      }
    }
  }
  energy_out = energy;
  cycles_out = cycles;
}

}  // namespace

void evaluate_lanes(const EvalPlan& plan, const NestStructure& s, const LaneFactors& factors,
                    int count, CompactCost* out) {
  // The lane kernel always computes all kLanes lanes. A branch-and-bound search flushes most
  // buckets with one or two choices (seven-level cores: nearly every choice has its own support),
  // and then the scalar model is cheaper: one 16-lane call costs about as much as 6-13 scalar
  // evaluations (bench_cost: Lanes vs Structure). Both give the same bits (test_batch).
  bool simple = s.structural != Invalid::LevelCount && count > kScalarBelow;
  for (int q = 0; q < s.n_pairs; ++q) simple &= s.pairs[q].between_simple;
  unsigned redo = 0;
  if (simple) {
    thread_local LaneWork work;
    Lane energy{}, cycles{}, alive{}, biggest{};
    int invalid[K] = {};
    run_lanes(plan, s, factors, count, work, energy, cycles, alive, invalid, biggest);
    for (int k = 0; k < count; ++k) {
      out[k].invalid = static_cast<Invalid>(invalid[k]);
      const bool live = alive.v[k] != 0;
      out[k].energy_pj = live ? energy.v[k] : 0;
      out[k].cycles = live ? cycles.v[k] : 0;
      if (live && biggest.v[k] >= kExactLimit) redo |= 1u << k;
    }
  } else {
    redo = (1u << count) - 1;
  }
  for (int k = 0; k < count; ++k) {
    if (!(redo >> k & 1)) continue;
    int64_t f[kMaxLoops];
    for (int i = 0; i < s.n; ++i) f[i] = factors[i][k];
    out[k] = evaluate(plan, s, f);
  }
}

}  // namespace mapfuse
