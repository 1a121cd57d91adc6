#pragma once
// Energy per access as a small multi-layer perceptron of a buffer's capacity: FADiff's EPA model
// ("for on-chip buffers, we model EPA using a small MLP as a function of buffer capacity",
// shared/papers/fadiff.txt §3.1), the alternative to DOSA's linear fits (CapacityEnergyFit).
// The network maps ln(capacity) to ln(energy), so the energy stays positive and the wide range of
// capacities (0.25 KB to 1 MB) is one smooth curve; it is fitted at load time to (capacity,
// energy) points given in the architecture file, deterministically: the same points and layer
// sizes give the same energies to the bit on every run.
#include <vector>

namespace mapfuse {

struct EnergyMlp {
  // Training data, as given: capacity of one instance in KB (ascending) and pJ per word access.
  std::vector<double> capacity_kb, energy_pj;
  std::vector<int> hidden;  // neurons per hidden layer (tanh)

  // Fitted parameters: per layer, weights (out x in, row-major) then biases; inputs and outputs
  // standardised with the training data's mean and spread of the logs.
  std::vector<double> params;
  double x_mean = 0, x_scale = 1, y_mean = 0, y_scale = 1;
  double max_relative_error = 0;  // over the training points, after fitting

  double at(double capacity_kb) const;  // pJ per word access
};

// Fits the MLP (full-batch Adam on the mean squared error of ln energy, fixed initialisation).
// Expects >= 2 points with positive, strictly ascending capacities and positive energies, and
// 1..4 hidden layers of 1..64 neurons; throws std::invalid_argument naming what is wrong (the
// architecture loader turns it into an InputError at the key's line).
EnergyMlp fit_energy_mlp(std::vector<double> capacity_kb, std::vector<double> energy_pj, std::vector<int> hidden);
// The same fit without the process-wide memo of fit_energy_mlp (which returns a stored fit for
// points it has seen): for tests that the fit itself is deterministic.
EnergyMlp fit_energy_mlp_uncached(std::vector<double> capacity_kb, std::vector<double> energy_pj, std::vector<int> hidden);

}  // namespace mapfuse
