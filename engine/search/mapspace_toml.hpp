#pragma once
// Mapspace constraints in TOML (Timeloop-style), per architecture or per layer:
//
//   [[constraint]]
//   level = "Accumulator"              # required
//   layer = "conv1"                    # optional: only this Einsum (else every Einsum)
//   temporal_order = ["P", "Q", "C"]   # outermost first; ranks not listed stay at factor 1 here
//   min_factors = { C = 2 }            # temporal factor bounds per rank
//   max_factors = { R = 1, S = 1 }
//   keep = ["output"]                  # roles kept here (others bypass)
//   spatial_x = ["K"]                  # ranks that may be spread along X below this level
//   spatial_y = ["C"]
//
// Constraints for every Einsum may name ranks an Einsum does not have (a conv's R in a matmul);
// those names are skipped. A constraint for one layer must name its ranks exactly.
#include <string>
#include <string_view>
#include <vector>

#include "engine/arch/architecture.hpp"
#include "engine/common/error.hpp"
#include "engine/search/mapspace.hpp"
#include "engine/workload/einsum.hpp"

namespace mapfuse {

struct ConstraintSpec {  // as written, before it meets an Einsum
  std::string level, layer;
  SourceLocation where;
  bool has_order = false;
  std::vector<std::string> order;
  std::vector<std::pair<std::string, int64_t>> min_factors, max_factors;
  bool has_keep = false;
  std::vector<TensorRole> keep;
  bool has_x = false, has_y = false;
  std::vector<std::string> spatial_x, spatial_y;
};

// Parses the `[[constraint]]` tables of a TOML text (other keys are left to other readers).
std::vector<ConstraintSpec> parse_constraints(std::string_view toml_text, const std::string& file);
std::vector<ConstraintSpec> load_constraints(const std::string& path);

// The mapspace for one Einsum on one core. Throws InputError naming the constraint (file:line)
// for an unknown level or (layer constraints) rank, and when the constraints leave some rank no
// way to reach its size (naming the rank and the constraints that limit it).
Mapspace make_mapspace(const std::vector<ConstraintSpec>& specs, const Einsum& e, const Core& c);

}  // namespace mapfuse
