#pragma once
// Equivalent ranks: ranks of an Einsum that index exactly the same tensors, each as a dimension
// of its own (coefficient 1), and that no fan-out names. GPT-3's projection K[b,m,h,e] =
// I[b,m,d] * WK[h,e,d] has two pairs (b,m) and (h,e): it is a matmul of three ranks.
//
// Why one merged rank searches the same fronts (docs/mapper.md, "Equivalent ranks"):
//   - every count the model makes depends on such ranks only through the product of their
//     factors at each loop position (tile volumes multiply, and a tensor indexes either all of
//     them or none, so they lie in the same tensors' runs), and the divisors of a product are
//     exactly the products of the ranks' divisors (prime by prime), so every factor a slot can
//     take is reachable either way;
//   - two loops of equivalent ranks at one level with other loops between them are never better
//     than the outer one moved down next to the inner one: for a tensor both index the run down
//     to its innermost own loop keeps both; for a tensor neither indexes the moved loop can only
//     leave its run. So some optimal mapping has them adjacent, which is one loop of the merge.
// The merged search thus finds the same criteria; split_ranks turns its mappings back into
// mappings of the original ranks with the same cost.
#include <vector>

#include "engine/arch/architecture.hpp"
#include "engine/mapping/mapping.hpp"
#include "engine/workload/einsum.hpp"

namespace mapfuse {

struct RankMerge {
  std::vector<std::vector<int>> groups;  // per merged rank, its original ranks in rank order
  bool identity() const { return groups.empty(); }  // nothing merged
};

// Groups of equivalent ranks of `e` on core `c` (and its vector core), in rank order, each
// group's product of sizes at most `max_size` (a rank that would pass it starts another group
// of the same ranks: any subset of equivalent ranks may be merged). Identity when nothing is
// merged, or when a tensor has a dimension that is not a single rank with coefficient 1.
RankMerge equivalent_ranks(const Einsum& e, const Core& c, int64_t max_size);

// `e` with each group as one rank (size: the product; name: the names joined by '*') and each
// tensor's dimensions one per group it indexes. Identity merge: `e` itself.
Einsum merge_ranks(const Einsum& e, const RankMerge& m);

// A mapping of merge_ranks(original, m) as a mapping of `original`: each loop over a merged rank
// becomes adjacent loops (same level, position and kind) over its ranks, every rank taking the
// greatest factor that still divides what is left of it (always completes: prime by prime, the
// ranks together have exactly what the loops take).
Mapping split_ranks(const Mapping& merged, const RankMerge& m, const Einsum& original);

}  // namespace mapfuse
