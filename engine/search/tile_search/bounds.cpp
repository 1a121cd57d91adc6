// Lower bounds. Scalar (branch and bound): the compute steps and the cheapest service per step of
// every completion of the inner levels. Completion bounds (partial pruning and FFM's fronts): per
// way the free levels can use their fan-out, the least energy and latency any completion of a
// partial choice can reach, and the classification of outer choices whose every completion the
// sink already beats.
#include <algorithm>
#include <cmath>
#include <limits>

#include <numeric>

#include "engine/search/tile_search/worker_state.hpp"

namespace mapfuse {

double window_extent(const PlanDim& dim, const double* cum) {
  double ext = 1;
  for (int i = 0; i < dim.n_terms; ++i)
    if (const PlanTerm& term = dim.terms[i]; term.coeff != 0)
      ext += static_cast<double>(term.coeff) * (cum[term.rank] - 1);
  return ext;
}

double TileSearch::bandwidth_cycles(int l, double r, double w) const {
  // Whole cycles level l needs to read r and write w words per instance at its bandwidths, at
  // least: the model rounds its bandwidth time up, and the bound gives way (1e-9) for sums made in
  // another order and for the reciprocals (a few ulps), which save three divisions per level of
  // every bound.
  const std::array<double, 3>& inv = inv_bw_[static_cast<size_t>(l)];
  const double time = std::max({r * inv[0], w * inv[1], (r + w) * inv[2]});
  return std::ceil(time * (1 - 1e-9));
}

double TileSearch::serving_energy(const LevelChoice* chosen, const LevelSummary* sums) const {
  // tensor_terms' `served` with every level chosen: the innermost keeper m serves
  // operations x its groups over the spatial factors of levels 0..m (per_op), and the output's
  // keeper reads all but the first update of each value per instance that starts its own sums.
  const double ops = static_cast<double>(plan_.operations);
  double e = ops * plan_.op_pj;
  for (int t = 0; t < T; ++t) {
    int m = 0;
    while (m < L && !(chosen[m].keep >> t & 1)) ++m;
    if (m == L) continue;
    double per_op = 1;
    for (int k = 0; k <= m; ++k) per_op *= sums[k].per_op[t];
    const double words = ops * per_op;
    e += words * serve_pj[m][t];
    if (t == plan_.output) {
      double reducing = 1;
      for (int k = m + 1; k < L; ++k) reducing *= sums[k].reducing;
      e += output_reads(words, reducing) * plan_.levels[static_cast<size_t>(m)].read_pj;
    }
  }
  return e * (1 - 1e-9);
}

void TileSearch::fix_keep(int m, TensorMask keep, KeepSets& out) const {
  out = keep_sets_;
  out.may[m] = out.must[m] = keep;
  for (int l = 0; l < m; ++l) {
    out.above[l] = 0;
    for (int t = 0; t < T; ++t)
      for (int k = l + 1; k < L; ++k) {
        if (out.may[k] >> t & 1) out.above[l] |= static_cast<TensorMask>(1u << t);
        if (out.must[k] >> t & 1) break;
      }
  }
}

double TileSearch::serve_from_above(int l, const std::array<int64_t, kMaxRanks>& rest, int t, double words,
                                    bool from_l, bool compulsory, const KeepSets* ks) const {
  const KeepSets& k = ks ? *ks : keep_sets_;
  // A word a level m above l reads serves the instances of the fan-outs of levels l+1..m that
  // share it: spatial factors over ranks t does not index on axes that multicast t (the others
  // split t's values or its groups). Per axis at most its size and what is left of the ranks it
  // may spread; all together at most what is left of t's other ranks. Levels beyond the first one
  // that keeps t in every choice cannot be the innermost keeping it.
  // Whichever level serves, the top (t's backing store) reads (updates) each of t's values at
  // least once; a level between is besides filled with each value t's compute touches (an
  // input's): so the least over the levels that may serve of the serving and those accesses, not
  // only the larger of the cheapest serving and the top's (which left out the whole fill of the
  // serving level: a tenth of the energy of FSRCNN's whole layers on Stream's Eyeriss cores).
  const PlanTensor& pt = plan_.tensors[static_cast<size_t>(t)];
  const RoleMask role = role_bit(pt.role);
  const bool out = t == plan_.output;
  const bool top_backs = k.may[L - 1] >> t & 1;
  const double values = out ? static_cast<double>(pt.volume) : touched_[static_cast<size_t>(t)];
  const double least = compulsory ? values * (out ? top_update_pj(t) : top_read_pj(t)) : 0;
  // A window tensor's spatial loops above l over ranks of one dimension share values the
  // multicast groups do not count (s + q under S and Q): an axis that may do so (window_axes_)
  // may share its whole fan-out; the others only what their multicast allows.
  const bool window = window_tensors_ >> t & 1;
  auto cost = [&](int m, double pj) {
    const double serving = words * pj;
    if (!compulsory) return serving;
    if (m == L - 1) return std::max(serving, least);
    if (!top_backs) return std::max(serving, least);  // another level may back t: no fill known
    return serving + least + (out ? 0.0 : values * plan_.levels[static_cast<size_t>(m)].write_pj);
  };
  auto left = [&](uint32_t ranks) {
    double n = 1;
    for (int r = 0; r < R; ++r)
      if (ranks >> r & 1) n *= static_cast<double>(rest[r]);
    return n;
  };
  const uint32_t others = ~static_cast<uint32_t>(pt.relevant_ranks) & ((1u << R) - 1);
  const double most = left(others);
  double shared = 1, shared_window = 1, best = std::numeric_limits<double>::infinity();
  if (from_l && (k.may[l] >> t & 1)) best = cost(l, serve_pj[l][t]);
  for (int m = l + 1; m < L; ++m) {
    const PlanLevel& lv = plan_.levels[static_cast<size_t>(m)];
    const double mx = lv.multicast_x & role ? std::min(static_cast<double>(lv.fanout_x), left(x_ok[m] & others)) : 1;
    const double my = lv.multicast_y & role ? std::min(static_cast<double>(lv.fanout_y), left(y_ok[m] & others)) : 1;
    shared *= mx * my;
    if (window) {
      const uint8_t axes = window_axes_[static_cast<size_t>(m)][static_cast<size_t>(t)];
      shared_window *= (axes & 1 ? static_cast<double>(lv.fanout_x) : mx) * (axes & 2 ? static_cast<double>(lv.fanout_y) : my);
    }
    if (k.may[m] >> t & 1)
      best = std::min(best, cost(m, serve_pj[m][t] / (window ? std::max(shared_window, std::min(shared, most)) : std::min(shared, most))));
    if (k.must[m] >> t & 1) break;  // the innermost level keeping t is no further out
  }
  return best;
}

double TileSearch::via_parent_energy(int below, int t, double words, const KeepSets* ks, double reads) const {
  const KeepSets& k = ks ? *ks : keep_sets_;
  // The next level above `below` keeping t takes `words` (reads of an input's fills, updates of
  // the output's drains). If it is the top, at the top's price; if a level between, at its own,
  // and that level is then filled with each touched value of an input and the top still reads
  // (updates) each value once.
  const PlanTensor& pt = plan_.tensors[static_cast<size_t>(t)];
  const bool out = t == plan_.output;
  const double values = out ? static_cast<double>(pt.volume) : touched_[static_cast<size_t>(t)];
  const double top_pj = out ? top_update_pj(t) : top_read_pj(t);
  const bool top_backs = k.may[L - 1] >> t & 1;
  double best = std::numeric_limits<double>::infinity();
  for (int m = below + 1; m < L; ++m) {
    if (!(k.may[m] >> t & 1)) continue;
    const PlanLevel& lv = plan_.levels[static_cast<size_t>(m)];
    const double own = words * (out ? lv.update_pj : lv.read_pj) + reads * lv.read_pj;
    best = std::min(best, m == L - 1 ? own : !top_backs ? own : own + values * top_pj + (out ? 0.0 : values * lv.write_pj));
    if (k.must[m] >> t & 1) break;
  }
  return std::isfinite(best) ? best : 0;
}

double TileSearch::spread_above(int l, const std::array<int64_t, kMaxRanks>& rest, uint32_t ranks) const {
  // A spatial factor divides what is left of its rank, and each axis takes only the ranks it
  // accepts, at most its fan-out: per level above l and axis, at most the smaller of the two.
  // All together at most what is left of the ranks, and the fan-outs' product.
  // For all ranks, a level's table gives its best use exactly (make_spread_tables).
  double all = 1, levels = 1;
  for (int r = 0; r < R; ++r)
    if (ranks >> r & 1) all *= static_cast<double>(rest[r]);
  const bool every = ranks == (1u << R) - 1;
  for (int m = l + 1; m <= top && m < L; ++m) {
    const PlanLevel& lv = plan_.levels[static_cast<size_t>(m)];
    if (lv.fanout_x * lv.fanout_y <= 1) continue;
    const SpreadTable& st = spread_table[static_cast<size_t>(m)];
    if (every && !st.most.empty()) {
      size_t i = 0;
      for (size_t k = 0; k < st.ranks.size(); ++k) {
        const std::vector<int64_t>& d = divs(e_.ranks[static_cast<size_t>(st.ranks[k])].size);
        i += static_cast<size_t>(std::lower_bound(d.begin(), d.end(), rest[st.ranks[k]]) - d.begin()) * st.stride[k];
      }
      levels *= st.most[i];
      continue;
    }
    double x = 1, y = 1;
    for (int r = 0; r < R; ++r) {
      if (!(ranks >> r & 1)) continue;
      if (x_ok[m] >> r & 1) x *= static_cast<double>(rest[r]);
      if (y_ok[m] >> r & 1) y *= static_cast<double>(rest[r]);
    }
    levels *= std::min(x, static_cast<double>(lv.fanout_x)) * std::min(y, static_cast<double>(lv.fanout_y));
  }
  return std::min({all, levels, static_cast<double>(fanout_above[l])});
}

double TileSearch::plain_tile_moves(const LevelSummary* sums, int k, int l, int t,
                                    const std::array<int64_t, kMaxRanks>& rest, double above_l,
                                    double tile_values, double rest_all, double* all_each) const {
  // With every dimension one rank, each tile k holds is new when it moves (no overlap), so an
  // instance takes its whole tile once per iteration of the loops from the outermost down to the
  // innermost one above k over a rank t indexes: at the lowest level j above k with such a factor,
  // its loops over t's ranks (the others may sit inside them), and every loop of the levels above
  // j (all outside j's). Above l: at least the temporal iterations left.
  // With halos (a dimension p*stride + r), only the plain ranks (alone in a dimension, coefficient
  // 1) count: a step of one moves the tile to new values of that dimension, so all of it is new;
  // a window rank's step may bring one new row only, or none (p+1, r=0 after p, r=2 with stride 2).
  // Every move counted is then a plain rank's step (or the restart of its loop), to values of
  // that dimension the previous tile did not have: the whole tile is new, window extents and all
  // (`tile_values`, from the caller; without it, the product over the plain dimensions).
  double tile = tile_values;
  if (!(tile > 0)) {
    tile = 1;
    for (int j = 0; j <= k; ++j) tile *= sums[j].tile[t];
  }
  // Per instance, the spatial factors above l (S of them) leave rest_all / S iterations above l
  // (over t's ranks: own / the part of S over them); all instances of k are the chosen ones times
  // S, so together they take at least the unspread counts.
  double refills = 1;
  int j = k + 1;
  for (; j <= l; ++j)
    if (sums[j].own[t] > 1) {
      refills = sums[j].own[t];
      break;
    }
  if (j <= l) {
    for (int i = j + 1; i <= l; ++i) refills *= static_cast<double>(sums[i].temporal);
    if (all_each) *all_each = tile * refills * rest_all;
    refills *= above_l;
  } else {
    double own = 1;
    for (int r = 0; r < R; ++r)
      if (plain_ranks_[t] >> r & 1) own *= static_cast<double>(rest[r]);
    if (all_each) *all_each = tile * own;
    refills = std::ceil(own / spread_above(l, rest, plain_ranks_[t]));
  }
  return tile * refills;
}

double TileSearch::relevant_spread(const LevelSummary* sums, int from, int to, int t) const {
  // A spatial factor over a rank that alone moves one of t's dimensions gives that many distinct
  // tiles, which the level's instances take apart (no multicast can merge them).
  double n = 1;
  for (int j = from; j <= to; ++j) n *= sums[j].distinct[t];
  return n;
}

double TileSearch::output_drains(const TensorMask* keep_at, const LevelSummary* sums, int l, int kept_to, int m,
                                 const std::array<int64_t, kMaxRanks>& rest, double above_l, double rest_all,
                                 const double* inst_least, const double* inst_reducing, double* rd, double* wr,
                                 double* up, double* down,
                                 const KeepSets& ks) const {
  // Every level below the top keeping the output sends each tile it holds up to the next level
  // keeping it whenever the tile moves: the parent's updates are the child's fills (before the
  // first-update discount, which applies to the child's own fills) times the distinct tiles of
  // the spatial loops between them and the parent's instances; with every dimension one rank, the
  // fills are plain_tile_moves. At least the output's volume reaches the parent.
  // A tile that comes back holds partial sums: the model fills the child with all but the first
  // visit of each value (per instance starting its own partial sums, model.cpp) and the parent
  // reads all but the first of its updates. Both discounts are at most the volume times the
  // instances that split ranks the output does not index (inst_reducing: at level l and above,
  // the most the fan-outs above l can spread those ranks). This is the round trip of partial sums
  // that a reduction loop outside an output loop above the keeper costs.
  const int t = plan_.output;
  const PlanTensor& pt = plan_.tensors[static_cast<size_t>(t)];
  for (int d = 0; d < pt.n_dims; ++d)
    if (pt.plain_rank[d] < 0) return 0;
  const double volume = static_cast<double>(pt.volume);
  double pj = 0;
  for (int k = m; k <= kept_to && k < L - 1; ++k) {
    if (!(keep_at[k] >> t & 1)) continue;
    int parent = k + 1;
    while (parent <= kept_to && !(keep_at[parent] >> t & 1)) ++parent;
    if (parent > kept_to && !(ks.above[kept_to] >> t & 1)) break;  // k backs the output
    // Backed on chip: drained only to a chosen parent below the top (else k may be the backing).
    if ((spec_.onchip_backing >> t & 1) && (parent > kept_to || parent == L - 1)) break;
    double all_each = 0;
    const double each = plain_tile_moves(sums, k, l, t, rest, above_l, 0, rest_all, &all_each);
    const double refills = std::max(0.0, all_each * inst_least[k] - volume * inst_reducing[k]);
    pj += refills * plan_.levels[static_cast<size_t>(k)].write_pj;
    wr[k] += refills;
    if (parent <= kept_to) {
      const double updates = std::max(volume, all_each * relevant_spread(sums, k + 1, parent, t) * inst_least[parent]);
      const double reads = std::max(0.0, updates - volume * inst_reducing[parent]);
      pj += updates * plan_.levels[static_cast<size_t>(parent)].update_pj +
            reads * plan_.levels[static_cast<size_t>(parent)].read_pj;
      wr[parent] += updates;
      rd[parent] += reads;
    } else {
      const double updates = std::max(volume, each * relevant_spread(sums, k + 1, l, t));
      const double reads = std::max(0.0, updates - volume * inst_reducing[l]);
      // As for inputs (scalar_bounds): the top takes every output value at least once.
      pj += via_parent_energy(kept_to, t, updates, &ks, reads);
      *up = updates;
      *down = reads;
    }
  }
  return pj;
}

void TileSearch::summarize(const LevelChoice& ch, int m, LevelSummary& out) const {
  out.temporal = 1;
  int64_t spatial = 1;
  out.reducing = 1;
  for (int r = 0; r < R; ++r) {
    out.temporal *= ch.t[r];
    spatial *= ch.x[r] * ch.y[r];
    if (plan_.output >= 0 && !(plan_.tensors[plan_.output].relevant_ranks >> r & 1))
      out.reducing *= static_cast<double>(ch.x[r] * ch.y[r]);
  }
  out.spatial = static_cast<double>(spatial);
  if (spatial == 1) {
    // No spatial factor (most levels): no groups, no distinct tiles; the temporal factors alone.
    for (int t = 0; t < T; ++t) {
      double own = 1, tile = 1;
      temporal_products(ch, t, own, tile);
      out.per_op[t] = 1;
      out.own[t] = own;
      out.tile[t] = tile;
      out.distinct[t] = 1;
    }
    return;
  }
  const PlanLevel& lv = plan_.levels[static_cast<size_t>(m)];
  for (int t = 0; t < T; ++t) {
    const PlanTensor& pt = plan_.tensors[static_cast<size_t>(t)];
    // Multicast groups: per dimension the largest spatial factor moving it alone (distinct sums
    // of one loop's steps), times the factors over ranks t does not index on axes that do not
    // multicast it.
    int64_t widest[kMaxTensorDims];
    std::fill_n(widest, pt.n_dims, int64_t{1});
    double groups = 1, own = 1, distinct = 1;
    for (int r = 0; r < R; ++r) {
      if (plain_ranks_[t] >> r & 1) own *= static_cast<double>(ch.t[r]);
      if (pt.rank_terms[r] == 1 && pt.plain_rank[pt.rank_dim[r][0]] == r)
        distinct *= static_cast<double>(ch.x[r] * ch.y[r]);
      if (ch.x[r] == 1 && ch.y[r] == 1) continue;
      if (pt.rank_terms[r] == 0) {
        if (!(lv.multicast_x & role_bit(pt.role))) groups *= static_cast<double>(ch.x[r]);
        if (!(lv.multicast_y & role_bit(pt.role))) groups *= static_cast<double>(ch.y[r]);
      } else if (pt.rank_terms[r] == 1) {
        int64_t& wd = widest[pt.rank_dim[r][0]];
        wd = std::max({wd, ch.x[r], ch.y[r]});
      }
    }
    double tile = 1;
    for (int d = 0; d < pt.n_dims; ++d) {
      groups *= static_cast<double>(widest[d]);
      if (const int r = pt.plain_rank[d]; r >= 0) tile *= static_cast<double>(ch.t[r] * ch.x[r] * ch.y[r]);
    }
    out.per_op[t] = groups / out.spatial;
    out.own[t] = own;
    out.tile[t] = tile;
    out.distinct[t] = distinct;
  }
}

void TileSearch::summarize_temporal(const LevelChoice& ch, const LevelSummary& spatial, LevelSummary& out) const {
  out = spatial;
  out.temporal = 1;
  for (int r = 0; r < R; ++r) out.temporal *= ch.t[r];
  if (out.temporal == 1) return;
  for (int t = 0; t < T; ++t) {
    double own = 1, tile = 1;
    temporal_products(ch, t, own, tile);
    out.own[t] = own;
    out.tile[t] = spatial.tile[t] * tile;  // products of whole numbers: exact, as summarize's
  }
}

void TileSearch::temporal_products(const LevelChoice& ch, int t, double& own, double& tile) const {
  const PlanTensor& pt = plan_.tensors[static_cast<size_t>(t)];
  own = tile = 1;
  for (int r = 0; r < R; ++r)
    if (plain_ranks_[t] >> r & 1) own *= static_cast<double>(ch.t[r]);
  for (int d = 0; d < pt.n_dims; ++d)
    if (const int r = pt.plain_rank[d]; r >= 0) tile *= static_cast<double>(ch.t[r]);
}

void TileSearch::window_position_fills(int t, const double* cum, double instances, double& total,
                                       double& each) const {
  // Per dimension, the tile's extent (a box: 1 + sum coeff * (extent - 1)), how many distinct
  // offsets it takes at least (those of its one rank with the most blocks: the ranks of a
  // dimension index no other), and the shortest nonzero shift between two of them (the gcd of the
  // block steps coeff * extent of the ranks with more than one block: every shift is an integer
  // combination of them). The distinct positions are the product of the dimensions' offsets. A
  // change of position shifts some dimension d by at least its gcd, which brings that many new
  // values (the whole extent if the shift is longer) times the other extents; the model fills a
  // moved tile with what the previous one did not hold, so each instance's fills are at least its
  // first tile plus that for every change after it.
  const PlanTensor& pt = plan_.tensors[static_cast<size_t>(t)];
  double tile = 1, positions = 1;
  double extent[kMaxTensorDims], shift[kMaxTensorDims];
  for (int d = 0; d < pt.n_dims; ++d) {
    const double ext = window_extent(pt.dims[d], cum);
    double offsets = 1;
    int64_t g = 0;
    for (int i = 0; i < pt.dims[d].n_terms; ++i) {
      const PlanTerm& term = pt.dims[d].terms[i];
      if (term.coeff == 0) continue;
      const int r = term.rank;
      const int64_t k = static_cast<int64_t>(cum[r]), blocks = e_.ranks[r].size / k;
      if (blocks > 1 && term.coeff > 0) {
        offsets = std::max(offsets, static_cast<double>(blocks));
        g = std::gcd(g, term.coeff * k);
      }
    }
    extent[d] = ext;
    shift[d] = g > 0 ? std::min(static_cast<double>(g), ext) : 0;
    tile *= ext;
    positions *= offsets;
  }
  double least_new = tile;
  for (int d = 0; d < pt.n_dims; ++d)
    if (shift[d] > 0) least_new = std::min(least_new, tile / extent[d] * shift[d]);
  // Spread over instances, the positions split: an instance visits at least positions / instances
  // of them, and all together at least `positions` (each spatial split multiplies the instances by
  // no less than it divides the offsets of a dimension).
  total = positions > 1 ? tile - least_new + least_new * positions : tile;
  const double mine = std::ceil(positions / instances);
  each = mine > 1 ? tile + (mine - 1) * least_new : tile;
}

double TileSearch::window_step_fills(const LevelChoice* chosen, const LevelSummary* sums, int k, int l, int t,
                                     const double (*cums)[kMaxRanks], double above_l,
                                     const std::array<int64_t, kMaxRanks>& rest) const {
  // The model's refills are Timeloop's (model.cpp, "Refills"): a step of a loop moves every loop
  // inside it back by one step, and the tile moves by T = its step - the steps of the loops inside
  // it. A move whose T equals that of the innermost loop (T_in) fetches what the shifted tile does
  // not hold; every other move fetches the whole tile.
  // The innermost loop above k over a rank t indexes (rho, factor f) sits at the lowest level j
  // above k with a temporal factor over t's ranks, and is one of those ranks (j's loops over other
  // ranks may sit inside it; T_in is then rho's or 0). With N the iterations of the loops from rho
  // outwards (at least j's factors over t's ranks, every temporal factor above j and the
  // iterations left above l), rho steps N (f - 1) / f times and the others step N / f - 1 times.
  // - A step of rho moves its one dimension d by coeff x its tile extent s: min(s, E_d) x the other
  //   extents new values at least.
  // - A step of a loop sigma not over a rank of d moves d back by rho's step at least (the
  //   coefficients are positive, window_disjoint_): T differs from T_in in d, so the whole tile is
  //   fetched. Those over a rank of d may reach T_in; they are left out at their most steps: (N / f)
  //   (g - 1) / g for a loop of j (factor g), and for a loop of a level m above j N / (the
  //   iterations of the levels j..m-1, inside it) x (g - 1) / g; above l, N / (those of j..l). A
  //   loop of j only if some subset of j's loops over d inside it brings its T to T_in exactly; a
  //   loop above j only if no loop of j..m-1 moves another dimension.
  // Per instance of k; the least over the ranks that may be rho.
  const double* cum = cums[k];
  const PlanTensor& pt = plan_.tensors[static_cast<size_t>(t)];
  int j = k + 1;
  double relevant = 1;
  for (; j <= l; ++j) {
    relevant = 1;
    for (int r = 0; r < R; ++r)
      if (pt.relevant_ranks >> r & 1) relevant *= static_cast<double>(chosen[j].t[r]);
    if (relevant > 1) break;
  }
  double extent[kMaxTensorDims], tile = 1;
  for (int d = 0; d < pt.n_dims; ++d) tile *= extent[d] = window_extent(pt.dims[d], cum);
  if (j > l) return tile;
  double outer = above_l;
  for (int i = j + 1; i <= l; ++i) outer *= static_cast<double>(sums[i].temporal);
  const double n = relevant * outer;
  // Per dimension d of t, at most how many steps the loops above j over its ranks take that may
  // reach T_in: none whose inner loops (all those of the levels j..m-1) move another dimension,
  // which its T then has and T_in has not.
  double up[kMaxTensorDims];
  std::fill_n(up, pt.n_dims, 0.0);
  uint32_t moved_dims = 0;  // dimensions with a loop at the levels from j to below the current one
  auto add_dims = [&](int i) {
    for (int q = 0; q < R; ++q)
      if (chosen[i].t[q] > 1 && (pt.relevant_ranks >> q & 1)) moved_dims |= 1u << pt.rank_dim[q][0];
  };
  add_dims(j);
  double inside = relevant;
  for (int i = j + 1; i <= l; ++i) {
    for (int q = 0; q < R; ++q)
      if (chosen[i].t[q] > 1 && (pt.relevant_ranks >> q & 1)) {
        const int d = pt.rank_dim[q][0];
        if (moved_dims & ~(1u << d)) continue;
        up[d] += n / inside * static_cast<double>(chosen[i].t[q] - 1) / static_cast<double>(chosen[i].t[q]);
      }
    add_dims(i);
    inside *= static_cast<double>(sums[i].temporal);
  }
  for (int d = 0; d < pt.n_dims; ++d) {
    if (moved_dims & ~(1u << d)) continue;
    for (int i = 0; i < pt.dims[d].n_terms; ++i)
      if (pt.dims[d].terms[i].coeff != 0 && rest[pt.dims[d].terms[i].rank] > 1) {
        up[d] += n / inside;
        break;
      }
  }
  double least = -1;
  for (int r = 0; r < R; ++r) {
    const int64_t f = chosen[j].t[r];
    if (f <= 1 || !(pt.relevant_ranks >> r & 1)) continue;
    const int d = pt.rank_dim[r][0];
    const double E = extent[d];
    const double s = static_cast<double>(pt.rank_coeff[r][0]) * cums[j - 1][r];
    const double fd = static_cast<double>(f);
    // A loop q of j over a rank of d has rho and maybe j's other loops over d inside it: its T in d
    // is q's step - s - some of theirs (exact sums), T_in's is s or 0. Only if one such subset
    // reaches T_in may its steps.
    double same = up[d];
    double others[kMaxRanks];
    int n_others = 0;
    for (int q = 0; q < R; ++q)
      if (q != r && chosen[j].t[q] > 1 && (pt.relevant_ranks >> q & 1) && pt.rank_dim[q][0] == d)
        others[n_others++] = static_cast<double>(pt.rank_coeff[q][0]) * cums[j - 1][q];
    for (int q = 0, o = 0; q < R; ++q) {
      if (q == r || chosen[j].t[q] <= 1 || !(pt.relevant_ranks >> q & 1) || pt.rank_dim[q][0] != d) continue;
      const double own = others[o++];
      bool reaches = false;
      for (uint32_t sub = 0; sub < (1u << n_others) && !reaches; ++sub) {
        if (sub >> (o - 1) & 1) continue;  // q is not inside itself
        double tr = own - s;
        for (int x = 0; x < n_others; ++x)
          if (sub >> x & 1) tr -= others[x];
        reaches = tr == s || tr == 0;
      }
      if (reaches) same += n / fd * static_cast<double>(chosen[j].t[q] - 1) / static_cast<double>(chosen[j].t[q]);
    }
    const double fills = tile / E * (n / fd * (fd - 1) * std::min(s, E)) + std::max(0.0, n / fd - 1 - same) * tile;
    if (least < 0 || fills < least) least = fills;
  }
  return tile + std::max(0.0, least);
}

void TileSearch::scalar_bounds(const LevelChoice* chosen, int l, const std::array<int64_t, kMaxRanks>& rest,
                               double& energy_lb, double& cycles_lb, bool open_keep, bool open_temporal) const {
  LevelSummary sums[kMaxLevels];
  for (int m = 0; m <= l; ++m) summarize(chosen[m], m, sums[m]);
  scalar_bounds(chosen, sums, l, rest, energy_lb, cycles_lb, open_keep, open_temporal);
}

void TileSearch::scalar_bounds(const LevelChoice* chosen, const LevelSummary* sums, int l,
                               const std::array<int64_t, kMaxRanks>& rest, double& energy_lb, double& cycles_lb,
                               bool open_keep, bool open_temporal) const {
  BoundFrame f;
  bound_frame(chosen, sums, l, rest, open_keep, open_temporal, &keep_sets_, f);
  TensorMask keep_at[kMaxLevels];
  for (int m = 0; m <= l; ++m) keep_at[m] = chosen[m].keep;
  TensorTerms sum;
  sum.clear(f.kept_to);
  for (int t = 0; t < T; ++t) {
    TensorTerms one;
    tensor_terms(f, chosen, sums, keep_at, t, one);
    sum.add(one, f.kept_to);
  }
  finish_bounds(f, sum, energy_lb, cycles_lb);
}

void TileSearch::scalar_bounds_keeps(const LevelChoice* chosen, const LevelSummary* sums, int l,
                                     const std::array<int64_t, kMaxRanks>& rest, const TensorMask* keeps, int n,
                                     double* energy_lb, double* cycles_lb, bool open_temporal, const KeepSets* sets,
                                     int m, int fixed, bool open_keep) const {
  // A tensor's terms depend on the kept sets only through which levels keep it: per tensor they
  // are made once for each way level l (and `fixed`) can hold it, and every combination adds up
  // its tensors' terms (summing the same non-negative terms as scalar_bounds, in another grouping).
  if (!sets) {
    sets = &keep_sets_;
    m = 1;
    fixed = -1;
  }
  BoundFrame f;
  bound_frame(chosen, sums, l, rest, open_keep, open_temporal, sets, f);
  TensorMask keep_at[kMaxLevels];
  for (int k = 0; k < l; ++k) keep_at[k] = chosen[k].keep;
  TensorMask any = 0, all = static_cast<TensorMask>(~TensorMask{0});
  if (open_keep) all = 0;  // level l's kept set is not read (kept_to = l - 1)
  else
    for (int i = 0; i < n; ++i) any = static_cast<TensorMask>(any | keeps[i]), all = static_cast<TensorMask>(all & keeps[i]);
  const auto b_keeps = [&](int j, int t) { return fixed >= 0 && (sets[j].must[static_cast<size_t>(fixed)] >> t & 1); };
  TensorTerms terms[kMaxTensors][2][2];  // [tensor][level l keeps it][`fixed` keeps it]
  for (int t = 0; t < T; ++t)
    for (int held_b = 0; held_b < 2; ++held_b) {
      int j = 0;
      while (j < m && b_keeps(j, t) != (held_b == 1)) ++j;
      if (j == m) continue;  // no set holds it so
      f.ks = &sets[j];       // the terms of t read only t's bit of the sets
      for (int held = 0; held < 2; ++held) {
        if (held ? !(any >> t & 1) : (all >> t & 1)) continue;  // no kept set holds it so
        keep_at[l] = held ? static_cast<TensorMask>(TensorMask{1} << t) : TensorMask{0};
        tensor_terms(f, chosen, sums, keep_at, t, terms[t][held][held_b]);
      }
    }
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < m; ++j) {
      TensorTerms sum;
      sum.clear(f.kept_to);
      for (int t = 0; t < T; ++t) sum.add(terms[t][open_keep ? 0 : keeps[i] >> t & 1][b_keeps(j, t)], f.kept_to);
      finish_bounds(f, sum, energy_lb[i * m + j], cycles_lb[i * m + j]);
    }
}

