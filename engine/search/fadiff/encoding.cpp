#include "engine/search/fadiff/encoding.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "engine/common/error.hpp"

namespace mapfuse {
namespace {

std::vector<int64_t> divisors_of(int64_t n) {
  std::vector<int64_t> lo, hi;
  for (int64_t d = 1; d * d <= n; ++d)
    if (n % d == 0) {
      lo.push_back(d);
      if (d != n / d) hi.push_back(n / d);
    }
  lo.insert(lo.end(), hi.rbegin(), hi.rend());
  return lo;
}

inline bool relevant(const PlanTensor& t, int d) { return (t.relevant_ranks >> d & 1) != 0; }

// Words of a level per instance after `delta` words (all instances) are added: the cycles the
// exact model charges for the level (model.cpp: ceil(cc / slowdown) with slowdown = bw / demand).
double level_cycles(double words_per_instance, double bw, double cc) {
  if (bw <= 0) return 0;
  const double limit = cc * (1 - 1e-9);
  if (words_per_instance <= bw * limit) return 0;
  return std::ceil(cc / (bw / (words_per_instance / cc)));
}

}  // namespace

SearchSpace::SearchSpace(const Workload& w, const Core& c) : w_(&w), c_(&c) {
  net_ = make_relaxed_network(w, c);
  if (net_.layers.empty())
    throw InputError({}, "workload '" + w.name + "'", "has no MAC Einsum: nothing for FADiff to map");
  layers_.resize(net_.layers.size());
  gene_begin_.resize(net_.layers.size());
  for (size_t v = 0; v < net_.layers.size(); ++v) {
    const RelaxedLayer& L = net_.layers[v];
    LayerSpace& S = layers_[v];
    for (int d = 0; d < L.n_ranks; ++d) {
      S.divisors[d] = divisors_of(L.rank_size[d]);
      if (S.divisors[d].size() > static_cast<size_t>(kMaxDivisors))
        throw InputError({}, "einsum '" + L.name + "'",
                         "rank size " + std::to_string(L.rank_size[d]) + " has more than " +
                             std::to_string(kMaxDivisors) + " divisors");
    }
    // A factor at level m lies inside the tiles of levels m..top: fixed at 1 if one of them holds
    // one entry and keeps a tensor the rank indexes.
    auto fixed = [&](int m, int d) {
      for (int k = m; k < L.n_levels - 1; ++k)
        if (L.levels[k].entries == 1)
          for (int t = 0; t < L.n_tensors; ++t)
            if ((L.levels[k].keep >> t & 1) && relevant(L.tensors[t], d)) return true;
      return false;
    };
    for (int m = 0; m < L.n_levels; ++m)
      for (int d = 0; d < L.n_ranks; ++d)
        if (L.axis[m][d] >= 0 && L.rank_size[d] > 1 && !fixed(m, d))
          S.vars.push_back({L.ts(m, d), static_cast<int8_t>(d), static_cast<int8_t>(m), L.axis[m][d]});
    for (int m = 0; m < L.n_levels - 1; ++m)
      for (int d = 0; d < L.n_ranks; ++d)
        if (L.rank_size[d] > 1 && !fixed(m, d))
          S.vars.push_back({L.tt(m, d), static_cast<int8_t>(d), static_cast<int8_t>(m), -1});
    gene_begin_[v] = n_factor_genes_;
    n_factor_genes_ += static_cast<int>(S.vars.size());

    // The smallest point (every factor at DRAM) must be a valid exact mapping: otherwise no
    // mapping of this space is.
    std::vector<double> x(L.n_vars(), 1.0);
    for (int d = 0; d < L.n_ranks; ++d) x[L.tt(L.n_levels - 1, d)] = static_cast<double>(L.rank_size[d]);
    const Einsum& e = w.einsums[L.einsum];
    const Mapping mp = mapping_from_factors(L, x.data());
    if (auto err = check_structure(mp, e, c))
      throw InputError({}, "einsum '" + L.name + "'",
                       "no valid factorisation under the spatial limits and keeps of core '" + c.name +
                           "': " + err->message);
    const CostResult r = evaluate(compile_plan(e, c), flatten(mp));
    if (!r.valid()) {
      const int l = r.invalid_level;
      throw InputError({}, "einsum '" + L.name + "'",
                       std::string("no mapping fits core '") + c.name + "': " +
                           (l >= 0 ? "level '" + c.levels[l].name + "' (" +
                                         std::to_string(c.levels[l].entries) + " words) is too small for tiles of 1 (" +
                                         std::string(to_string(r.invalid)) + ")"
                                   : std::string(to_string(r.invalid))));
    }
  }
}

LoopOrders dram_stationary_orders(const RelaxedLayer& L, TensorRole stationary) {
  LoopOrders o = L.order;
  uint32_t ranks = 0;
  for (int t = 0; t < L.n_tensors; ++t)
    if (L.tensors[t].role == stationary) ranks |= L.tensors[t].relevant_ranks;
  const int top = L.n_levels - 1;
  int q = 0;
  for (int pass = 0; pass < 2; ++pass)
    for (int d = 0; d < L.n_ranks; ++d)
      if (((ranks >> d & 1) != 0) == (pass == 0)) o[top][q++] = static_cast<int8_t>(d);
  return o;
}

FlatMapping flat_from_factors(const RelaxedLayer& L, const double* x) {
  FlatMapping f;
  f.n_levels = L.n_levels;
  auto rnd = [](double v) { return std::max<int64_t>(1, std::llround(v)); };
  for (int m = L.n_levels - 1; m >= 0; --m) {
    f.keep[m] = L.levels[m].keep;
    for (int q = 0; q < L.n_ranks; ++q) {
      const int d = L.order[m][q];
      const int64_t v = rnd(x[L.tt(m, d)]);
      if (v > 1) f.loops[f.n_loops++] = {static_cast<int8_t>(m), static_cast<int8_t>(d), LoopKind::Temporal, v};
    }
    for (int d = 0; d < L.n_ranks; ++d) {
      if (L.axis[m][d] < 0) continue;
      const int64_t v = rnd(x[L.ts(m, d)]);
      if (v > 1)
        f.loops[f.n_loops++] = {static_cast<int8_t>(m), static_cast<int8_t>(d),
                                L.axis[m][d] == 0 ? LoopKind::SpatialX : LoopKind::SpatialY, v};
    }
  }
  return f;
}

ExactNetworkEvaluator::ExactNetworkEvaluator(const SearchSpace& s, bool try_orders)
    : s_(s), try_orders_(try_orders) {
  const RelaxedNetwork& net = s.net();
  for (const RelaxedLayer& L : net.layers) {
    plans_.push_back(compile_plan(s.workload().einsums[L.einsum], s.core()));
    std::array<RelaxedLayer, 3> var{L, L, L};
    var[1].order = dram_stationary_orders(L, TensorRole::Input);
    var[2].order = dram_stationary_orders(L, TensorRole::Output);
    variants_.push_back(std::move(var));
  }
  const size_t n = net.layers.size();
  scratch_.resize(n);
  root_.resize(n), cut_.resize(n), sub_.resize(n), total_.resize(n), part_.resize(n);
  en_.resize(n), cy_.resize(n), saved_.resize(n), dram_.resize(n);
}

Mapping ExactNetworkEvaluator::mapping(int v, const double* x, int order) const {
  return mapping_from_factors(variants_[v][order], x);
}

void ExactNetworkEvaluator::evaluate_layer(int v, double* x, LayerEval& out, int& repairs) {
  const RelaxedLayer& L = s_.net().layers[v];
  const LayerSpace& S = s_.layer(v);
  const EvalPlan& plan = plans_[v];
  // Capacity repair: while some level overflows, divide the largest free factor at or below it
  // by its smallest prime and give that prime to DRAM (terminates at the all-DRAM point, which
  // the SearchSpace checked).
  for (;;) {
    mapfuse::evaluate(plan, flat_from_factors(variants_[v][0], x), out.r[0]);
    if (out.r[0].invalid != Invalid::CapacityExceeded) break;
    const int lim = out.r[0].invalid_level;
    int best = -1;
    double best_f = 1;
    for (const FactorVar& f : S.vars)
      if (f.level <= lim && x[f.var] > best_f) best_f = x[f.var], best = f.var;
    if (best < 0) break;
    int64_t fv = std::llround(best_f), p = 2;
    while (fv % p != 0) ++p;
    x[best] = static_cast<double>(fv / p);
    int rank = -1;
    for (const FactorVar& f : S.vars)
      if (f.var == best) rank = f.rank;
    x[L.tt(L.n_levels - 1, rank)] *= static_cast<double>(p);
    ++repairs;
  }
  out.n_orders = 1;
  if (try_orders_ && out.r[0].valid()) {
    for (int o = 1; o < 3; ++o) mapfuse::evaluate(plan, flat_from_factors(variants_[v][o], x), out.r[o]);
    out.n_orders = 3;
  }
}

std::vector<std::vector<int>> ExactNetworkEvaluator::groups(std::span<const uint8_t> fused) const {
  const RelaxedNetwork& net = s_.net();
  const int n = static_cast<int>(net.layers.size());
  std::vector<int> root(n);
  for (int v = 0; v < n; ++v) {
    const int e = net.in_edge[v];
    root[v] = e >= 0 && fused[e] ? root[net.edges[e].producer] : v;  // producers come first
  }
  std::vector<std::vector<int>> g;
  std::vector<int> idx(n, -1);
  for (int v = 0; v < n; ++v) {
    if (idx[root[v]] < 0) idx[root[v]] = static_cast<int>(g.size()), g.emplace_back();
    g[idx[root[v]]].push_back(v);
  }
  return g;
}

const ExactNetworkEvaluator::Result& ExactNetworkEvaluator::evaluate(std::span<double> x,
                                                                     std::span<const uint8_t> fused_in) {
  ++evaluations_;
  const RelaxedNetwork& net = s_.net();
  const Core& core = s_.core();
  const int n = static_cast<int>(net.layers.size());
  Result& res = res_;  // reused: no allocation once sized
  res.fused.assign(fused_in.begin(), fused_in.end());
  res.valid = true;
  res.capacity_repairs = res.group_splits = 0;
  res.energy_pj = res.cycles = 0;
  for (int v = 0; v < n; ++v) {
    evaluate_layer(v, x.data() + net.var_begin[v], scratch_[v], res.capacity_repairs);
    if (!scratch_[v].r[0].valid()) res.valid = false;
  }
  if (!res.valid) return res;

  // Fusion-group capacity at the fusion level (Eq. 24 at integer points): the group's layers'
  // tiles there must fit together. Repair: cut the fused edge whose removal leaves the smaller
  // largest part (ties: the first edge in network order), until every group fits.
  int F = -1;  // the fusion level (the same for every layer of one core: the outermost on-chip level keeping inputs)
  for (const RelaxedLayer& L : net.layers) F = std::max(F, static_cast<int>(L.fusion_level));
  if (F >= 0 && core.levels[F].entries > 0) {
    const double cap = static_cast<double>(core.levels[F].entries);
    const double buf = core.levels[F].multiple_buffering;
    auto occ = [&](int v) { return static_cast<double>(scratch_[v].r[0].level_occupancy[F]) * buf; };
    for (;;) {
      // Groups by root (producers come first); sub[v]: v's part of its group below its in-edge.
      for (int v = 0; v < n; ++v) {
        const int e = net.in_edge[v];
        root_[v] = e >= 0 && res.fused[e] ? root_[net.edges[e].producer] : v;
        sub_[v] = 0;
        total_[v] = 0;
        cut_[v] = -1;
      }
      for (int v = n - 1; v >= 0; --v) {
        sub_[v] += occ(v);
        total_[root_[v]] += occ(v);
        const int e = net.in_edge[v];
        if (e >= 0 && res.fused[e]) sub_[net.edges[e].producer] += sub_[v];
      }
      bool changed = false;
      for (int v = 0; v < n; ++v) {
        const int e = net.in_edge[v], r = root_[v];
        if (e < 0 || !res.fused[e] || total_[r] <= cap) continue;
        const double part = std::max(sub_[v], total_[r] - sub_[v]);
        if (cut_[r] < 0 || part < part_[r]) cut_[r] = e, part_[r] = part;
      }
      for (int r = 0; r < n; ++r)
        if (cut_[r] >= 0) {
          res.fused[cut_[r]] = 0;
          ++res.group_splits;
          changed = true;
        }
      if (!changed) break;
    }
  }

  // Per layer and order: the exact cost with the fused intermediates' DRAM traffic removed (and
  // their on-chip copy charged at the fusion level, Eqs. 13-15 at integer points).
  const int D = core.levels.size() - 1;
  res.order.assign(n, 0);
  res.layer_energy_pj.assign(n, 0);
  res.layer_cycles.assign(n, 0);
  res.dram_words_saved.assign(n, 0);
  res.layer_dram_words.assign(n, 0);
  auto& en = en_;
  auto& cy = cy_;
  auto& saved = saved_;
  for (int v = 0; v < n; ++v) {
    const RelaxedLayer& L = net.layers[v];
    const bool in_fused = net.in_edge[v] >= 0 && res.fused[net.in_edge[v]];
    bool all = !net.out_edges[v].empty(), any = false;
    for (int e : net.out_edges[v]) all = all && res.fused[e], any = any || res.fused[e];
    const bool drain = net.must_drain[v] || !all;
    for (int o = 0; o < scratch_[v].n_orders; ++o) {
      const CostResult& r = scratch_[v].r[o];
      double e = r.energy_pj;
      std::array<double, kMaxLevels> words{};
      for (int l = 0; l <= D; ++l) {
        for (int t = 0; t < L.n_tensors; ++t) words[l] += static_cast<double>(r.access[l][t].total());
        words[l] /= static_cast<double>(std::max<int64_t>(1, r.level_instances[l]));
      }
      const Level& dl = core.levels[D];
      double sv = 0;
      if (in_fused && F >= 0) {
        const TensorAccesses& di = r.access[D][L.input];
        const TensorAccesses& fi = r.access[F][L.input];
        e -= static_cast<double>(di.reads) * dl.read_pj + static_cast<double>(fi.fills) * core.levels[F].write_pj;
        words[D] -= static_cast<double>(di.reads);
        words[F] -= static_cast<double>(fi.fills);
        sv += static_cast<double>(di.reads);
      }
      if (any && F >= 0) {
        const TensorAccesses& dout = r.access[D][L.output];
        if (!drain) {
          e -= static_cast<double>(dout.updates) * dl.update_pj + static_cast<double>(dout.reads) * dl.read_pj;
          words[D] -= static_cast<double>(dout.updates + dout.reads);
          sv += static_cast<double>(dout.updates + dout.reads);
        }
        e += static_cast<double>(dout.updates) * core.levels[F].write_pj +
             static_cast<double>(dout.reads) * core.levels[F].read_pj;
        words[F] += static_cast<double>(dout.updates + dout.reads);
      }
      double c = r.compute_cycles;
      for (int l = 0; l <= D; ++l) {
        const double lc = (l == D || l == F) && (in_fused || any)
                              ? level_cycles(words[l], core.levels[l].shared_bandwidth, r.compute_cycles)
                              : r.level_cycles[l];
        c = std::max(c, lc);
      }
      en[v][o] = e;
      cy[v][o] = c;
      saved[v][o] = sv;
      double dram = -sv;
      for (int t = 0; t < L.n_tensors; ++t) dram += static_cast<double>(r.access[D][t].total());
      dram_[v][o] = dram;
    }
  }
  // Orders: start from WS everywhere, then per layer the order that lowers network EDP most.
  double E = 0, C = 0;
  for (int v = 0; v < n; ++v) E += net.layers[v].count * en[v][0], C += net.layers[v].count * cy[v][0];
  for (int v = 0; v < n; ++v) {
    const double k = net.layers[v].count;
    int best = res.order[v];
    double best_edp = E * C;
    for (int o = 1; o < scratch_[v].n_orders; ++o) {
      const double e2 = E + k * (en[v][o] - en[v][best]), c2 = C + k * (cy[v][o] - cy[v][best]);
      if (e2 * c2 < best_edp) {
        E = e2, C = c2, best = o, best_edp = e2 * c2;
      }
    }
    res.order[v] = best;
  }
  E = C = 0;
  for (int v = 0; v < n; ++v) {
    const int o = res.order[v];
    res.layer_energy_pj[v] = en[v][o];
    res.layer_cycles[v] = cy[v][o];
    res.dram_words_saved[v] = saved[v][o];
    res.layer_dram_words[v] = dram_[v][o];
    E += net.layers[v].count * en[v][o];
    C += net.layers[v].count * cy[v][o];
  }
  res.energy_pj = E;
  res.cycles = C;
  return res;
}

}  // namespace mapfuse
