#include "engine/search/fadiff/baselines.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include <Eigen/Cholesky>
#include <Eigen/Core>

namespace mapfuse {

void decode_genes(const SearchSpace& s, std::span<const double> g, std::span<double> x, std::span<uint8_t> fused) {
  const RelaxedNetwork& net = s.net();
  for (int v = 0; v < s.n_layers(); ++v) {
    const int gb = s.gene_begin(v);
    s.decode_layer(v, x.data() + net.var_begin[v], [&](int i, const Candidates& c) {
      return std::min(c.n - 1, static_cast<int>(g[gb + i] * c.n));
    });
  }
  for (int e = 0; e < s.n_edges(); ++e) fused[e] = g[s.n_factor_genes() + e] > 0.5;
}

namespace {

double eval_genes(SearchRun& run, std::span<const double> g, std::vector<double>& x, std::vector<uint8_t>& fused) {
  decode_genes(run.space, g, x, fused);
  return run.consider(x, fused);
}

}  // namespace

// Genetic algorithm (the settings of FADiff's public precursor: population 50, two-point
// crossover with probability 0.8, per-gene mutation 0.1 to a uniform value, tournaments of 3),
// with the best individual carried over (elitism 1). Fitness: exact network EDP.
void run_genetic(SearchRun& run) {
  const SearchSpace& S = run.space;
  const OptimizeOptions& o = run.opt;
  const int D = S.n_genes(), P = std::max(2, o.population);
  std::mt19937_64 rng(o.seed);
  std::uniform_real_distribution<double> U(0, 1);
  std::vector<double> x(S.net().n_vars, 1.0);
  std::vector<uint8_t> fused(S.n_edges());
  std::vector<std::vector<double>> pop(P, std::vector<double>(D)), next;
  std::vector<double> fit(P, std::numeric_limits<double>::infinity()), next_fit;
  run.res.starts = 1;
  int evaluated = 0;
  for (int i = 0; i < P && !run.done(); ++i) {
    for (double& g : pop[i]) g = U(rng);
    fit[i] = eval_genes(run, pop[i], x, fused);
    evaluated = i + 1;
  }
  if (evaluated < P) return;
  auto tournament = [&]() -> int {
    int best = static_cast<int>(rng() % P);
    for (int k = 1; k < o.tournament; ++k) {
      const int c = static_cast<int>(rng() % P);
      if (fit[c] < fit[best]) best = c;
    }
    return best;
  };
  while (!run.done()) {
    next.clear();
    next_fit.clear();
    const int elite = static_cast<int>(std::min_element(fit.begin(), fit.end()) - fit.begin());
    next.push_back(pop[elite]);
    next_fit.push_back(fit[elite]);
    while (static_cast<int>(next.size()) < P && !run.done()) {
      std::vector<double> a = pop[tournament()], b = pop[tournament()];
      if (U(rng) < o.crossover && D > 1) {
        int c1 = static_cast<int>(rng() % D), c2 = static_cast<int>(rng() % D);
        if (c1 > c2) std::swap(c1, c2);
        for (int k = c1; k <= c2; ++k) std::swap(a[k], b[k]);
      }
      for (auto* child : {&a, &b}) {
        if (static_cast<int>(next.size()) >= P || run.done()) break;
        for (double& g : *child)
          if (U(rng) < o.mutation) g = U(rng);
        next_fit.push_back(eval_genes(run, *child, x, fused));
        next.push_back(std::move(*child));
      }
    }
    if (static_cast<int>(next.size()) < P) break;  // budget ended inside a generation
    pop.swap(next);
    fit.swap(next_fit);
  }
}

namespace {

// The GP's kernel matrix is factored with Eigen's LLT (Cholesky): the training set is at most
// `bo_max_points`, so a dense factorisation per fit is cheap and exact enough.
struct Gp {
  int n = 0, d = 0;
  double ell = 1, noise = 1e-6;
  Eigen::MatrixXd X;        // n x d, one training point per row
  Eigen::LLT<Eigen::MatrixXd> llt;
  Eigen::VectorXd alpha;    // K^-1 y
  // Fits on standardised y with an RBF kernel of length scale `ell`; returns the log marginal
  // likelihood (-inf if the kernel matrix is not positive definite).
  double fit(const std::vector<double>& Xin, const std::vector<double>& y, int n_, int d_, double ell_) {
    n = n_, d = d_, ell = ell_;
    X = Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(Xin.data(), n, d);
    Eigen::MatrixXd K(n, n);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j <= i; ++j) {
        K(i, j) = std::exp(-(X.row(i) - X.row(j)).squaredNorm() / (2 * ell * ell)) + (i == j ? noise + 1e-8 : 0);
        K(j, i) = K(i, j);
      }
    llt.compute(K);
    if (llt.info() != Eigen::Success) return -std::numeric_limits<double>::infinity();
    const Eigen::Map<const Eigen::VectorXd> yv(y.data(), n);
    const Eigen::VectorXd half = llt.matrixL().solve(yv);  // L^-1 y
    const Eigen::MatrixXd L = llt.matrixL();
    double lml = -0.5 * half.squaredNorm();
    for (int i = 0; i < n; ++i) lml -= std::log(L(i, i));
    alpha = llt.solve(yv);
    return lml;
  }
  void predict(const double* x, Eigen::VectorXd& k, double& mu, double& sd) const {
    const Eigen::Map<const Eigen::RowVectorXd> xv(x, d);
    k.resize(n);
    for (int i = 0; i < n; ++i) k(i) = std::exp(-(xv - X.row(i)).squaredNorm() / (2 * ell * ell));
    mu = k.dot(alpha);
    const Eigen::VectorXd v = llt.matrixL().solve(k);
    sd = std::sqrt(std::max(1 + noise - v.squaredNorm(), 1e-12));
  }
};

double expected_improvement(double mu, double sd, double best) {
  const double z = (best - mu) / sd;
  const double cdf = 0.5 * std::erfc(-z / std::sqrt(2.0));
  const double pdf = std::exp(-0.5 * z * z) / std::sqrt(2 * M_PI);
  return (best - mu) * cdf + sd * pdf;
}

}  // namespace

