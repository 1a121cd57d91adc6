#pragma once
// The mapspace of one Einsum on one core, and what a user may pin (Timeloop-style constraints):
// per level, a fixed loop order, factor bounds per rank, which tensors are kept, and which ranks
// may be spread on each spatial axis (within what the architecture allows).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/arch/architecture.hpp"
#include "engine/mapping/mapping.hpp"
#include "engine/workload/einsum.hpp"

namespace mapfuse {

struct LevelConstraints {
  // Temporal loop order, outermost first, as rank indices; ranks not listed get factor 1 here.
  std::optional<std::vector<int>> order;
  // Temporal factor bounds per rank (index); absent = [1, rank size].
  std::vector<std::optional<int64_t>> min_factor, max_factor;
  // Tensors kept here (bit t); absent = every choice the level's roles allow.
  std::optional<TensorMask> keep;
  // Ranks that may be spread on X / Y below this level (bit r); absent = what the core allows.
  std::optional<uint32_t> spatial_x, spatial_y;
  bool operator==(const LevelConstraints&) const = default;
};

struct Mapspace {
  std::vector<LevelConstraints> levels;  // index 0 = innermost, as Core::levels; may be empty
  bool operator==(const Mapspace&) const = default;
};

// Does the mapping respect every constraint of the mapspace (orders, factor bounds, kept tensors,
// spatial ranks)? Structure and capacity are checked elsewhere (check_structure, the cost model).
bool satisfies(const Mapping& m, const Mapspace& space);

// Divisors of n in increasing order.
std::vector<int64_t> divisors(int64_t n);

}  // namespace mapfuse
