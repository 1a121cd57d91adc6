// FADiff's relaxed cost model: forward pass and its hand-derived reverse pass, side by side.
// Equation numbers are those of the FADiff paper; docs/fadiff.md states every one as implemented.
//
// Conventions: level 0 is the innermost; T[0][m][d] = T_t[d][m], T[1][m][d] = T_s[d][m]; a spatial
// factor of level m fans out into level m-1 and lies inside level m's tile. All factors are > 0,
// so the adjoint of a product P with respect to one of its factors f is P / f.
#include "engine/cost/relaxed.hpp"

#include <algorithm>
#include <cmath>

#include "engine/common/error.hpp"

namespace mapfuse {
namespace {

constexpr int RP = kMaxRanks + 1;  // ranks + the pad slot of PlanTerm (extent 1)

// Smooth indicator "the loop is a real loop" (factor > 1): 0 at 1, 1 from 2 on, linear between.
inline double real_loop(double f) { return f <= 1 ? 0 : f >= 2 ? 1 : f - 1; }
inline double real_loop_d(double f) { return f > 1 && f < 2 ? 1 : 0; }
inline double pos(double v) { return v > 0 ? v : 0; }
inline bool relevant(const PlanTensor& t, int d) { return (t.relevant_ranks >> d & 1) != 0; }

struct FusionIn {
  double a_in = 0;   // sigma of the edge into the layer: share of its input supplied on chip
  double drain = 1;  // share of its output written back to DRAM (Eq. 13)
  double copy = 0;   // share of its output copied on chip to the consumer's level (Eq. 14)
};

// Everything the forward pass of one layer computes; the reverse pass reads it.
struct Tape {
  double T[2][kMaxLevels][RP];
  double E[kMaxLevels][RP];            // tile extent of rank d at level m: prod_{k<=m} T_t T_s
  double sp[kMaxLevels];               // spatial product of level m
  double inst[kMaxLevels];             // instances of level m: spatial products of the levels above
  double pes;                          // effective PEs: all spatial factors
  double irr[kMaxLevels][kMaxTensors];  // spatial product of level m over ranks t does not index
  double xirr[kMaxLevels];             // prod_{k>m} irr[k][output]
  double ext[kMaxLevels][kMaxTensors][kMaxTensorDims];
  double V[kMaxLevels][kMaxTensors];   // TileSize (Eq. 5), per instance
  double FC[kMaxLevels][kMaxTensors];  // FetchCount (Eq. 6)
  double F[kMaxLevels][kMaxTensors];   // Fill (Eq. 4), all instances, before fusion
  double Fe[kMaxLevels][kMaxTensors];  // Fill after the fusion boundary (Eq. 15)
  double bc[kMaxLevels][kMaxTensors];  // Bcast_T / Reduce_T between the level and its child
  double tr[kMaxLevels][kMaxTensors];  // transfers to the child (child fills / bc, or Ops / bc)
  double rd[kMaxLevels][kMaxTensors], fl[kMaxLevels][kMaxTensors], up[kMaxLevels][kMaxTensors];
  double rd0 = 0, up0 = 0;             // DRAM output reads / write-backs before fusion
  double cw = 0, cr = 0;               // on-chip copy (Eq. 14): writes and partial-sum reads
  double A[kMaxLevels], cyc[kMaxLevels];
  double compute = 0, energy = 0, latency = 0;
  int argmax = -1;                     // -1: compute bound; else the bandwidth-bound level
  int8_t child[kMaxLevels][kMaxTensors];
  int8_t top[kMaxTensors];
  double out_tile[kMaxTensorDims], in_tile[kMaxTensorDims];
};

struct LayerBars {
  double energy = 0, latency = 0;
  const double* occupancy = nullptr;  // per level (may be null)
  const double* out_tile = nullptr;   // per output dimension (may be null)
  const double* in_tile = nullptr;    // per input dimension (may be null)
};

// FetchCount (Eq. 6) of tensor t's tile at level m, and its reverse pass when tbar0 is given.
// The loops above level m, outermost first, are every level's temporal loops in the layer's order.
// A loop over a rank t indexes multiplies by its factor; a loop over a rank t does not index
// multiplies by 1 + (f - 1) g, where g = 1 - prod over the loops over indexed ranks inside it of
// (1 - real_loop(f)): it refetches only if a real loop over an indexed rank lies inside it
// (LoopOrder), never (Ideal).
double fetch_count(const RelaxedLayer& L, const Tape& tp, int m, int t, double fc_bar,
                   double (*tbar0)[RP]) {
  const PlanTensor& pt = L.tensors[t];
  const int M = L.n_levels, R = L.n_ranks;
  int8_t lv[kMaxLevels * kMaxRanks], rk[kMaxLevels * kMaxRanks];
  int n = 0;
  for (int k = M - 1; k > m; --k)
    for (int q = 0; q < R; ++q) lv[n] = static_cast<int8_t>(k), rk[n++] = L.order[k][q];
  double mv[kMaxLevels * kMaxRanks], g[kMaxLevels * kMaxRanks], zpre[kMaxLevels * kMaxRanks];
  const bool ideal = L.reuse == ReuseModel::Ideal;
  double z = 1, fc = 1;
  for (int j = n - 1; j >= 0; --j) {  // innermost first
    const double f = tp.T[0][lv[j]][rk[j]];
    if (relevant(pt, rk[j])) {
      mv[j] = f;
      zpre[j] = z;
      z *= 1 - real_loop(f);
    } else {
      g[j] = ideal ? 0 : 1 - z;
      mv[j] = 1 + (f - 1) * g[j];
    }
    fc *= mv[j];
  }
  if (!tbar0 || fc_bar == 0) return fc;
  double zbar = 0;  // adjoint of z as seen at the current loop
  for (int j = 0; j < n; ++j) {  // outermost first
    const double f = tp.T[0][lv[j]][rk[j]];
    const double mbar = fc_bar * fc / mv[j];
    if (relevant(pt, rk[j])) {
      tbar0[lv[j]][rk[j]] += mbar;
      const double sbar = -zbar * zpre[j];
      zbar *= 1 - real_loop(f);
      tbar0[lv[j]][rk[j]] += sbar * real_loop_d(f);
    } else {
      tbar0[lv[j]][rk[j]] += mbar * g[j];
      if (!ideal) zbar -= mbar * (f - 1);
    }
  }
  return fc;
}

inline double dim_extent(const PlanDim& dim, const double* E) {
  if (dim.n_terms == 1 && dim.terms[0].coeff == 1) return E[dim.terms[0].rank];
  double e = 1;
  for (int k = 0; k < dim.n_terms; ++k) e += static_cast<double>(dim.terms[k].coeff) * (E[dim.terms[k].rank] - 1);
  return e;
}
inline void dim_extent_bar(const PlanDim& dim, double bar, double* Ebar) {
  if (dim.n_terms == 1 && dim.terms[0].coeff == 1) {
    Ebar[dim.terms[0].rank] += bar;
    return;
  }
  for (int k = 0; k < dim.n_terms; ++k) Ebar[dim.terms[k].rank] += bar * static_cast<double>(dim.terms[k].coeff);
}
// The consumer side of Eq. 26: an input dimension without its halo, i.e. the terms over ranks the
// output also indexes (p * stride of p * stride + r * dilation); single-term dimensions as they are.
inline bool aligned_term(const RelaxedLayer& L, const PlanDim& dim, int k) {
  return dim.n_terms == 1 || relevant(L.tensors[L.output], dim.terms[k].rank);
}
inline double input_tile(const RelaxedLayer& L, const PlanDim& dim, const double* E) {
  double e = 0;
  for (int k = 0; k < dim.n_terms; ++k)
    if (aligned_term(L, dim, k)) e += static_cast<double>(dim.terms[k].coeff) * E[dim.terms[k].rank];
  return e;
}
inline void input_tile_bar(const RelaxedLayer& L, const PlanDim& dim, double bar, double* Ebar) {
  for (int k = 0; k < dim.n_terms; ++k)
    if (aligned_term(L, dim, k)) Ebar[dim.terms[k].rank] += bar * static_cast<double>(dim.terms[k].coeff);
}

void forward(const RelaxedLayer& L, const double* x, const FusionIn& fz, Tape& tp) {
  const int R = L.n_ranks, M = L.n_levels, NT = L.n_tensors, O = L.output;
  // Factors.
  for (int m = 0; m < M; ++m)
    for (int d = 0; d < RP; ++d) {
      tp.T[0][m][d] = d < R ? x[L.tt(m, d)] : 1;
      tp.T[1][m][d] = d < R && L.axis[m][d] >= 0 ? x[L.ts(m, d)] : 1;
    }
  // Tile extents (Eq. 5), instances, effective PEs, broadcast / reduction products.
  for (int d = 0; d < RP; ++d) {
    double run = 1;
    for (int m = 0; m < M; ++m) tp.E[m][d] = run *= tp.T[0][m][d] * tp.T[1][m][d];
  }
  tp.pes = 1;
  for (int m = 0; m < M; ++m) {
    double s = 1;
    for (int d = 0; d < R; ++d) s *= tp.T[1][m][d];
    tp.sp[m] = s;
    tp.pes *= s;
    for (int t = 0; t < NT; ++t) {
      double p = 1;
      for (int d = 0; d < R; ++d)
        if (!relevant(L.tensors[t], d)) p *= tp.T[1][m][d];
      tp.irr[m][t] = p;
    }
  }
  {
    double above = 1, xa = 1;
    for (int m = M - 1; m >= 0; --m) {
      tp.inst[m] = above;
      tp.xirr[m] = xa;
      above *= tp.sp[m];
      xa *= tp.irr[m][O];
    }
  }
  // Tiles, fetch counts and fills of every kept (tensor, level).
  for (int t = 0; t < NT; ++t) {
    const PlanTensor& pt = L.tensors[t];
    int8_t child = -1;
    tp.top[t] = -1;
    for (int m = 0; m < M; ++m) {
      if (!(L.levels[m].keep >> t & 1)) continue;
      double v = 1;
      for (int k = 0; k < pt.n_dims; ++k) v *= tp.ext[m][t][k] = dim_extent(pt.dims[k], tp.E[m]);
      tp.V[m][t] = v;
      tp.child[m][t] = child;
      child = static_cast<int8_t>(m);
      tp.top[t] = static_cast<int8_t>(m);
    }
    for (int m = 0; m < tp.top[t]; ++m) {
      if (!(L.levels[m].keep >> t & 1)) continue;
      tp.FC[m][t] = fetch_count(L, tp, m, t, 0, nullptr);
      tp.F[m][t] = tp.V[m][t] * tp.FC[m][t] * tp.inst[m];
      tp.Fe[m][t] = t == L.input && m == L.fusion_level ? (1 - fz.a_in) * tp.F[m][t] : tp.F[m][t];
    }
  }
  // Reads, fills, write-backs (Eqs. 7-15).
  for (int t = 0; t < NT; ++t) {
    const double vol = static_cast<double>(L.tensors[t].volume);
    for (int m = 0; m <= tp.top[t]; ++m) {
      if (!(L.levels[m].keep >> t & 1)) continue;
      const int c = tp.child[m][t];
      double bc = 1;
      for (int k = c + 1; k <= m; ++k) bc *= tp.irr[k][t];
      tp.bc[m][t] = bc;
      const double child_total = c < 0 ? L.ops : tp.Fe[c][t];
      const double tr = tp.tr[m][t] = child_total / bc;
      const bool top = m == tp.top[t];
      if (t == O) {
        double up = tr, rd = tr - vol * tp.xirr[m];
        tp.fl[m][t] = top ? 0 : L.legacy_output_fills ? tp.F[m][t] : tp.F[m][t] - vol * tp.xirr[m];
        if (top) {
          tp.up0 = up;
          tp.rd0 = rd;
          up *= fz.drain;
          rd *= fz.drain;
          tp.cw = fz.copy * tp.up0;
          tp.cr = fz.copy * tp.rd0;
        }
        tp.up[m][t] = up;
        tp.rd[m][t] = rd;
      } else {
        tp.rd[m][t] = tr;
        tp.up[m][t] = 0;
        tp.fl[m][t] = top ? 0 : tp.Fe[m][t];
      }
    }
  }
  // Accesses, energy (Eqs. 17-19) and roofline latency (Eq. 16).
  tp.energy = L.ops * L.op_pj;
  for (int m = 0; m < M; ++m) {
    const RelaxedLayer::LevelInfo& li = L.levels[m];
    double a = 0;
    for (int t = 0; t < NT; ++t) {
      if (!(li.keep >> t & 1)) continue;
      a += tp.rd[m][t] + tp.fl[m][t] + tp.up[m][t];
      tp.energy += tp.rd[m][t] * li.read_pj + tp.fl[m][t] * li.write_pj + tp.up[m][t] * li.update_pj;
    }
    if (m == L.fusion_level) {
      a += tp.cw + tp.cr;
      tp.energy += tp.cw * li.write_pj + tp.cr * li.read_pj;
    }
    tp.A[m] = a;
  }
  tp.compute = L.ops / tp.pes;
  tp.latency = tp.compute;
  tp.argmax = -1;
  for (int m = 0; m < M; ++m) {
    const double bw = L.levels[m].bandwidth;
    tp.cyc[m] = bw > 0 ? tp.A[m] / (tp.inst[m] * bw) : 0;
    if (tp.cyc[m] > tp.latency) tp.latency = tp.cyc[m], tp.argmax = m;
  }
  // Tile shapes for the alignment penalty (Eq. 26), at the level where fused data lives.
  if (L.fusion_level >= 0) {
    const PlanTensor& po = L.tensors[O];
    for (int k = 0; k < po.n_dims; ++k) tp.out_tile[k] = dim_extent(po.dims[k], tp.E[L.fusion_level]);
    if (L.input >= 0) {
      const PlanTensor& pi = L.tensors[L.input];
      for (int k = 0; k < pi.n_dims; ++k) tp.in_tile[k] = input_tile(L, pi.dims[k], tp.E[L.fusion_level]);
    }
  }
}

// Reverse pass: accumulates d(objective)/dx into gx and returns the adjoints of the fusion inputs.
void backward(const RelaxedLayer& L, const FusionIn& fz, const Tape& tp, const LayerBars& in, double* gx,
              FusionIn& fbar) {
  const int R = L.n_ranks, M = L.n_levels, NT = L.n_tensors, O = L.output;
  double Tbar[2][kMaxLevels][RP] = {};
  double Ebar[kMaxLevels][RP] = {};
  double spbar[kMaxLevels] = {}, instbar[kMaxLevels] = {}, xirrbar[kMaxLevels] = {};
  double irrbar[kMaxLevels][kMaxTensors] = {};
  double Vbar[kMaxLevels][kMaxTensors] = {}, Fbar[kMaxLevels][kMaxTensors] = {};
  double Febar[kMaxLevels][kMaxTensors] = {};
  double Abar[kMaxLevels] = {};
  double pesbar = 0;
  fbar = {0, 0, 0};

  // Latency: the argmax term.
  if (tp.argmax < 0) {
    pesbar -= in.latency * tp.compute / tp.pes;
  } else {
    const int m = tp.argmax;
    const double bw = L.levels[m].bandwidth;
    Abar[m] += in.latency / (tp.inst[m] * bw);
    instbar[m] -= in.latency * tp.cyc[m] / tp.inst[m];
  }
  // Energy and accesses -> per-action adjoints.
  double rdbar[kMaxLevels][kMaxTensors] = {}, flbar[kMaxLevels][kMaxTensors] = {}, upbar[kMaxLevels][kMaxTensors] = {};
  for (int m = 0; m < M; ++m) {
    const RelaxedLayer::LevelInfo& li = L.levels[m];
    for (int t = 0; t < NT; ++t) {
      if (!(li.keep >> t & 1)) continue;
      rdbar[m][t] = in.energy * li.read_pj + Abar[m];
      flbar[m][t] = in.energy * li.write_pj + Abar[m];
      upbar[m][t] = in.energy * li.update_pj + Abar[m];
    }
  }
  double cwbar = 0, crbar = 0;
  if (L.fusion_level >= 0) {
    const RelaxedLayer::LevelInfo& li = L.levels[L.fusion_level];
    cwbar = in.energy * li.write_pj + Abar[L.fusion_level];
    crbar = in.energy * li.read_pj + Abar[L.fusion_level];
  }
  if (in.occupancy)
    for (int m = 0; m < M; ++m)
      for (int t = 0; t < NT; ++t)
        if (L.levels[m].keep >> t & 1) Vbar[m][t] += in.occupancy[m] * L.levels[m].buffering;
  // Traffic, outermost pair of each tensor first (a pair's child total is its child's fill).
  for (int t = 0; t < NT; ++t) {
    const double vol = static_cast<double>(L.tensors[t].volume);
    for (int m = tp.top[t]; m >= 0; --m) {
      if (!(L.levels[m].keep >> t & 1)) continue;
      const bool top = m == tp.top[t];
      double trbar;
      if (t == O) {
        double rd0bar = rdbar[m][t], up0bar = upbar[m][t];
        if (top) {
          fbar.drain += rdbar[m][t] * tp.rd0 + upbar[m][t] * tp.up0;
          fbar.copy += cwbar * tp.up0 + crbar * tp.rd0;
          rd0bar = rdbar[m][t] * fz.drain + crbar * fz.copy;
          up0bar = upbar[m][t] * fz.drain + cwbar * fz.copy;
        }
        trbar = up0bar + rd0bar;
        xirrbar[m] -= rd0bar * vol;
        if (!top) {
          Fbar[m][t] += flbar[m][t];
          if (!L.legacy_output_fills) xirrbar[m] -= flbar[m][t] * vol;
        }
      } else {
        trbar = rdbar[m][t];
        if (!top) Febar[m][t] += flbar[m][t];
      }
      if (!top) {  // Fe -> F (all uses of Fe[m][t] are in: the parent pair came first)
        if (t == L.input && m == L.fusion_level) {
          Fbar[m][t] += Febar[m][t] * (1 - fz.a_in);
          fbar.a_in -= Febar[m][t] * tp.F[m][t];
        } else {
          Fbar[m][t] += Febar[m][t];
        }
      }
      const int c = tp.child[m][t];
      const double bc = tp.bc[m][t];
      const double bcbar = -trbar * tp.tr[m][t] / bc;
      if (c >= 0) Febar[c][t] += trbar / bc;
      for (int k = c + 1; k <= m; ++k) irrbar[k][t] += bcbar * bc / tp.irr[k][t];
    }
    // Fills: F = V * FC * inst.
    for (int m = 0; m < tp.top[t]; ++m) {
      if (!(L.levels[m].keep >> t & 1) || Fbar[m][t] == 0) continue;
      Vbar[m][t] += Fbar[m][t] * tp.FC[m][t] * tp.inst[m];
      instbar[m] += Fbar[m][t] * tp.V[m][t] * tp.FC[m][t];
      fetch_count(L, tp, m, t, Fbar[m][t] * tp.V[m][t] * tp.inst[m], Tbar[0]);
    }
    // Tiles: V = prod of dimension extents.
    const PlanTensor& pt = L.tensors[t];
    for (int m = 0; m <= tp.top[t]; ++m) {
      if (!(L.levels[m].keep >> t & 1) || Vbar[m][t] == 0) continue;
      for (int k = 0; k < pt.n_dims; ++k)
        dim_extent_bar(pt.dims[k], Vbar[m][t] * tp.V[m][t] / tp.ext[m][t][k], Ebar[m]);
    }
  }
  if (L.fusion_level >= 0) {
    if (in.out_tile) {
      const PlanTensor& po = L.tensors[O];
      for (int k = 0; k < po.n_dims; ++k) dim_extent_bar(po.dims[k], in.out_tile[k], Ebar[L.fusion_level]);
    }
    if (in.in_tile && L.input >= 0) {
      const PlanTensor& pi = L.tensors[L.input];
      for (int k = 0; k < pi.n_dims; ++k) input_tile_bar(L, pi.dims[k], in.in_tile[k], Ebar[L.fusion_level]);
    }
  }
  // Products of spatial factors.
  for (int m = 0; m < M; ++m)
    if (xirrbar[m] != 0)
      for (int k = m + 1; k < M; ++k) irrbar[k][O] += xirrbar[m] * tp.xirr[m] / tp.irr[k][O];
  for (int m = 0; m < M; ++m)
    if (instbar[m] != 0)
      for (int k = m + 1; k < M; ++k) spbar[k] += instbar[m] * tp.inst[m] / tp.sp[k];
  for (int m = 0; m < M; ++m) {
    spbar[m] += pesbar * tp.pes / tp.sp[m];
    for (int d = 0; d < R; ++d) {
      double b = spbar[m] * tp.sp[m];
      for (int t = 0; t < NT; ++t)
        if (!relevant(L.tensors[t], d)) b += irrbar[m][t] * tp.irr[m][t];
      Tbar[1][m][d] += b / tp.T[1][m][d];
    }
  }
  // Extents: E[m][d] = prod_{k<=m} T_t[d][k] T_s[d][k].
  for (int d = 0; d < R; ++d) {
    double suffix = 0;
    for (int m = M - 1; m >= 0; --m) {
      suffix += Ebar[m][d] * tp.E[m][d];
      Tbar[0][m][d] += suffix / tp.T[0][m][d];
      Tbar[1][m][d] += suffix / tp.T[1][m][d];
    }
  }
  for (int m = 0; m < M; ++m)
    for (int d = 0; d < R; ++d) {
      gx[L.tt(m, d)] += Tbar[0][m][d];
      if (L.axis[m][d] >= 0) gx[L.ts(m, d)] += Tbar[1][m][d];
    }
}

// P_valid (Eq. 21) over every factor that is a variable, P_spatial (Eq. 22) per level and axis.
void map_penalties(const RelaxedLayer& L, const double* x, double& p_valid, double& p_spatial, double w_map,
                   double* gx) {
  const int R = L.n_ranks, M = L.n_levels;
  for (int m = 0; m < M; ++m)
    for (int d = 0; d < R; ++d) {
      const double lo = pos(1 - x[L.tt(m, d)]);
      p_valid += lo * lo;
      if (gx) gx[L.tt(m, d)] -= w_map * 2 * lo;
      if (L.axis[m][d] < 0) continue;
      const double ls = pos(1 - x[L.ts(m, d)]);
      p_valid += ls * ls;
      if (gx) gx[L.ts(m, d)] -= w_map * 2 * ls;
    }
  for (int m = 0; m < M; ++m)
    for (int a = 0; a < 2; ++a) {
      double prod = 1;
      bool any = false;
      for (int d = 0; d < R; ++d)
        if (L.axis[m][d] == a) prod *= x[L.ts(m, d)], any = true;
      if (!any) continue;
      const double over = pos(prod - static_cast<double>(L.levels[m].fanout[a]));
      p_spatial += over * over;
      if (gx && over > 0)
        for (int d = 0; d < R; ++d)
          if (L.axis[m][d] == a) gx[L.ts(m, d)] += w_map * 2 * over * prod / x[L.ts(m, d)];
    }
}

}  // namespace

LoopOrders weight_stationary_orders(const Einsum& e, int n_levels) {
  uint32_t wranks = 0;
  for (size_t t = 0; t < e.tensors.size(); ++t)
    if (e.tensors[t].role == TensorRole::Weight)
      for (size_t r = 0; r < e.ranks.size(); ++r)
        if (e.rank_relevant(static_cast<int>(t), static_cast<int>(r))) wranks |= 1u << r;
  LoopOrders o{};
  for (int m = 0; m < n_levels; ++m) {
    int q = 0;
    for (int pass = 0; pass < 2; ++pass)
      for (size_t r = 0; r < e.ranks.size(); ++r)
        if (((wranks >> r & 1) != 0) == (pass == 0)) o[m][q++] = static_cast<int8_t>(r);
  }
  return o;
}

RelaxedLayer make_relaxed_layer(const Einsum& e, const Core& c, ReuseModel reuse) {
  return make_relaxed_layer(e, c, weight_stationary_orders(e, static_cast<int>(c.levels.size())), reuse);
}

RelaxedLayer make_relaxed_layer(const Einsum& e, const Core& c, const LoopOrders& orders, ReuseModel reuse) {
  if (e.op != OpKind::Mac)
    throw InputError({}, "einsum '" + e.name + "'", "the relaxed model covers MAC Einsums only");
  const EvalPlan plan = compile_plan(e, c);
  RelaxedLayer L;
  L.name = e.name;
  L.n_ranks = plan.n_ranks;
  L.n_levels = plan.n_levels;
  L.n_tensors = plan.n_tensors;
  L.output = plan.output;
  L.reuse = reuse;
  L.legacy_output_fills = plan.legacy_output_fills;
  L.ops = static_cast<double>(plan.operations);
  L.op_pj = plan.op_pj;
  L.rank_size = plan.rank_size;
  L.tensors = plan.tensors;
  L.order = orders;
  for (int t = 0; t < L.n_tensors; ++t)
    if (L.tensors[t].role == TensorRole::Input) {
      L.input = static_cast<int8_t>(t);
      break;
    }
  for (int m = 0; m < L.n_levels; ++m) {
    const PlanLevel& pl = plan.levels[m];
    // The relaxed model keeps every role a level may hold and multicasts freely; an architecture
    // that states its mapspace (docs/architectures.md) is outside what it can represent.
    if (pl.must_keep || pl.min_x > 1 || pl.min_y > 1 || pl.multicast_x != kAllRoles || pl.multicast_y != kAllRoles)
      throw InputError({}, "architecture level '" + c.levels[m].name + "'",
                       "must_keep, min_usage and multicast restrictions are not supported by the relaxed (FADiff) model");
    RelaxedLayer::LevelInfo& li = L.levels[m];
    for (int t = 0; t < L.n_tensors; ++t)
      if (pl.may_keep & role_bit(L.tensors[t].role)) li.keep |= static_cast<TensorMask>(1u << t);
    li.entries = static_cast<double>(pl.entries);
    li.buffering = pl.multiple_buffering;
    li.bandwidth = pl.shared_bw;
    li.read_pj = pl.read_pj;
    li.write_pj = pl.write_pj;
    li.update_pj = pl.update_pj;
    li.fanout = {pl.fanout_x, pl.fanout_y};
    for (int d = 0; d < L.n_ranks; ++d)
      L.axis[m][d] = axis_accepts(c.levels[m].fanout, LoopKind::SpatialX, e, d)   ? 0
                     : axis_accepts(c.levels[m].fanout, LoopKind::SpatialY, e, d) ? 1
                                                                                   : -1;
  }
  if (L.input >= 0)
    for (int m = L.n_levels - 2; m >= 0; --m)
      if (L.levels[m].keep >> L.input & 1) {
        L.fusion_level = static_cast<int8_t>(m);
        break;
      }
  return L;
}

RelaxedLayerCost relaxed_layer_cost(const RelaxedLayer& L, const double* x) {
  Tape tp;
  forward(L, x, FusionIn{}, tp);
  RelaxedLayerCost r;
  r.energy_pj = tp.energy;
  r.cycles = tp.latency;
  r.compute_cycles = tp.compute;
  for (int m = 0; m < L.n_levels; ++m) {
    r.level_accesses[m] = tp.A[m];
    r.level_cycles[m] = tp.cyc[m];
    for (int t = 0; t < L.n_tensors; ++t) {
      if (!(L.levels[m].keep >> t & 1)) continue;
      r.reads[m][t] = tp.rd[m][t];
      r.fills[m][t] = tp.fl[m][t];
      r.updates[m][t] = tp.up[m][t];
      r.occupancy[m] += tp.V[m][t];
    }
  }
  return r;
}

void factors_from_mapping(const RelaxedLayer& L, const Mapping& mp, double* x) {
  std::fill_n(x, L.n_vars(), 1.0);
  for (int m = 0; m < L.n_levels && m < static_cast<int>(mp.levels.size()); ++m)
    for (const Loop& lp : mp.levels[m].loops)
      x[lp.kind == LoopKind::Temporal ? L.tt(m, lp.rank) : L.ts(m, lp.rank)] *= static_cast<double>(lp.factor);
}

Mapping mapping_from_factors(const RelaxedLayer& L, const double* x) {
  Mapping mp;
  mp.levels.resize(L.n_levels);
  auto round = [](double v) { return std::max<int64_t>(1, std::llround(v)); };
  for (int m = 0; m < L.n_levels; ++m) {
    LevelMapping& lm = mp.levels[m];
    lm.keep = L.levels[m].keep;
    for (int q = 0; q < L.n_ranks; ++q) {
      const int d = L.order[m][q];
      const int64_t f = round(x[L.tt(m, d)]);
      if (f > 1) lm.loops.push_back({d, f, LoopKind::Temporal});
    }
    for (int d = 0; d < L.n_ranks; ++d) {
      if (L.axis[m][d] < 0) continue;
      const int64_t f = round(x[L.ts(m, d)]);
      if (f > 1) lm.loops.push_back({d, f, L.axis[m][d] == 0 ? LoopKind::SpatialX : LoopKind::SpatialY});
    }
  }
  return mp;
}

LoopOrders loop_orders_of(const Mapping& mp, int n_ranks) {
  LoopOrders o{};
  for (size_t m = 0; m < mp.levels.size() && m < kMaxLevels; ++m) {
    uint32_t seen = 0;
    int q = 0;
    for (const Loop& lp : mp.levels[m].loops)
      if (lp.kind == LoopKind::Temporal && !(seen >> lp.rank & 1)) {
        o[m][q++] = static_cast<int8_t>(lp.rank);
        seen |= 1u << lp.rank;
      }
    for (int r = 0; r < n_ranks; ++r)
      if (!(seen >> r & 1)) o[m][q++] = static_cast<int8_t>(r);
  }
  return o;
}

// --- Network. -----------------------------------------------------------------------------------
namespace {
void finish_layout(RelaxedNetwork& net) {
  const int n = static_cast<int>(net.layers.size());
  net.var_begin.assign(n, 0);
  int v = 0;
  for (int i = 0; i < n; ++i) net.var_begin[i] = v, v += net.layers[i].n_vars();
  net.sigma_begin = v;
  net.n_vars = v + static_cast<int>(net.edges.size());
}
}  // namespace

RelaxedNetwork make_relaxed_network(const RelaxedLayer& layer) {
  RelaxedNetwork net;
  net.layers.push_back(layer);
  net.in_edge = {-1};
  net.out_edges.resize(1);
  net.must_drain = {1};
  finish_layout(net);
  return net;
}

RelaxedNetwork make_relaxed_network(const Workload& w, const Core& c, ReuseModel reuse,
                                    const std::vector<LoopOrders>* orders) {
  RelaxedNetwork net;
  std::vector<int> layer_of(w.einsums.size(), -1);
  for (size_t i = 0; i < w.einsums.size(); ++i) {
    if (w.einsums[i].op != OpKind::Mac) continue;
    const int v = static_cast<int>(net.layers.size());
    if (orders && v >= static_cast<int>(orders->size()))
      throw InputError({}, "relaxed network", "fewer loop orders than MAC Einsums");
    RelaxedLayer L = orders ? make_relaxed_layer(w.einsums[i], c, (*orders)[v], reuse)
                            : make_relaxed_layer(w.einsums[i], c, reuse);
    L.einsum = static_cast<int>(i);
    L.count = static_cast<double>(w.count(static_cast<int>(i)));
    layer_of[i] = v;
    net.layers.push_back(std::move(L));
  }
  const int n = static_cast<int>(net.layers.size());
  net.in_edge.assign(n, -1);
  net.out_edges.assign(n, {});
  net.must_drain.assign(n, 0);
  for (int v = 0; v < n; ++v) {
    const RelaxedLayer& L = net.layers[v];
    if (L.input < 0 || L.fusion_level < 0) continue;
    const Einsum& e = w.einsums[L.einsum];
    const int ti = w.tensor_index(e.tensors[L.input].name);
    const int prod = ti >= 0 ? w.tensors[ti].producer : -1;
    if (prod < 0 || layer_of[prod] < 0) continue;
    const int p = layer_of[prod];
    RelaxedNetwork::Edge edge{p, v, true};
    const RelaxedLayer& P = net.layers[p];
    edge.align = P.tensors[P.output].n_dims == L.tensors[L.input].n_dims && P.fusion_level == L.fusion_level;
    net.in_edge[v] = static_cast<int>(net.edges.size());
    net.out_edges[p].push_back(static_cast<int>(net.edges.size()));
    net.edges.push_back(edge);
  }
  // An output read where no edge fuses it (or a network output) always goes to DRAM.
  for (int p = 0; p < n; ++p) {
    const Einsum& e = w.einsums[net.layers[p].einsum];
    const TensorInfo& ti = w.tensors[w.tensor_index(e.tensors[net.layers[p].output].name)];
    if (ti.consumers.empty()) net.must_drain[p] = 1;
    for (int ce : ti.consumers) {
      const int v = layer_of[ce];
      const bool fused_here = v >= 0 && net.in_edge[v] >= 0 && net.edges[net.in_edge[v]].producer == p;
      if (!fused_here) net.must_drain[p] = 1;
    }
  }
  finish_layout(net);
  return net;
}

std::vector<double> relaxed_trivial_point(const RelaxedNetwork& net) {
  std::vector<double> x(net.n_vars, 1.0);
  for (size_t v = 0; v < net.layers.size(); ++v) {
    const RelaxedLayer& L = net.layers[v];
    for (int d = 0; d < L.n_ranks; ++d)
      x[net.tt(static_cast<int>(v), L.n_levels - 1, d)] = static_cast<double>(L.rank_size[d]);
  }
  for (size_t e = 0; e < net.edges.size(); ++e) x[net.sigma(static_cast<int>(e))] = 0;
  return x;
}

void derive_dram_factors(const RelaxedNetwork& net, std::span<double> x) {
  for (size_t v = 0; v < net.layers.size(); ++v) {
    const RelaxedLayer& L = net.layers[v];
    const double* lx = x.data() + net.var_begin[v];
    for (int d = 0; d < L.n_ranks; ++d) {
      double inner = 1;
      for (int m = 0; m < L.n_levels; ++m) {
        if (m < L.n_levels - 1) inner *= lx[L.tt(m, d)];
        if (L.axis[m][d] >= 0) inner *= lx[L.ts(m, d)];
      }
      x[net.tt(static_cast<int>(v), L.n_levels - 1, d)] = static_cast<double>(L.rank_size[d]) / inner;
    }
  }
}

void chain_dram_gradient(const RelaxedNetwork& net, std::span<const double> x, std::span<double> grad) {
  for (size_t v = 0; v < net.layers.size(); ++v) {
    const RelaxedLayer& L = net.layers[v];
    const int b = net.var_begin[v], top = L.n_levels - 1;
    for (int d = 0; d < L.n_ranks; ++d) {
      const int di = b + L.tt(top, d);
      const double gd = grad[di] * x[di];  // dD/dy = -D / y
      for (int m = 0; m < L.n_levels; ++m) {
        if (m < top) grad[b + L.tt(m, d)] -= gd / x[b + L.tt(m, d)];
        if (L.axis[m][d] >= 0) grad[b + L.ts(m, d)] -= gd / x[b + L.ts(m, d)];
      }
      grad[di] = 0;
    }
  }
}

RelaxedWorkspace::RelaxedWorkspace(const RelaxedNetwork& net)
    : state(net.layers.size()), req(net.layers.size() * kMaxLevels), req_bar(net.layers.size() * kMaxLevels) {}

double relaxed_loss(const RelaxedNetwork& net, std::span<const double> x, const LossWeights& w,
                    RelaxedWorkspace& ws, RelaxedCost* cost, std::span<double> grad) {
  const int n = static_cast<int>(net.layers.size());
  const bool want_grad = !grad.empty();
  if (want_grad) std::fill(grad.begin(), grad.end(), 0.0);
  auto sigma = [&](int e) { return x[net.sigma(e)]; };
  // Fusion inputs (Eqs. 13-15; with several consumers: written back unless every one is fused,
  // copied on chip if any is).
  for (int v = 0; v < n; ++v) {
    auto& st = ws.state[v];
    st.a_in = net.in_edge[v] >= 0 ? sigma(net.in_edge[v]) : 0;
    double all = 1, none = 1;
    for (int e : net.out_edges[v]) all *= sigma(e), none *= 1 - sigma(e);
    st.drain = net.must_drain[v] ? 1 : 1 - all;
    st.copy = net.out_edges[v].empty() ? 0 : 1 - none;
  }
  // Layers.
  RelaxedCost c;
  Tape tp;
  for (int v = 0; v < n; ++v) {
    const RelaxedLayer& L = net.layers[v];
    auto& st = ws.state[v];
    forward(L, x.data() + net.var_begin[v], FusionIn{st.a_in, st.drain, st.copy}, tp);
    st.energy = tp.energy;
    st.latency = tp.latency;
    for (int m = 0; m < L.n_levels; ++m) {
      double occ = 0;
      for (int t = 0; t < L.n_tensors; ++t)
        if (L.levels[m].keep >> t & 1) occ += tp.V[m][t];
      st.occupancy[m] = occ * L.levels[m].buffering;
    }
    std::copy_n(tp.out_tile, kMaxTensorDims, st.out_tile.begin());
    std::copy_n(tp.in_tile, kMaxTensorDims, st.in_tile.begin());
    c.energy_pj += L.count * tp.energy;
    c.cycles += L.count * tp.latency;
    map_penalties(L, x.data() + net.var_begin[v], c.p_valid, c.p_spatial, w.map,
                  want_grad ? grad.data() + net.var_begin[v] : nullptr);
    st.a_in_bar = st.drain_bar = st.copy_bar = 0;
    st.occupancy_bar.fill(0);
    st.out_tile_bar.fill(0);
    st.in_tile_bar.fill(0);
  }
  c.edp = c.energy_pj * c.cycles;
  // P_mem (Eqs. 24-25). At the level where fused data lives, each group needs room for all its
  // members: with sigma relaxed, the group rooted at v (probability 1 - sigma_in(v)) holds
  // Req(v) = S(v) + sum over fused edges v->u of sigma * Req(u). Elsewhere, each layer alone.
  const int n_levels = n > 0 ? net.layers[0].n_levels : 0;
  for (int m = 0; m < n_levels; ++m) {
    const RelaxedLayer& L0 = net.layers[0];
    const double cap = L0.levels[m].entries;
    if (cap <= 0) continue;
    const bool group = m == L0.fusion_level;
    for (int v = n - 1; v >= 0; --v) {
      double r = ws.state[v].occupancy[m];
      if (group)
        for (int e : net.out_edges[v]) r += sigma(e) * ws.req[net.edges[e].consumer * kMaxLevels + m];
      ws.req[v * kMaxLevels + m] = r;
      const double start = group && net.in_edge[v] >= 0 ? 1 - sigma(net.in_edge[v]) : 1;
      const double over = pos(r - cap);
      c.p_mem += start * over * over;
      ws.req_bar[v * kMaxLevels + m] = w.mem * start * 2 * over;
      if (want_grad && group && net.in_edge[v] >= 0) grad[net.sigma(net.in_edge[v])] -= w.mem * over * over;
    }
    if (!want_grad) continue;
    for (int v = 0; v < n; ++v) {  // producers before consumers
      const double rb = ws.req_bar[v * kMaxLevels + m];
      ws.state[v].occupancy_bar[m] += rb;
      if (!group) continue;
      for (int e : net.out_edges[v]) {
        const int u = net.edges[e].consumer;
        grad[net.sigma(e)] += rb * ws.req[u * kMaxLevels + m];
        ws.req_bar[u * kMaxLevels + m] += rb * sigma(e);
      }
    }
  }
  // P_align (Eq. 26), weighted by sigma.
  for (size_t e = 0; e < net.edges.size(); ++e) {
    const auto& ed = net.edges[e];
    if (!ed.align) continue;
    const RelaxedLayer& P = net.layers[ed.producer];
    auto& sp = ws.state[ed.producer];
    auto& sc = ws.state[ed.consumer];
    const double s = sigma(static_cast<int>(e));
    double sq = 0;
    for (int k = 0; k < P.tensors[P.output].n_dims; ++k) {
      const double diff = sp.out_tile[k] - sc.in_tile[k];
      sq += diff * diff;
      sp.out_tile_bar[k] += w.align * s * 2 * diff;
      sc.in_tile_bar[k] -= w.align * s * 2 * diff;
    }
    c.p_align += s * sq;
    if (want_grad) grad[net.sigma(static_cast<int>(e))] += w.align * sq;
  }
  c.loss = w.edp * c.edp + w.map * c.p_map() + w.mem * c.p_mem + w.align * c.p_align;
  if (cost) *cost = c;
  if (!want_grad) return c.loss;
  // Reverse pass through every layer (the forward pass is recomputed into the tape).
  for (int v = 0; v < n; ++v) {
    const RelaxedLayer& L = net.layers[v];
    auto& st = ws.state[v];
    const FusionIn fz{st.a_in, st.drain, st.copy};
    forward(L, x.data() + net.var_begin[v], fz, tp);
    LayerBars bars;
    bars.energy = w.edp * L.count * c.cycles;
    bars.latency = w.edp * L.count * c.energy_pj;
    bars.occupancy = st.occupancy_bar.data();
    bars.out_tile = st.out_tile_bar.data();
    bars.in_tile = st.in_tile_bar.data();
    FusionIn fb;
    backward(L, fz, tp, bars, grad.data() + net.var_begin[v], fb);
    st.a_in_bar = fb.a_in;
    st.drain_bar = fb.drain;
    st.copy_bar = fb.copy;
  }
  // Fusion inputs -> sigma.
  for (int v = 0; v < n; ++v) {
    const auto& st = ws.state[v];
    if (net.in_edge[v] >= 0) grad[net.sigma(net.in_edge[v])] += st.a_in_bar;
    const auto& outs = net.out_edges[v];
    for (size_t i = 0; i < outs.size(); ++i) {
      double others_all = 1, others_none = 1;
      for (size_t j = 0; j < outs.size(); ++j)
        if (j != i) others_all *= sigma(outs[j]), others_none *= 1 - sigma(outs[j]);
      if (!net.must_drain[v]) grad[net.sigma(outs[i])] -= st.drain_bar * others_all;
      grad[net.sigma(outs[i])] += st.copy_bar * others_none;
    }
  }
  return c.loss;
}

}  // namespace mapfuse