// Bayesian optimisation over the genes: a Gaussian process on ln(EDP) (standardised) with an RBF
// kernel whose length scale is chosen by marginal likelihood on a grid, expected improvement,
// maximised over random candidates and mutations of the best observations followed by a local
// search (perturbations of the best candidates). `bo_initial` random points first.
void run_bayesian(SearchRun& run) {
  const SearchSpace& S = run.space;
  const OptimizeOptions& o = run.opt;
  const int D = S.n_genes();
  std::mt19937_64 rng(o.seed);
  std::uniform_real_distribution<double> U(0, 1);
  std::vector<double> x(S.net().n_vars, 1.0);
  std::vector<uint8_t> fused(S.n_edges());
  std::vector<std::vector<double>> obs;
  std::vector<double> val;  // ln EDP
  run.res.starts = 1;
  auto observe = [&](std::vector<double> g) {
    const double e = eval_genes(run, g, x, fused);
    obs.push_back(std::move(g));
    val.push_back(std::isfinite(e) ? std::log(e) : std::numeric_limits<double>::infinity());
  };
  for (int i = 0; i < std::max(2, o.bo_initial) && !run.done(); ++i) {
    std::vector<double> g(D);
    for (double& v : g) v = U(rng);
    observe(std::move(g));
  }
  Gp gp;
  Eigen::VectorXd k;
  std::vector<double> cand(D);
  const double ell_grid[] = {0.05, 0.1, 0.2, 0.4, 0.8};
  int iter = 0;
  while (!run.done()) {
    // Training set: the best (finite) observations, at most bo_max_points.
    std::vector<int> idx(obs.size());
    std::iota(idx.begin(), idx.end(), 0);
    idx.erase(std::remove_if(idx.begin(), idx.end(), [&](int i) { return !std::isfinite(val[i]); }), idx.end());
    std::sort(idx.begin(), idx.end(), [&](int a, int b) { return val[a] < val[b]; });
    if (static_cast<int>(idx.size()) > o.bo_max_points) idx.resize(o.bo_max_points);
    const int n = static_cast<int>(idx.size());
    std::vector<double> X(static_cast<size_t>(n) * D), y(n);
    double mean = 0, var = 0;
    for (int i = 0; i < n; ++i) mean += val[idx[i]];
    mean /= std::max(1, n);
    for (int i = 0; i < n; ++i) var += (val[idx[i]] - mean) * (val[idx[i]] - mean);
    const double sdv = n > 1 && var > 0 ? std::sqrt(var / n) : 1;
    for (int i = 0; i < n; ++i) {
      std::copy(obs[idx[i]].begin(), obs[idx[i]].end(), X.begin() + static_cast<size_t>(i) * D);
      y[i] = (val[idx[i]] - mean) / sdv;
    }
    // Length scale (relative to sqrt(D), the diameter scale of the unit cube) every 10 iterations.
    if (iter % 10 == 0) {
      double best_l = -std::numeric_limits<double>::infinity(), ell = gp.ell;
      for (double r : ell_grid) {
        const double l = gp.fit(X, y, n, D, r * std::sqrt(static_cast<double>(D)));
        if (l > best_l) best_l = l, ell = r * std::sqrt(static_cast<double>(D));
      }
      gp.ell = ell;
    }
    gp.fit(X, y, n, D, gp.ell);
    const double ybest = n > 0 ? y[0] : 0;
    // Acquisition: random candidates, mutations of the best observations, then local search.
    std::vector<std::pair<double, std::vector<double>>> top;
    auto score = [&](const std::vector<double>& g) {
      double mu, sd;
      gp.predict(g.data(), k, mu, sd);
      return expected_improvement(mu, sd, ybest);
    };
    auto offer = [&](std::vector<double> g) {
      const double a = score(g);
      top.emplace_back(a, std::move(g));
    };
    for (int c = 0; c < o.bo_candidates; ++c) {
      std::vector<double> g(D);
      if (c % 2 == 0 || n == 0) {
        for (double& v : g) v = U(rng);
      } else {
        g = obs[idx[static_cast<size_t>(rng() % std::min(n, 5))]];
        for (double& v : g)
          if (U(rng) < 0.1) v = U(rng);
      }
      offer(std::move(g));
    }
    std::partial_sort(top.begin(), top.begin() + std::min<size_t>(5, top.size()), top.end(),
                      [](const auto& a, const auto& b) { return a.first > b.first; });
    top.resize(std::min<size_t>(5, top.size()));
    for (int round = 0; round < 3; ++round) {
      const size_t m = top.size();
      for (size_t t = 0; t < m; ++t)
        for (int r = 0; r < 10; ++r) {
          std::vector<double> g = top[t].second;
          for (double& v : g)
            if (U(rng) < 0.05) v = std::clamp(v + 0.1 * (U(rng) - 0.5), 0.0, 0.999999);
          offer(std::move(g));
        }
      std::partial_sort(top.begin(), top.begin() + 5, top.end(),
                        [](const auto& a, const auto& b) { return a.first > b.first; });
      top.resize(5);
    }
    observe(top[0].second);
    ++iter;
  }
}

}  // namespace mapfuse
