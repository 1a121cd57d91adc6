#pragma once
// Distributed FFM (docs/ffm.md, "Distribution and studies"): pmapping generation is cut into
// slices of the (Einsum, context) list, computed anywhere, and joined where all slices meet.
// Contexts are recomputed identically everywhere (make_contexts is deterministic), so a slice
// ships only what it generated: per context index, the Pareto-pruned pmappings, as text with
// exact (hexadecimal) doubles. Each context lives in exactly one slice and its front does not
// depend on which other contexts were generated with it, so merging is concatenation and the
// joined result equals ffm_search's on any number of ranks.
#include <string>
#include <vector>

#include "engine/search/ffm/ffm.hpp"

namespace mapfuse::ffm {

// Every Einsum's contexts after the fixed fusion decisions and the drop of unmatchable ones:
// what ffm_search generates pmappings for.
std::vector<std::vector<PmappingContext>> matchable_contexts(const Workload& w, const Core& c, const FfmOptions& o);

// Generates slice `slice` of `slices` of Einsum `einsum`'s contexts (context indices k with
// k % slices == slice) and serialises the pmappings.
std::string generate_pmapping_slice(const Workload& w, const Core& c, const FfmOptions& o,
                                    const std::vector<std::vector<PmappingContext>>& contexts, int einsum, int slice,
                                    int slices);

// Rebuilds every Einsum's EinsumPmappings from all slices (any order); throws std::runtime_error
// naming what is missing, duplicated or malformed.
std::vector<EinsumPmappings> merge_pmapping_slices(const Workload& w, const Core& c,
                                                   std::vector<std::vector<PmappingContext>> contexts,
                                                   const std::vector<std::string>& slices);

}  // namespace mapfuse::ffm
