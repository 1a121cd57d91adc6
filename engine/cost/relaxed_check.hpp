#pragma once
// Agreement of the relaxed model (relaxed.hpp) with the exact model (model.hpp) at integer points:
// random valid mappings of one layer, both models, rank correlations and access-count accuracy.
// Used by the tests and by bench/bench_relaxed.cpp --report (figures in docs/validation.md).
#include <array>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "engine/cost/relaxed.hpp"

namespace mapfuse {

// A random mapping in the relaxed layer's space: every prime factor of every rank goes to a
// temporal loop of a random level or to a spatial loop on the rank's axis (while the fan-out has
// room); each level's temporal order is a random permutation; tensors kept as the layer keeps
// them. Temporal factors of ranks indexed by a tensor kept in a one-entry level (registers) stay
// above it. Capacity is not checked here.
Mapping random_relaxed_mapping(const RelaxedLayer& layer, std::mt19937_64& rng);

// Kendall's tau-b and Spearman's rho (average ranks for ties).
double kendall_tau_b(std::span<const double> a, std::span<const double> b);
double spearman_rho(std::span<const double> a, std::span<const double> b);

struct RelaxedAgreement {
  int samples = 0;
  double latency_tau = 0, latency_rho = 0, energy_tau = 0, energy_rho = 0;
  // 1 - mean |relaxed - exact| / exact of every level's total accesses (reads + fills + updates,
  // over tensors and instances), over samples and levels.
  double access_accuracy = 0;
  std::array<double, kMaxLevels> level_accuracy{};  // the same per level
  double energy_mean_error = 0, energy_max_error = 0;    // relative
  double latency_mean_error = 0, latency_max_error = 0;  // relative
};

// `samples` valid random mappings (capacity checked by the exact model), each evaluated by both
// models; the relaxed layer uses the mapping's own loop orders. Deterministic for a seed.
RelaxedAgreement compare_relaxed_exact(const Einsum& e, const Core& c, int samples, uint64_t seed,
                                       ReuseModel reuse = ReuseModel::LoopOrder);

}  // namespace mapfuse