void TileSearch::bound_frame(const LevelChoice* chosen, const LevelSummary* sums, int l,
                             const std::array<int64_t, kMaxRanks>& rest, bool open_keep, bool open_temporal,
                             const KeepSets* ks, BoundFrame& f) const {
  f.ks = ks;
  f.l = l;
  f.rest = &rest;
  f.open_keep = open_keep;
  f.open_temporal = open_temporal;
  // Every rank's factors multiply to its size, so the temporal iterations are the inner ones
  // times what remains over the spatial factors above l, whose product is at most spread_above.
  int64_t inner = 1, left = 1;
  for (int m = 0; m <= l; ++m) inner *= sums[m].temporal;
  for (int r = 0; r < R; ++r) left *= rest[r];
  f.spread = spread_above(l, rest, (1u << R) - 1);
  const int64_t most = static_cast<int64_t>(f.spread);
  f.steps = static_cast<double>(inner * ((left + most - 1) / most));
  // Instances of each level m <= l, at most (the fan-outs above l are not chosen: at most theirs),
  // and of those the ones that split ranks the output does not index (each starts the partial
  // sums of the whole output: the model's first-update discount is at most the volume times that).
  f.inst[l] = static_cast<double>(fanout_above[l]);
  // Only the fan-outs that may spread ranks the output does not index start their own partial
  // sums (Gemmini's columns take K alone: none).
  f.inst_reducing[l] = plan_.output >= 0 ? spread_above(l, rest, reduction_ranks_) : f.inst[l];
  f.inst_least[l] = 1;
  for (int m = l - 1; m >= 0; --m) {
    f.inst_least[m] = f.inst_least[m + 1] * sums[m + 1].spatial;
    f.inst[m] = f.inst[m + 1] * sums[m + 1].spatial;
    f.inst_reducing[m] = f.inst_reducing[m + 1] * sums[m + 1].reducing;
  }
  f.kept_to = open_keep ? l - 1 : l;  // levels whose kept sets are chosen
  // The temporal iterations above l, at least (whatever of the rest is not spread).
  double rest_all = 1;
  for (int r = 0; r < R; ++r) rest_all *= static_cast<double>(rest[r]);
  f.above_l = std::ceil(rest_all / f.spread);
  f.rest_all = rest_all;
  f.top_open = f.kept_to < L - 1;
  // Per rank its tile factor over levels 0..k, for the extents of the tiles of tensors with halos.
  if (window_tensors_) {
    double run[kMaxRanks];
    std::fill_n(run, R, 1.0);
    for (int k = 0; k <= f.kept_to; ++k)
      for (int r = 0; r < R; ++r) {
        run[r] *= static_cast<double>(chosen[k].t[r] * chosen[k].x[r] * chosen[k].y[r]);
        f.cum[k][r] = run[r];
      }
  }
}

