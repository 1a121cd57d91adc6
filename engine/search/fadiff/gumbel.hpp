#pragma once
// Gumbel-softmax over the divisors of a rank with proximity logits (FADiff Eqs. 1-3) and the
// straight-through estimator: the forward value is the hard choice argmax_j (l_j + g_j); the
// backward pass uses the soft expectation d_hat = sum_j p_j d_j, p = softmax((l + g) / tau).
#include <cstdint>

namespace mapfuse {

// Where the proximity logits measure distance. Linear: l_j = -alpha (T - d_j)^2, the paper's Eq. 1
// read literally (its softmax is one-hot once divisors are farther apart than ~1/sqrt(alpha), so
// the gradient vanishes on large ranks). Log (default): l_j = -alpha (ln T - ln d_j)^2, the same
// form on the log scale, where neighbouring divisors of any rank are comparably far apart.
enum class Proximity : uint8_t { Log, Linear };

struct GumbelPick {
  int index = 0;          // hard choice (forward)
  double value = 1;       // candidates[index]
  double soft = 1;        // d_hat (Eq. 3)
  double dsoft_du = 0;    // d d_hat / d u, u = ln T (the optimizer's parameter)
};

// candidates: n > 0 values (> 0); u = ln T; gumbel: n samples of Gumbel(0, 1), or nullptr for none
// (deterministic decode: the nearest candidate). The noise enters as (l_j + noise_scale * g_j) / tau:
// with noise_scale 1 this is Eq. 2 as printed, whose hard choice argmax(l + g) samples softmax(l)
// at every temperature; the optimizer passes noise_scale = tau, so that, as the paper states, the
// choice collapses to argmax_j l_j as tau -> 0 (docs/fadiff.md). Allocation-free (n <= 256).
GumbelPick gumbel_softmax_st(const int64_t* candidates, int n, double u, double alpha, double tau,
                             const double* gumbel, Proximity prox = Proximity::Log, double noise_scale = 1);

}  // namespace mapfuse
