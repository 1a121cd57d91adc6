#include "engine/arch/energy_mlp.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <mutex>
#include <tuple>
#include <random>
#include <stdexcept>
#include <string>

namespace mapfuse {
namespace {

constexpr int kIterations = 20000;  // Adam steps; the fits converge well before (tests)
constexpr double kLearningRate = 0.01;

// Layer sizes: 1 input, the hidden layers, 1 output.
std::vector<int> layer_sizes(const std::vector<int>& hidden) {
  std::vector<int> s{1};
  s.insert(s.end(), hidden.begin(), hidden.end());
  s.push_back(1);
  return s;
}

// At most 4 hidden layers of at most 64 (checked by fit_energy_mlp): every activation of one forward
// pass fits in a fixed array, so a pass allocates nothing (a fit runs ~10^5 of them).
constexpr int kMaxActivations = 1 + 4 * 64 + 1;

// Forward pass on one standardised input. Writes every layer's activations into `act`, one layer
// after the other (layer l starts at the sum of the sizes before it): the backward pass reads them.
// Hidden layers tanh, output linear.
double forward(const std::vector<int>& sizes, const double* p, double x, double* act) {
  act[0] = x;
  const double* in = act;
  double* out = act + 1;
  for (size_t l = 0; l + 1 < sizes.size(); ++l) {
    const int n_in = sizes[l], n_out = sizes[l + 1];
    const double* W = p;
    const double* b = p + n_in * n_out;
    for (int o = 0; o < n_out; ++o) {
      double z = b[o];
      for (int i = 0; i < n_in; ++i) z += W[o * n_in + i] * in[i];
      out[o] = l + 2 < sizes.size() ? std::tanh(z) : z;
    }
    p += n_in * n_out + n_out;
    in = out;
    out += n_out;
  }
  return in[0];
}

}  // namespace

double EnergyMlp::at(double capacity_kb) const {
  const double x = (std::log(capacity_kb) - x_mean) / x_scale;
  std::array<double, kMaxActivations> act;
  return std::exp(forward(layer_sizes(hidden), params.data(), x, act.data()) * y_scale + y_mean);
}

EnergyMlp fit_energy_mlp_uncached(std::vector<double> capacity_kb, std::vector<double> energy_pj, std::vector<int> hidden) {
  const size_t n = capacity_kb.size();
  if (n != energy_pj.size())
    throw std::invalid_argument("capacity_kb has " + std::to_string(n) + " values and energy_pj " +
                                std::to_string(energy_pj.size()) + "; expected one energy per capacity");
  if (n < 2) throw std::invalid_argument("needs at least 2 (capacity, energy) points, found " + std::to_string(n));
  // A fit is 20,000 full-batch steps: its time grows with the points. A CACTI table has tens.
  if (n > 256) throw std::invalid_argument("at most 256 (capacity, energy) points, found " + std::to_string(n));
  for (size_t i = 0; i < n; ++i) {
    if (!(capacity_kb[i] > 0) || !std::isfinite(capacity_kb[i]))
      throw std::invalid_argument("capacity_kb[" + std::to_string(i) + "] is not a positive number");
    if (!(energy_pj[i] > 0) || !std::isfinite(energy_pj[i]))
      throw std::invalid_argument("energy_pj[" + std::to_string(i) + "] is not a positive number");
    if (i > 0 && !(capacity_kb[i] > capacity_kb[i - 1]))
      throw std::invalid_argument("capacity_kb must be strictly ascending; value " + std::to_string(i) +
                                  " is not above the one before");
  }
  if (hidden.empty() || hidden.size() > 4)
    throw std::invalid_argument("hidden must list 1 to 4 layer sizes, found " + std::to_string(hidden.size()));
  for (int h : hidden)
    if (h < 1 || h > 64) throw std::invalid_argument("hidden layer size " + std::to_string(h) + " is not in 1..64");

  EnergyMlp m;
  m.capacity_kb = std::move(capacity_kb);
  m.energy_pj = std::move(energy_pj);
  m.hidden = std::move(hidden);
  std::vector<double> xs(n), ys(n);
  for (size_t i = 0; i < n; ++i) xs[i] = std::log(m.capacity_kb[i]), ys[i] = std::log(m.energy_pj[i]);
  auto standardise = [&](std::vector<double>& v, double& mean, double& scale) {
    mean = 0;
    for (double a : v) mean += a;
    mean /= static_cast<double>(n);
    double var = 0;
    for (double a : v) var += (a - mean) * (a - mean);
    scale = std::sqrt(var / static_cast<double>(n));
    if (scale < 1e-12) scale = 1;  // all energies equal: fit the constant
    for (double& a : v) a = (a - mean) / scale;
  };
  standardise(xs, m.x_mean, m.x_scale);
  standardise(ys, m.y_mean, m.y_scale);

  // Xavier-uniform weights, zero biases, from a fixed-seed mt19937_64 (its output sequence is
  // specified by the standard; the distribution is built by hand because
  // std::uniform_real_distribution is not).
  const std::vector<int> sizes = layer_sizes(m.hidden);
  std::mt19937_64 rng(20260214);
  for (size_t l = 0; l + 1 < sizes.size(); ++l) {
    const double a = std::sqrt(6.0 / (sizes[l] + sizes[l + 1]));
    for (int k = 0; k < sizes[l] * sizes[l + 1]; ++k)
      m.params.push_back(a * (2 * (static_cast<double>(rng() >> 11) * 0x1p-53) - 1));
    m.params.insert(m.params.end(), static_cast<size_t>(sizes[l + 1]), 0.0);
  }

  const size_t P = m.params.size();
  std::vector<double> grad(P), mom(P, 0), vel(P, 0);
  std::array<double, kMaxActivations> act;
  std::vector<size_t> first(sizes.size());  // where each layer's activations start in `act`
  for (size_t l = 1; l < sizes.size(); ++l) first[l] = first[l - 1] + static_cast<size_t>(sizes[l - 1]);
  std::vector<double> delta, prev;
  delta.reserve(kMaxActivations);
  prev.reserve(kMaxActivations);
  for (int it = 1; it <= kIterations; ++it) {
    std::fill(grad.begin(), grad.end(), 0.0);
    for (size_t s = 0; s < n; ++s) {
      const double y = forward(sizes, m.params.data(), xs[s], act.data());
      delta.assign(1, 2 * (y - ys[s]) / static_cast<double>(n));  // d mean squared error / d output
      // Backward through the layers, last first.
      size_t offset = P;
      for (size_t l = sizes.size() - 1; l-- > 0;) {
        const int n_in = sizes[l], n_out = sizes[l + 1];
        offset -= static_cast<size_t>(n_in * n_out + n_out);
        const double* in = act.data() + first[l];
        for (int o = 0; o < n_out; ++o) {
          for (int i = 0; i < n_in; ++i) grad[offset + o * n_in + i] += delta[o] * in[i];
          grad[offset + n_in * n_out + o] += delta[o];
        }
        if (l == 0) break;
        prev.assign(n_in, 0);
        for (int i = 0; i < n_in; ++i) {
          double g = 0;
          for (int o = 0; o < n_out; ++o) g += m.params[offset + o * n_in + i] * delta[o];
          prev[i] = g * (1 - in[i] * in[i]);  // tanh'
        }
        delta.swap(prev);
      }
    }
    const double b1 = 0.9, b2 = 0.999;
    const double c1 = 1 - std::pow(b1, it), c2 = 1 - std::pow(b2, it);
    for (size_t k = 0; k < P; ++k) {
      mom[k] = b1 * mom[k] + (1 - b1) * grad[k];
      vel[k] = b2 * vel[k] + (1 - b2) * grad[k] * grad[k];
      m.params[k] -= kLearningRate * (mom[k] / c1) / (std::sqrt(vel[k] / c2) + 1e-12);
    }
  }
  for (size_t i = 0; i < n; ++i)
    m.max_relative_error = std::max(m.max_relative_error, std::abs(m.at(m.capacity_kb[i]) / m.energy_pj[i] - 1));
  return m;
}

// A fit is deterministic in its points, so one process fits each point set once: an architecture is
// loaded again for every study point, test and sweep, and the fit (~0.05 s) would dominate loading.
EnergyMlp fit_energy_mlp(std::vector<double> capacity_kb, std::vector<double> energy_pj, std::vector<int> hidden) {
  using Key = std::tuple<std::vector<double>, std::vector<double>, std::vector<int>>;
  static std::mutex mutex;
  static std::map<Key, EnergyMlp> fitted;
  // NaN would break the map's ordering; such points are refused by the fit itself.
  const auto finite = [](const std::vector<double>& v) {
    return std::all_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); });
  };
  if (!finite(capacity_kb) || !finite(energy_pj))
    return fit_energy_mlp_uncached(std::move(capacity_kb), std::move(energy_pj), std::move(hidden));
  Key key{capacity_kb, energy_pj, hidden};
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = fitted.find(key); it != fitted.end()) return it->second;
  }
  EnergyMlp m = fit_energy_mlp_uncached(std::move(capacity_kb), std::move(energy_pj), std::move(hidden));
  std::lock_guard<std::mutex> lock(mutex);
  if (fitted.size() >= 256) fitted.clear();  // bounded: a fuzzer or a huge sweep cannot grow it forever
  fitted.emplace(std::move(key), m);
  return m;
}

}  // namespace mapfuse
