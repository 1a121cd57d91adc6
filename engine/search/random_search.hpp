#pragma once
// Random-sampling mapper (Timeloop's `random` search): draws `budget` mappings from the mapspace
// sampler (within opt.space's constraints; samples that break a factor bound count as invalid)
// and keeps the best valid one for the objective. Sample i uses its own generator seeded
// from (seed, i), so the result is the same for any number of threads.
#include <cstdint>
#include <optional>

#include "engine/arch/architecture.hpp"
#include "engine/cost/model.hpp"
#include "engine/mapping/mapping.hpp"
#include "engine/search/random_mapping.hpp"
#include "engine/workload/einsum.hpp"

namespace mapfuse {

enum class Objective : uint8_t { Energy, Cycles, Edp };
Objective objective_from_string(std::string_view s);  // throws InputError
std::string_view to_string(Objective o);
double objective_value(Objective o, const CostResult& r);
double objective_value(Objective o, const CompactCost& r);
// The objective of a mapping costing `energy_pj` and `cycles` (monotone in both).
double objective_value(Objective o, double energy_pj, double cycles);

struct SearchResult {
  std::optional<Mapping> best;  // empty when no sampled mapping was valid
  CostResult cost;
  int64_t evaluated = 0;
  int64_t valid = 0;
};

SearchResult random_search(const Einsum& e, const Core& c, int64_t budget, uint64_t seed,
                           Objective objective, const RandomMappingOptions& opt = {});

}  // namespace mapfuse
