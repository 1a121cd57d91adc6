#pragma once
// Uniform-ish random sampling of structurally valid mappings: each prime factor of each rank goes
// to a random (level, temporal | spatial axis) slot that still has fan-out left, loop orders are
// shuffled per level, and every tensor is kept at a random subset of the levels that may hold it
// (always at the outermost). Capacity is not checked here: the cost model reports it.
#include <cstdint>
#include <random>

#include "engine/arch/architecture.hpp"
#include "engine/common/factors.hpp"
#include "engine/mapping/mapping.hpp"
#include "engine/search/mapspace.hpp"
#include "engine/workload/einsum.hpp"

namespace mapfuse {

struct RandomMappingOptions {
  bool random_bypass = true;    // false: keep every tensor wherever its role is allowed
  double spatial_bias = 0.5;    // probability of trying a spatial slot first for a factor
  // Constraints to sample within: fixed orders, kept tensors and spatial ranks are honoured by
  // construction; factor bounds are not (random_search rejects samples that break them).
  const Mapspace* space = nullptr;
};

Mapping random_mapping(const Einsum& e, const Core& c, std::mt19937_64& rng,
                       const RandomMappingOptions& opt = {});

}  // namespace mapfuse
