#pragma once
// A workload: a DAG of Einsums joined by shared tensors (a tensor written by one Einsum and read by
// others). Residual and concat branches are ordinary multi-consumer / multi-input tensors.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/workload/einsum.hpp"

namespace mapfuse {

struct TensorInfo {
  std::string name;
  int producer = -1;           // Einsum index; -1 = workload input (or weight)
  std::vector<int> consumers;  // Einsum indices that read it
  int64_t volume = 0;          // values, as the producer writes it (else the largest read view)
  int dims = 0;
  int bits_per_value = 8;
};

struct Workload {
  std::string name;
  std::vector<Einsum> einsums;  // in a topological order once validated
  // Layer multiplicities (e.g. DOSA layer counts); empty = 1 each. Costs of a network weight each
  // Einsum by its count.
  std::vector<int64_t> counts;

  // Derived by finalize(): one entry per distinct tensor name.
  std::vector<TensorInfo> tensors;

  int einsum_index(std::string_view n) const;
  int tensor_index(std::string_view n) const;
  int64_t count(int einsum) const { return counts.empty() ? 1 : counts[einsum]; }
  int64_t operations() const;  // weighted by counts
};

// Validates every Einsum, builds the tensor table, checks that shared tensors agree in volume and
// that the graph is acyclic, and sorts Einsums topologically (stable). Throws InputError naming
// the Einsum or tensor at fault; a cycle is reported with the Einsums on it.
void finalize(Workload& w);

// Human-readable listing (for `mapfuse workload`).
std::string describe(const Workload& w);

}  // namespace mapfuse
