#include "engine/cost/relaxed_check.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "engine/common/error.hpp"
#include "engine/common/factors.hpp"
#include "engine/cost/model.hpp"

namespace mapfuse {
namespace {

std::vector<double> average_ranks(std::span<const double> a) {
  const size_t n = a.size();
  std::vector<size_t> idx(n);
  std::iota(idx.begin(), idx.end(), size_t{0});
  std::sort(idx.begin(), idx.end(), [&](size_t i, size_t j) { return a[i] < a[j]; });
  std::vector<double> r(n);
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j + 1 < n && a[idx[j + 1]] == a[idx[i]]) ++j;
    const double avg = 0.5 * static_cast<double>(i + j) + 1;
    for (size_t k = i; k <= j; ++k) r[idx[k]] = avg;
    i = j + 1;
  }
  return r;
}

}  // namespace

Mapping random_relaxed_mapping(const RelaxedLayer& L, std::mt19937_64& rng) {
  const int M = L.n_levels, R = L.n_ranks;
  std::array<std::array<int64_t, kMaxRanks>, kMaxLevels> tf{}, sf{};
  for (auto& a : tf) a.fill(1);
  for (auto& a : sf) a.fill(1);
  std::array<std::array<int64_t, 2>, kMaxLevels> used{};  // spatial product per level and axis
  for (auto& u : used) u.fill(1);
  for (int d = 0; d < R; ++d) {
    // Lowest level a temporal loop over d may sit at: above every one-entry level keeping a
    // tensor that d indexes.
    int lowest = 0;
    for (int m = 0; m < M; ++m)
      for (int t = 0; t < L.n_tensors; ++t)
        if ((L.levels[m].keep >> t & 1) && L.levels[m].entries == 1 && (L.tensors[t].relevant_ranks >> d & 1))
          lowest = std::max(lowest, m + 1);
    for (int64_t p : prime_factors(L.rank_size[d])) {
      // Slots: temporal at levels lowest..M-1, spatial on the rank's axis where room is left.
      int slots[2 * kMaxLevels], n = 0;
      for (int m = lowest; m < M; ++m) slots[n++] = m;
      for (int m = 0; m < M; ++m)
        if (L.axis[m][d] >= 0 && used[m][L.axis[m][d]] * p <= L.levels[m].fanout[L.axis[m][d]]) slots[n++] = kMaxLevels + m;
      const int s = slots[std::uniform_int_distribution<int>(0, n - 1)(rng)];
      if (s < kMaxLevels) {
        tf[s][d] *= p;
      } else {
        const int m = s - kMaxLevels;
        sf[m][d] *= p;
        used[m][L.axis[m][d]] *= p;
      }
    }
  }
  Mapping mp;
  mp.levels.resize(M);
  for (int m = 0; m < M; ++m) {
    std::array<int, kMaxRanks> order{};
    std::iota(order.begin(), order.begin() + R, 0);
    std::shuffle(order.begin(), order.begin() + R, rng);
    LevelMapping& lm = mp.levels[m];
    lm.keep = L.levels[m].keep;
    for (int q = 0; q < R; ++q)
      if (tf[m][order[q]] > 1) lm.loops.push_back({order[q], tf[m][order[q]], LoopKind::Temporal});
    for (int d = 0; d < R; ++d)
      if (sf[m][d] > 1) lm.loops.push_back({d, sf[m][d], L.axis[m][d] == 0 ? LoopKind::SpatialX : LoopKind::SpatialY});
  }
  return mp;
}

double kendall_tau_b(std::span<const double> a, std::span<const double> b) {
  const size_t n = std::min(a.size(), b.size());
  double conc = 0, disc = 0, ta = 0, tb = 0;
  for (size_t i = 0; i < n; ++i)
    for (size_t j = i + 1; j < n; ++j) {
      const double da = a[i] - a[j], db = b[i] - b[j];
      if (da == 0 && db == 0) continue;
      if (da == 0) ++ta;
      else if (db == 0) ++tb;
      else if ((da > 0) == (db > 0)) ++conc;
      else ++disc;
    }
  const double denom = std::sqrt((conc + disc + ta) * (conc + disc + tb));
  return denom > 0 ? (conc - disc) / denom : 0;
}

