#include "engine/search/fadiff/optimize.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <random>

#include "engine/common/error.hpp"
#include "engine/search/fadiff/baselines.hpp"
#include "engine/search/fadiff/encoding.hpp"

namespace mapfuse {

Method parse_method(std::string_view name) {
  if (name == "fadiff") return Method::FADiff;
  if (name == "dosa" || name == "dosa_style") return Method::DosaStyle;
  if (name == "ga" || name == "genetic") return Method::Genetic;
  if (name == "bo" || name == "bayesian") return Method::Bayesian;
  throw InputError({}, "method", "unknown method '" + std::string(name) + "'; expected fadiff, dosa, ga or bo" +
                                     did_you_mean(name, {"fadiff", "dosa", "ga", "bo", "genetic", "bayesian"}));
}

std::string_view to_string(Method m) {
  switch (m) {
    case Method::FADiff: return "fadiff";
    case Method::DosaStyle: return "dosa";
    case Method::Genetic: return "ga";
    case Method::Bayesian: return "bo";
  }
  return "?";
}

// --- Shared run state. ------------------------------------------------------------------------

SearchRun::SearchRun(const SearchSpace& s, const OptimizeOptions& o, OptimizeResult& r)
    : space(s), opt(o), res(r), ev(s, o.try_dram_orders), t0(std::chrono::steady_clock::now()) {}

double SearchRun::seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

bool SearchRun::done() {
  if (!res.stopped_by.empty()) return true;
  if (opt.max_evaluations > 0 && res.evaluations >= opt.max_evaluations) res.stopped_by = "evaluations";
  else if (seconds() >= opt.time_budget_s) res.stopped_by = "time";
  return !res.stopped_by.empty();
}

double SearchRun::consider(std::span<double> x, std::span<const uint8_t> fused) {
  ++res.evaluations;
  ++res.exact_evaluations;
  const ExactNetworkEvaluator::Result& r = ev.evaluate(x, fused);
  if (!r.valid) return std::numeric_limits<double>::infinity();
  const double edp = r.edp();
  if (!have_best || edp < best.edp()) {
    have_best = true;
    best = r;
    best_x.assign(x.begin(), x.end());
    res.trace.push_back({seconds(), res.evaluations, edp});
  }
  return edp;
}

void SearchRun::finish() {
  res.seconds = seconds();
  if (res.stopped_by.empty()) res.stopped_by = "starts";
  const RelaxedNetwork& net = space.net();
  for (const RelaxedLayer& L : net.layers) res.layers.push_back(L.name);
  for (const auto& e : net.edges) res.edges.emplace_back(e.producer, e.consumer);
  if (!have_best) return;
  res.found = true;
  res.energy_pj = best.energy_pj;
  res.cycles = best.cycles;
  res.edp = best.edp();
  res.fused = best.fused;
  res.factors = best_x;
  res.groups = ev.groups(best.fused);
  res.capacity_repairs = best.capacity_repairs;
  res.group_splits = best.group_splits;
  for (int v = 0; v < space.n_layers(); ++v) {
    res.mappings.push_back(ev.mapping(v, best_x.data() + net.var_begin[v], best.order[v]));
    res.dram_words_saved += net.layers[v].count * best.dram_words_saved[v];
  }
  if (!res.trace.empty() && res.trace.back().evaluations != res.evaluations)
    res.trace.push_back({res.seconds, res.evaluations, res.edp});
}

namespace {

// --- Gradient methods. --------------------------------------------------------------------------

struct Adam {
  std::vector<double> m, v;
  int t = 0;
  explicit Adam(size_t n) : m(n, 0), v(n, 0) {}
  // One step of p -= lr * mhat / (sqrt(vhat) + eps) for parameters [begin, end) of the gradient.
  void step(std::span<double> p, std::span<const double> g, double lr, size_t offset) {
    constexpr double b1 = 0.9, b2 = 0.999, eps = 1e-8;
    const double c1 = 1 - std::pow(b1, t), c2 = 1 - std::pow(b2, t);
    for (size_t i = 0; i < p.size(); ++i) {
      double& mi = m[offset + i];
      double& vi = v[offset + i];
      mi = b1 * mi + (1 - b1) * g[i];
      vi = b2 * vi + (1 - b2) * g[i] * g[i];
      p[i] -= lr * (mi / c1) / (std::sqrt(vi / c2) + eps);
    }
  }
};

// Per-gene bounds of u = ln T: [0, ln(min(rank size, fan-out))].
std::vector<double> u_upper(const SearchSpace& s) {
  std::vector<double> hi(s.n_factor_genes());
  for (int v = 0; v < s.n_layers(); ++v) {
    const RelaxedLayer& L = s.net().layers[v];
    const auto& vars = s.layer(v).vars;
    for (size_t i = 0; i < vars.size(); ++i) {
      double cap = static_cast<double>(L.rank_size[vars[i].rank]);
      if (vars[i].axis >= 0) cap = std::min(cap, static_cast<double>(L.levels[vars[i].level].fanout[vars[i].axis]));
      hi[s.gene_begin(v) + i] = std::log(cap);
    }
  }
  return hi;
}

// Start point shared by FADiff and DOSA-style for the same (seed, start): the best (exact model)
// of `init_samples` uniform random gene vectors, u = ln of its factors (a mapper-provided start, as
// DOSA starts from CoSA's mappings); sigma uniform in [0.3, 0.7]. The samples count as evaluations.
void init_start(SearchRun& run, std::mt19937_64& rng, std::vector<double>& u, std::vector<double>& sig) {
  const SearchSpace& S = run.space;
  const RelaxedNetwork& net = S.net();
  std::uniform_real_distribution<double> U(0, 1);
  std::vector<double> genes(S.n_genes()), x(net.n_vars, 1.0), best_x;
  std::vector<uint8_t> none(S.n_edges(), 0);
  double best = std::numeric_limits<double>::infinity();
  for (int k = 0; k < std::max(1, run.opt.init_samples); ++k) {
    for (double& g : genes) g = U(rng);
    for (int e = 0; e < S.n_edges(); ++e) genes[S.n_factor_genes() + e] = 0;
    std::vector<uint8_t> fused(S.n_edges());
    decode_genes(S, genes, x, fused);
    const double edp = run.consider(x, none);
    if (best_x.empty() || edp < best) best = edp, best_x = x;  // x as repaired
    if (run.done()) break;
  }
  x = best_x;
  for (int v = 0; v < S.n_layers(); ++v) {
    const auto& vars = S.layer(v).vars;
    for (size_t i = 0; i < vars.size(); ++i) u[S.gene_begin(v) + i] = std::log(x[net.var_begin[v] + vars[i].var]);
  }
  for (double& s : sig) s = run.opt.sigma_init;
}

LossWeights normalised_weights(const SearchSpace& s, const OptimizeOptions& o, double edp_ref) {
  // P_mem is in words^2: normalised by the fusion level's capacity (where groups must fit). The
  // smallest level (an accumulator column, 128-512 words) would make the scratchpad's term 10^3-10^4
  // times stiffer and crush every tile; overflows of smaller levels are left to the decode's repair.
  double cref = 0;
  int F = -1;
  for (const RelaxedLayer& L : s.net().layers) F = std::max(F, static_cast<int>(L.fusion_level));
  if (F >= 0) cref = static_cast<double>(s.core().levels[F].entries);
  if (cref <= 1)
    for (const Level& l : s.core().levels)
      if (l.entries > 1 && (cref <= 1 || static_cast<double>(l.entries) < cref)) cref = static_cast<double>(l.entries);
  if (cref == 0) cref = 1;
  LossWeights w;
  w.edp = edp_ref > 0 ? 1 / edp_ref : 1;
  w.map = o.lambda;
  w.mem = o.lambda / (cref * cref);
  w.align = o.lambda * o.align_weight;
  return w;
}

uint64_t start_seed(uint64_t seed, int start) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(start + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void run_fadiff(SearchRun& run) {
  const SearchSpace& S = run.space;
  const RelaxedNetwork& net = S.net();
  const OptimizeOptions& o = run.opt;
  const int G = S.n_factor_genes(), E = S.n_edges();
  std::vector<double> u(G), sig(E), dsoft(G), x(net.n_vars, 1.0), grad(net.n_vars), xd(net.n_vars, 1.0);
  std::vector<double> gu(G), gs(E), noise(kMaxDivisors), ulo(G), uhi(G);
  std::vector<uint8_t> fused(E), none(E, 0), all(E, 1);
  RelaxedWorkspace ws(net);
  // Gumbel(0, 1) = -ln(-ln U), U uniform in (0, 1) from the top 53 bits.
  auto gumbel = [](std::mt19937_64& r) { return -std::log(-std::log((static_cast<double>(r() >> 11) + 0.5) * 0x1p-53)); };
  const int steps = std::max(1, o.steps_per_start);
  for (int start = 0; (o.max_starts == 0 || start < o.max_starts) && !run.done(); ++start) {
    ++run.res.starts;
    std::mt19937_64 rng(start_seed(o.seed, start));
    init_start(run, rng, u, sig);
    Adam adam(G + E);
    LossWeights w;
    for (int step = 0; step < steps && !run.done(); ++step) {
      const double tau = steps > 1 ? o.tau0 * std::pow(o.tau_min / o.tau0, static_cast<double>(step) / (steps - 1)) : o.tau_min;
      // Forward: hard Gumbel-softmax choices (straight-through), soft derivatives kept.
      for (int v = 0; v < S.n_layers(); ++v) {
        const int gb = S.gene_begin(v);
        S.decode_layer(v, x.data() + net.var_begin[v], [&](int i, const Candidates& c) {
          for (int j = 0; j < c.n; ++j) noise[j] = gumbel(rng);
          const GumbelPick p = gumbel_softmax_st(c.value.data(), c.n, u[gb + i], o.alpha, tau, noise.data(), o.proximity, tau);
          dsoft[gb + i] = p.dsoft_du;
          ulo[gb + i] = std::log(static_cast<double>(c.value[0]));
          uhi[gb + i] = std::log(static_cast<double>(c.value[c.n - 1]));
          return p.index;
        });
      }
      for (int e = 0; e < E; ++e) x[net.sigma(e)] = sig[e];
      if (step == 0) {
        RelaxedCost c0;
        relaxed_loss(net, x, LossWeights{1, 0, 0, 0}, ws, &c0);
        w = normalised_weights(S, o, c0.edp);
      }
      RelaxedCost cost;
      relaxed_loss(net, x, w, ws, &cost, grad);
      w.edp = cost.edp > 0 ? 1 / cost.edp : w.edp;  // EDP / EDP_previous: the gradient of ln EDP
      chain_dram_gradient(net, x, grad);
      for (int v = 0; v < S.n_layers(); ++v) {
        const auto& vars = S.layer(v).vars;
        for (size_t i = 0; i < vars.size(); ++i) {
          const int gi = S.gene_begin(v) + static_cast<int>(i);
          gu[gi] = grad[net.var_begin[v] + vars[i].var] * dsoft[gi];
        }
      }
      for (int e = 0; e < E; ++e) gs[e] = grad[net.sigma(e)];
      ++adam.t;
      adam.step(u, gu, o.lr, 0);
      adam.step(sig, gs, o.sigma_lr, G);
      // Projection onto the current candidates' range (half a factor of 2 beyond): past it the
      // choice cannot move and Adam's normalised steps would only carry u further away.
      for (int i = 0; i < G; ++i) u[i] = std::clamp(u[i], ulo[i] - 0.35, uhi[i] + 0.35);
      for (double& s : sig) s = std::clamp(s, 0.0, 1.0);
      ++run.res.gradient_steps;
      ++run.res.evaluations;
      // Decode (no noise: the candidate nearest to T), sigma > 0.5 fused; verify exactly.
      if ((step + 1) % std::max(1, o.decode_every) == 0 || step == steps - 1) {
        for (int v = 0; v < S.n_layers(); ++v) {
          const int gb = S.gene_begin(v);
          S.decode_layer(v, xd.data() + net.var_begin[v], [&](int i, const Candidates& c) {
            return gumbel_softmax_st(c.value.data(), c.n, u[gb + i], o.alpha, 1, nullptr, o.proximity).index;
          });
        }
        for (int e = 0; e < E; ++e) fused[e] = sig[e] > 0.5;
        run.consider(xd, fused);
        if (step == steps - 1) {
          // The same tiling without fusion, and (decode_max_fusion) with every edge fused, the
          // group repair cutting what does not fit: at fixed tiles a fused edge only replaces a
          // DRAM round trip by an on-chip copy, so fusing whatever fits is the natural last step.
          if (std::count(fused.begin(), fused.end(), 1) > 0 && !run.done()) run.consider(xd, none);
          if (o.decode_max_fusion && E > 0 && !run.done()) run.consider(xd, all);
        }
      }
    }
  }
}

// DOSA-style: continuous factors T = exp(u) (DRAM factors derived), no fusion, network EDP with
// P_valid/P_spatial, Adam; every `round_every` steps and at the end of a start each factor goes to
// the nearest divisor of what is left of its rank (linear distance, spatial first then temporal,
// inner to outer, DRAM takes the remainder), the rounded point is verified exactly and the search
// continues from it with the Adam state carried over (shared/notes/dosa_gemmini.md section 1.7).
void run_dosa(SearchRun& run) {
  const SearchSpace& S = run.space;
  const RelaxedNetwork& net = S.net();
  const OptimizeOptions& o = run.opt;
  const int G = S.n_factor_genes(), E = S.n_edges();
  const std::vector<double> hi = u_upper(S);
  std::vector<double> u(G), sig(E), x(net.n_vars, 1.0), grad(net.n_vars), xr(net.n_vars, 1.0), gu(G);
  std::vector<uint8_t> none(E, 0);
  RelaxedWorkspace ws(net);
  const int steps = std::max(1, o.steps_per_start);
  auto fill = [&] {
    for (int v = 0; v < S.n_layers(); ++v) {
      const auto& vars = S.layer(v).vars;
      for (size_t i = 0; i < vars.size(); ++i) x[net.var_begin[v] + vars[i].var] = std::exp(u[S.gene_begin(v) + i]);
    }
    derive_dram_factors(net, x);
    for (int e = 0; e < E; ++e) x[net.sigma(e)] = 0;
  };
  for (int start = 0; (o.max_starts == 0 || start < o.max_starts) && !run.done(); ++start) {
    ++run.res.starts;
    std::mt19937_64 rng(start_seed(o.seed, start));
    init_start(run, rng, u, sig);
    Adam adam(G);
    fill();
    RelaxedCost c0;
    relaxed_loss(net, x, LossWeights{1, 0, 0, 0}, ws, &c0);
    LossWeights w = normalised_weights(S, o, c0.edp);
    for (int step = 0; step < steps && !run.done(); ++step) {
      fill();
      RelaxedCost cost;
      relaxed_loss(net, x, w, ws, &cost, grad);
      w.edp = cost.edp > 0 ? 1 / cost.edp : w.edp;  // EDP / EDP_previous: the gradient of ln EDP
      chain_dram_gradient(net, x, grad);
      for (int v = 0; v < S.n_layers(); ++v) {
        const auto& vars = S.layer(v).vars;
        for (size_t i = 0; i < vars.size(); ++i) {
          const int vi = net.var_begin[v] + vars[i].var;
          gu[S.gene_begin(v) + i] = grad[vi] * x[vi];  // d/du = d/dT * T
        }
      }
      ++adam.t;
      adam.step(u, gu, o.dosa_lr, 0);
      for (int i = 0; i < G; ++i) u[i] = std::clamp(u[i], 0.0, hi[i]);
      ++run.res.gradient_steps;
      ++run.res.evaluations;
      if ((step + 1) % std::max(1, o.round_every) == 0 || step == steps - 1) {
        for (int v = 0; v < S.n_layers(); ++v) {
          const int gb = S.gene_begin(v);
          S.decode_layer(v, xr.data() + net.var_begin[v], [&](int i, const Candidates& c) {
            const double t = std::exp(u[gb + i]);
            int k = 0;
            for (int j = 1; j < c.n; ++j)
              if (std::abs(static_cast<double>(c.value[j]) - t) < std::abs(static_cast<double>(c.value[k]) - t)) k = j;
            u[gb + i] = std::log(static_cast<double>(c.value[k]));  // continue from the rounded point
            return k;
          });
        }
        run.consider(xr, none);
      }
    }
  }
}

}  // namespace

OptimizeResult optimize_network(const Workload& w, const Core& c, Method method, const OptimizeOptions& o) {
  if (!(o.time_budget_s > 0) || !std::isfinite(o.time_budget_s))
    throw InputError({}, "time_budget_s",
                     "the time budget must be a positive number of seconds (got " + std::to_string(o.time_budget_s) + ")");
  if (o.max_evaluations < 0)
    throw InputError({}, "max_evaluations", "the evaluation budget must be >= 0 (0 = none)");
  if (static_cast<int>(method) > static_cast<int>(Method::Bayesian))
    throw InputError({}, "method", "unknown method " + std::to_string(static_cast<int>(method)) +
                                       "; expected fadiff, dosa, ga or bo");
  const SearchSpace space(w, c);
  OptimizeResult res;
  res.method = method;
  SearchRun run(space, o, res);
  switch (method) {
    case Method::FADiff: run_fadiff(run); break;
    case Method::DosaStyle: run_dosa(run); break;
    case Method::Genetic: run_genetic(run); break;
    case Method::Bayesian: run_bayesian(run); break;
  }
  run.finish();
  return res;
}

}  // namespace mapfuse
