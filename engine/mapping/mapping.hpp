#pragma once
// An intra-Einsum mapping: for every memory level, its temporal loops in order, its spatial
// loops (the fan-out into the next inner level) and which tensors it keeps (the rest bypass it).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/arch/architecture.hpp"
#include "engine/workload/einsum.hpp"

namespace mapfuse {

enum class LoopKind : uint8_t { Temporal, SpatialX, SpatialY };

struct Loop {
  int rank = 0;
  int64_t factor = 1;
  LoopKind kind = LoopKind::Temporal;
  bool operator==(const Loop&) const = default;
};

using TensorMask = uint8_t;  // bit t = Einsum::tensors[t]

struct LevelMapping {
  std::vector<Loop> loops;  // outer -> inner; temporal loops first, then spatial loops
  TensorMask keep = 0;
  bool operator==(const LevelMapping&) const = default;
};

struct Mapping {
  std::vector<LevelMapping> levels;  // index 0 = innermost, as Core::levels
  bool operator==(const Mapping&) const = default;
};

// Text form, outermost level first, levels separated by " | ":
//   DRAM[Weights,Inputs,Outputs] P=28 R=7 Q=56 K=8 | Scratchpad[Weights,Inputs] K=4@x | ...
// `rank=factor` is a temporal loop, `rank=factor@x` / `@y` a spatial loop along that axis.
// Levels may be omitted (no loops, keeps nothing). Round-trips through parse_mapping.
std::string to_text(const Mapping& m, const Einsum& e, const Core& c);
Mapping parse_mapping(std::string_view text, const Einsum& e, const Core& c);

// DOSA's mapping strings: `L3[WIO] P28 R7 Q56 K8 - L2[WI] N1 K4X - L1[O] K2 S7 Q2 P2 C3X - L0[W] P2`.
// Ln is level n counted from the innermost; W, I, O name tensors by role; X marks a spatial
// loop, placed on the axis of the level's fan-out that accepts the rank.
Mapping parse_dosa_mapping(std::string_view text, const Einsum& e, const Core& c);

// May `rank` be spread along `axis` (SpatialX / SpatialY) below a level with fan-out `f`? The
// axis must exist, name the rank if it names any, and not index tensors whose role it reuses.
bool axis_accepts(const Fanout& f, LoopKind axis, const Einsum& e, int rank);

// The most instances of `axis` a mapping of `e` can use: the largest product of divisors of the
// accepted ranks' sizes within the fan-out (each rank on its own, as if the axis were alone).
int64_t max_axis_use(const Fanout& f, LoopKind axis, const Einsum& e);

// The instances of `axis` a mapping of `e` must use (Fanout::x_min_usage / y_min_usage): 1 when
// there is no minimum or `e` is a copy.
int64_t min_axis_use(const Fanout& f, LoopKind axis, const Einsum& e);

// Structural validity (everything except capacity, which needs tile sizes: see cost/model.hpp).
struct MappingError {
  enum class Kind {
    LevelCount,        // mapping and architecture disagree on the number of levels
    FactorProduct,     // the factors of a rank do not multiply to its size
    FanoutExceeded,    // spatial factors along an axis exceed the level's fan-out
    RankNotOnAxis,     // a rank is spread on an axis that does not accept it
    KeepNotAllowed,    // a tensor is kept where the level may not hold its role
    BackingMissing,    // the outermost level does not keep every tensor
    CapacityExceeded,  // reported by the cost model
    KeepMissing,       // a level does not keep a tensor whose role it must keep
    FanoutUnderused,   // fewer instances of an axis used than its min_usage asks
  } kind;
  int level = -1;
  int rank = -1;
  int tensor = -1;
  std::string message;
};
std::optional<MappingError> check_structure(const Mapping& m, const Einsum& e, const Core& c);

// All loops at the outermost level in rank order and every tensor kept there only (all inner
// levels bypassed): structurally valid and within capacity on any core; a starting point.
Mapping trivial_mapping(const Einsum& e, const Core& c);

}  // namespace mapfuse