double spearman_rho(std::span<const double> a, std::span<const double> b) {
  const std::vector<double> ra = average_ranks(a), rb = average_ranks(b);
  const size_t n = ra.size();
  if (n < 2) return 0;
  const double ma = std::accumulate(ra.begin(), ra.end(), 0.0) / static_cast<double>(n);
  const double mb = std::accumulate(rb.begin(), rb.end(), 0.0) / static_cast<double>(n);
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < n; ++i) {
    sab += (ra[i] - ma) * (rb[i] - mb);
    saa += (ra[i] - ma) * (ra[i] - ma);
    sbb += (rb[i] - mb) * (rb[i] - mb);
  }
  return saa > 0 && sbb > 0 ? sab / std::sqrt(saa * sbb) : 0;
}

RelaxedAgreement compare_relaxed_exact(const Einsum& e, const Core& c, int samples, uint64_t seed,
                                       ReuseModel reuse) {
  const RelaxedLayer base = make_relaxed_layer(e, c, reuse);
  const EvalPlan plan = compile_plan(e, c);
  std::mt19937_64 rng(seed);
  std::vector<double> el, er, ll, lr;
  RelaxedAgreement out;
  std::array<double, kMaxLevels> level_err{};
  std::array<int, kMaxLevels> level_n{};
  double acc_err = 0;
  int acc_n = 0;
  std::vector<double> x(base.n_vars());
  int attempts = 0;
  while (out.samples < samples) {
    if (++attempts > samples * 2000)
      throw InputError({}, "einsum '" + e.name + "'", "too few valid random mappings for the comparison");
    const Mapping mp = random_relaxed_mapping(base, rng);
    const CostResult exact = evaluate(plan, flatten(mp));
    if (!exact.valid()) continue;
    RelaxedLayer L = base;
    L.order = loop_orders_of(mp, L.n_ranks);
    factors_from_mapping(L, mp, x.data());
    const RelaxedLayerCost rc = relaxed_layer_cost(L, x.data());
    el.push_back(exact.energy_pj);
    er.push_back(rc.energy_pj);
    ll.push_back(exact.cycles);
    lr.push_back(rc.cycles);
    for (int m = 0; m < L.n_levels; ++m) {
      double ex = 0;
      for (int t = 0; t < L.n_tensors; ++t) ex += static_cast<double>(exact.access[m][t].total());
      if (ex <= 0) continue;
      const double err = std::abs(rc.level_accesses[m] - ex) / ex;
      level_err[m] += err;
      ++level_n[m];
      acc_err += err;
      ++acc_n;
    }
    const double ee = std::abs(rc.energy_pj - exact.energy_pj) / exact.energy_pj;
    const double le = std::abs(rc.cycles - exact.cycles) / exact.cycles;
    out.energy_mean_error += ee;
    out.energy_max_error = std::max(out.energy_max_error, ee);
    out.latency_mean_error += le;
    out.latency_max_error = std::max(out.latency_max_error, le);
    ++out.samples;
  }
  out.energy_mean_error /= out.samples;
  out.latency_mean_error /= out.samples;
  out.energy_tau = kendall_tau_b(el, er);
  out.energy_rho = spearman_rho(el, er);
  out.latency_tau = kendall_tau_b(ll, lr);
  out.latency_rho = spearman_rho(ll, lr);
  out.access_accuracy = acc_n > 0 ? 1 - acc_err / acc_n : 1;
  for (int m = 0; m < kMaxLevels; ++m) out.level_accuracy[m] = level_n[m] > 0 ? 1 - level_err[m] / level_n[m] : 1;
  return out;
}

}  // namespace mapfuse
