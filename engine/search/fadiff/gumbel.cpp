#include "engine/search/fadiff/gumbel.hpp"

#include <cmath>

namespace mapfuse {

GumbelPick gumbel_softmax_st(const int64_t* c, int n, double u, double alpha, double tau, const double* g,
                             Proximity prox, double noise_scale) {
  double z[256], dl[256];  // (l + g) / tau and dl/du
  const double T = std::exp(u);
  int best = 0;
  double zmax = -INFINITY;
  for (int j = 0; j < n; ++j) {
    const double d = static_cast<double>(c[j]);
    double l;
    if (prox == Proximity::Log) {
      const double diff = u - std::log(d);
      l = -alpha * diff * diff;
      dl[j] = -2 * alpha * diff;
    } else {
      const double diff = T - d;
      l = -alpha * diff * diff;
      dl[j] = -2 * alpha * diff * T;  // d/du = d/dT * T
    }
    z[j] = (l + (g ? noise_scale * g[j] : 0.0)) / tau;
    if (z[j] > zmax) zmax = z[j], best = j;
  }
  // p = softmax(z); d_hat = sum p_j d_j; d d_hat/du = (1/tau) Cov_p(d, dl/du).
  double s = 0, sd = 0, sdl = 0, sddl = 0;
  for (int j = 0; j < n; ++j) {
    const double p = std::exp(z[j] - zmax);
    const double d = static_cast<double>(c[j]);
    s += p;
    sd += p * d;
    sdl += p * dl[j];
    sddl += p * d * dl[j];
  }
  GumbelPick out;
  out.index = best;
  out.value = static_cast<double>(c[best]);
  out.soft = sd / s;
  out.dsoft_du = (sddl / s - (sd / s) * (sdl / s)) / tau;
  return out;
}

}  // namespace mapfuse
