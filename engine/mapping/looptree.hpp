#pragma once
// A fused mapping of a whole workload (FFM's LoopTree). Einsums are partitioned into fusion groups
// that run one after another. Inside a group, the shared loops (outermost first) iterate the
// group's Einsums together, tile by tile: a loop covers a run of consecutive Einsums of the group
// (all of them, or a nested run: nested fusion, e.g. a head loop around QK, softmax and AV inside
// a token loop around the whole group); every tensor the group's Einsums exchange has a
// backing level (an on-chip level: fused, it never goes to DRAM; the outermost level: unfused),
// and below the shared loops each Einsum has its own intra-Einsum Mapping for the remaining
// factors. FADiff's layer-wise view (tiling factors + fusion flags per producer -> consumer edge)
// and FFM's pmappings are both projections of this type.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/arch/architecture.hpp"
#include "engine/mapping/mapping.hpp"
#include "engine/workload/workload.hpp"

namespace mapfuse {

struct SharedLoop {
  // The rank each Einsum of the group iterates with this loop (index into that Einsum's ranks,
  // in the order of FusionGroup::einsums); -1 when the loop does not cover that Einsum. The
  // covered Einsums are consecutive, and two loops cover disjoint runs or one covers the
  // other's (a tree); a loop comes after every loop whose run strictly contains its own.
  std::vector<int> rank;
  int64_t factor = 1;
  int level = 0;  // the level whose tile the loop steps: shared tensors are backed at or above it
};

struct TensorBacking {
  std::string tensor;
  int level = 0;  // core level that holds it for the whole group; the outermost level = unfused
};

struct FusionGroup {
  std::vector<int> einsums;              // Workload::einsums indices, in execution order
  std::vector<SharedLoop> shared_loops;  // outermost first
  std::vector<TensorBacking> backing;    // every tensor produced and consumed inside the group
  // Storage above the split: tensors that one Einsum of the group reads from the outermost level
  // (not produced in the group, read by no other Einsum of the workload) kept whole at `level`
  // above the shared loops, held for the whole group and filled once (engine/cost/fused.hpp).
  std::vector<TensorBacking> resident;
  std::vector<Mapping> mappings;         // one per Einsum: the loops below the shared ones
};

struct LoopTree {
  std::vector<FusionGroup> groups;  // in execution order
};

// Every Einsum unfused: one group per Einsum with the given intra-Einsum mappings.
LoopTree unfused_looptree(const Workload& w, const std::vector<Mapping>& mappings);

// Structural validity with a precise reason: every Einsum in exactly one group and groups in a
// topological order; the group's Einsums connected by their exchanged tensors; every shared loop
// covering a non-empty run of consecutive Einsums, the runs forming a tree; every exchanged
// tensor backed once, at a level that may hold its roles, no lower than the shared loops that
// step it; per Einsum, shared and own factors multiplying to each rank size; each Einsum's own
// mapping structurally valid (check_structure); every resident tensor read by exactly one Einsum
// of the workload, in the group, not produced there, held once at a level that may hold it.
// Capacity is the cost model's concern.
std::optional<std::string> check_looptree(const LoopTree& t, const Workload& w, const Core& c);

// For people (reports, the CLI), one line per group and one per Einsum:
//   group 1: MM0 -> MM1 | shared M=4 (MM0 M, MM1 M) above GLB | on chip: T1@GLB | resident: W0@GLB
//     MM0: DRAM[...] ... | GLB[...] ...
std::string to_text(const LoopTree& t, const Workload& w, const Core& c);

}  // namespace mapfuse