void TileSearch::TensorTerms::clear(int kept_to) {
  served = moved = top_rd = top_wr = 0;
  for (int m = 0; m <= kept_to; ++m) rd[m] = wr[m] = wr_each[m] = 0;
}

void TileSearch::TensorTerms::add(const TensorTerms& o, int kept_to) {
  served += o.served;
  moved += o.moved;
  top_rd += o.top_rd;
  top_wr += o.top_wr;
  for (int m = 0; m <= kept_to; ++m) {
    rd[m] += o.rd[m];
    wr[m] += o.wr[m];
    wr_each[m] += o.wr_each[m];
  }
}

void TileSearch::tensor_terms(const BoundFrame& f, const LevelChoice* chosen, const LevelSummary* sums,
                              const TensorMask* keep_at, int t, TensorTerms& out) const {
  // The innermost level m keeping a tensor serves every compute step of each of its instances,
  // once per multicast group (model.cpp: child_fills = temporal_iterations, times the groups of
  // the spatial loops of levels 0..m): temporal iterations x instances of m = operations / the
  // spatial factors of levels 0..m, all chosen when m <= l. Above l the fan-outs are not chosen:
  // at most the sharing their fan-outs allow (serve_from_above). The groups per level: summarize.
  // Words each chosen level reads and writes (over all instances) at least go to rd and wr, for the
  // latency bound of its bandwidth.
  const int l = f.l, kept_to = f.kept_to;
  const KeepSets& ks = *f.ks;
  out.clear(kept_to);
  const std::array<int64_t, kMaxRanks>& rest = *f.rest;
  const double ops = static_cast<double>(plan_.operations);
  // Words the outermost level (the backing store of every tensor not backed on chip) serves, when
  // it is not chosen yet: each touched value of an input read, each output value updated, at
  // least; and where no level between may keep a tensor, all the fills (drains) the chosen levels'
  // outermost tile of it needs. Its bandwidth then bounds the latency before the top is chosen.
  auto only_top_above = [&] {
    for (int m = kept_to + 1; m < L - 1; ++m)
      if (ks.may[m] >> t & 1) return false;
    return true;
  };
  auto window_tile = [&](int k) {
    const PlanTensor& pt = plan_.tensors[static_cast<size_t>(t)];
    double v = 1;
    for (int d = 0; d < pt.n_dims; ++d) v *= window_extent(pt.dims[d], f.cum[k]);
    return v;
  };
  const PlanTensor& pt = plan_.tensors[static_cast<size_t>(t)];
  const bool backed = spec_.onchip_backing >> t & 1;
  double top_words = !f.top_open || backed ? 0
                     : t == plan_.output   ? static_cast<double>(pt.volume)
                                           : touched_[static_cast<size_t>(t)];
  int m = 0;
  while (m <= kept_to && !(keep_at[m] >> t & 1)) ++m;
  const int last = std::min(m, l);
  double per_op = 1;  // groups / spatial factors of levels 0..last
  for (int k = 0; k <= last; ++k) per_op *= sums[k].per_op[t];
  const double words = ops * per_op;
  if (m <= kept_to) out.served += words * serve_pj[m][t];
  else out.served += serve_from_above(l, rest, t, words, f.open_keep, f.top_open && !backed, &ks);
  if (m > kept_to) {
    // Served straight from above l: by the top itself, where no level between may keep it.
    // (`words` before the sharing of the fan-outs above l, at most all of them.)
    if (f.top_open && only_top_above() && !backed) top_words = std::max(top_words, words / f.spread);
    (t == plan_.output ? out.top_wr : out.top_rd) += top_words;
    return;
  }
  const PlanLevel& lv = plan_.levels[static_cast<size_t>(m)];
  if (t == plan_.output) {
    // Every update but the first of each output value (per instance that starts its own partial
    // sums) reads the value it accumulates onto.
    const double reads = output_reads(words, f.inst_reducing[m]);
    out.served += reads * lv.read_pj;
    out.rd[m] += reads;
    out.wr[m] += words;
    double up = 0, down = 0;
    out.moved += output_drains(keep_at, sums, l, kept_to, m, rest, f.above_l, f.rest_all, f.inst_least, f.inst_reducing, out.rd,
                               out.wr, &up, &down, ks);
    if (f.top_open && only_top_above() && !backed) top_words = std::max(top_words, up), out.top_rd += down;
    out.top_wr += top_words;
    return;
  }
  out.rd[m] += words;
  // Every level keeping t below the top is filled with each value compute touches at least
  // once, read from the next level keeping t (the cheapest above when not chosen yet); the
  // outermost level keeping t backs it and takes none. A tensor backed on chip (Stream's CTs:
  // held whole at its home, the top keeps none of it) is filled only from a chosen parent below
  // the top: a level whose parent is not chosen yet may be its backing.
  const bool top_parent = f.top_open && only_top_above() && !backed;
  const double values = touched_[static_cast<size_t>(t)];
  for (int k = m; k <= kept_to && k < L - 1; ++k) {
    if (!(keep_at[k] >> t & 1)) continue;
    int parent = k + 1;
    while (parent <= kept_to && !(keep_at[parent] >> t & 1)) ++parent;
    if (parent > kept_to && !(ks.above[kept_to] >> t & 1)) break;  // k backs t: no fills
    if (backed && (parent > kept_to || parent == L - 1)) break;
    double all_each = 0;
    double each = plain_tile_moves(sums, k, l, t, rest, f.above_l, window_tensors_ >> t & 1 ? window_tile(k) : 0,
                                   f.rest_all, &all_each);
    double fills = std::max(values, all_each * f.inst_least[k]);
    // A window tensor's refills through its window ranks, from the tile alone (not when level
    // l's temporal factors are still open: its tile would grow).
    if ((window_disjoint_ >> t & 1) && !(f.open_temporal && k == l)) {
      double total = 0, mine = 0;
      window_position_fills(t, f.cum[k], f.inst[k], total, mine);
      each = std::max({each, mine, window_step_fills(chosen, sums, k, l, t, f.cum, f.above_l, rest)});
      fills = std::max({fills, total, each * f.inst_least[k]});
    }
    // The parent reads each fill of every instance once per group of instances that share it:
    // at least the fills of one instance times the distinct tiles the spatial loops between
    // them spread and the instances of the parent.
    // Not chosen yet, the parent is above l: at least the spreading of the chosen levels.
    const double reads = parent <= kept_to
                             ? std::max(values, std::max(each, all_each) * relevant_spread(sums, k + 1, parent, t) *
                                                    f.inst_least[parent])
                             : std::max(values, each * relevant_spread(sums, k + 1, l, t));
    out.moved += fills * plan_.levels[static_cast<size_t>(k)].write_pj;
    out.wr_each[k] += std::max(each, values / f.inst[k]);
    if (parent <= kept_to) {
      out.moved += reads * plan_.levels[static_cast<size_t>(parent)].read_pj;
      out.rd[parent] += reads;
    } else {
      if (top_parent) top_words = std::max(top_words, reads);
      // Whichever level above is the parent, the top still reads each touched value at least
      // once, and a parent between is filled with them (via_parent_energy).
      out.moved += via_parent_energy(kept_to, t, reads, &ks);
    }
  }
  out.top_rd += top_words;
}

void TileSearch::finish_bounds(const BoundFrame& f, const TensorTerms& sum, double& energy_lb, double& cycles_lb) const {
  // The model adds the same non-negative terms in another order: leave room for its rounding.
  energy_lb = (static_cast<double>(plan_.operations) * plan_.op_pj + sum.served + sum.moved) * (1 - 1e-9);
  cycles_lb = f.steps;  // the model's latency is at least its compute steps
  // A level whose words per instance need longer than the compute steps at its bandwidth sets the
  // latency (per instance: the totals over the most instances it can have).
  for (int m = 0; m <= f.kept_to; ++m)
    cycles_lb = std::max(cycles_lb, bandwidth_cycles(m, sum.rd[m] / f.inst[m], sum.wr[m] / f.inst[m] + sum.wr_each[m]));
  if (f.top_open) {
    const double n = static_cast<double>(std::max<int64_t>(1, c_.levels[static_cast<size_t>(L - 1)].instances));
    cycles_lb = std::max(cycles_lb, bandwidth_cycles(L - 1, sum.top_rd / n, sum.top_wr / n));
  }
}

const std::vector<TileWorker::State::OuterFanout>& TileWorker::State::outer_fanouts(int d, const std::array<int64_t, kMaxRanks>& rem) {
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

void TileWorker::State::make_outer_fanouts(int d, const std::array<int64_t, kMaxRanks>& rem) {
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

bool TileWorker::State::completion_bounds(int d, const std::array<int64_t, kMaxRanks>& rem) {
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
        auto time_of = [&](int l, double r, double w) { return s->bandwidth_cycles(l, r, w); };
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

bool TileWorker::State::classify_fanouts(int d, const std::array<int64_t, kMaxRanks>& rem, bool& all_beaten) {
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

bool TileWorker::State::classify_top(int d, const std::array<int64_t, kMaxRanks>& rem) {
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

void TileWorker::State::complete_top(int d, const std::array<int64_t, kMaxRanks>& rem) {
  if (!classify_top(d, rem)) {
    ++owner->bound_skipped;
    return;
  }
  if (!top_dead.empty()) top_filter = d;
  descend(d, rem);
  top_filter = -1;
}

}  // namespace mapfuse
