#pragma once
// The Fast and Fusiest Mapper (FFM; Andrulis, Gilbert, Sze, Emer): optimal fused mappings of a
// workload on one core (docs/ffm.md). Step 1 generates each Einsum's pmappings
// (pmappings.hpp); step 2 joins them Einsum by Einsum in workload (topological) order: partial
// mappings are grouped by the compatibility of the tensors still open (produced, with a consumer
// not joined yet), joined only with pmappings whose compatibility matches, their reservations
// consolidated after every join (sum within the new branch, checked against capacity; the
// finished branches' usage max-ed into one value per level, FFM section 5.2), Pareto-pruned
// inside each group, and dropped when no later Einsum can match an open tensor. The result is the exact
// energy-latency Pareto front of the fused mapspace; the optimum of any objective monotone in
// energy and latency (energy, latency, EDP) is on it.
#include <array>
#include <cstdint>
#include <vector>

#include "engine/mapping/looptree.hpp"
#include "engine/search/ffm/pmappings.hpp"
#include "engine/search/random_search.hpp"

namespace mapfuse::ffm {

struct FfmOptions {
  PmappingOptions pmappings;
  // Fixed fusion decisions (workload tensor indices of intermediate tensors), e.g. TransFusion's
  // "everything fused except K and V": a tensor in must_fuse is exchanged on chip, one in
  // must_not_fuse through DRAM. FFM then returns the optimum of that restricted mapspace.
  std::vector<int> must_fuse, must_not_fuse;
  // Stop with an InputError instead of being killed when the kept pmappings and partial
  // mappings would exceed this many MiB (0 = no limit). An estimate: the records FFM keeps, not
  // the allocator's overhead or the generator's per-thread buffers.
  int64_t max_memory_mib = 0;
  // Epsilon pruning with FFM's two passes (section 6.3): > 0 runs a dirty join that prunes on
  // criteria rounded to a log grid of ratio (1 + epsilon), then the exact join, which drops every
  // partial mapping strictly worse in energy and latency than one of the dirty pass's complete
  // mappings. The result is the exact front either way; 0 = one exact join.
  double epsilon = 0;
  // Join in every order of the Einsums that respects their data dependences (the paper's
  // footnote 4; einsum_orders) and keep the front of all of them; false: the workload's order
  // only. The order decides which Einsums can form a fusion group (a run of consecutive
  // Einsums), e.g. GPT-3's V next to AV; pmappings do not depend on it and are generated once.
  bool all_orders = false;
};

// Every order of w's Einsums in which each Einsum comes after the producers of the tensors it
// reads, as indices into w.einsums, the workload's own order first, the others in lexicographic
// order. Throws InputError when there are more than max_orders.
std::vector<std::vector<int>> einsum_orders(const Workload& w, size_t max_orders);
inline constexpr size_t kMaxEinsumOrders = 10000;

// Drops every context that contradicts o.must_fuse / o.must_not_fuse. Throws InputError when a
// named tensor is not an intermediate (produced by one Einsum and consumed by another) or is in
// both lists. Applied by ffm_search before drop_unmatched_contexts; callers that build contexts
// themselves (distributed generation) apply it the same way.
void apply_fusion_constraints(const Workload& w, const FfmOptions& o,
                              std::vector<std::vector<PmappingContext>>& contexts);

struct Choice {
  int context = -1;   // index into EinsumPmappings::contexts
  int pmapping = -1;  // index into EinsumPmappings::pmappings[context]
};

struct FfmSolution {
  double energy_pj = 0;        // sum of the joined pmappings' energies, in workload order
  double cycles = 0;           // sum of their latencies
  std::array<int64_t, kMaxLevels> peak{};  // usage per level and instance, max over all branches
  std::vector<Choice> choices;  // per Einsum
  std::vector<int> order;       // the Einsums in execution order (FfmOptions::all_orders); empty: the workload's
  LoopTree tree;
  double edp() const { return energy_pj * cycles; }
};

struct JoinStep {
  int einsum = -1;
  int64_t partials_in = 0;   // partial mappings before the join
  int64_t pmappings = 0;     // pmappings of the Einsum
  int64_t combinations = 0;  // compatible pairs tried
  int64_t joined = 0;        // within capacity
  int64_t kept = 0;          // after Pareto pruning and lookahead
  int64_t groups = 0;        // compatibility groups kept
  int64_t bound_pruned = 0;  // dropped as strictly beaten by a dirty-pass mapping (epsilon > 0)
};

struct FfmResult {
  std::vector<FfmSolution> pareto;          // energy-latency front, by increasing energy
  std::vector<EinsumPmappings> pmappings;   // per Einsum
  std::vector<JoinStep> steps;
  int64_t contexts = 0;          // compatibility contexts of all Einsums (ffm_search)
  int64_t contexts_matched = 0;  // left after dropping those no partner can match
  // Where the time went (ffm_search): pmapping generation and the join, wall seconds and CPU
  // seconds of the process (all threads).
  double generation_seconds = 0, generation_cpu_seconds = 0, join_seconds = 0, join_cpu_seconds = 0;
  int64_t peak_records_bytes = 0;  // the memory estimate max_memory_mib is checked against
  int64_t dirty_kept = 0;          // partial mappings kept over the dirty pass's steps (epsilon > 0)
  int64_t orders = 1;              // Einsum orders joined (FfmOptions::all_orders); `steps` are the first's
  // The solution minimising the objective (the first on the front among equals); nullptr when
  // no fused mapping fits.
  const FfmSolution* best(Objective o) const;
};

// ffm_search generates each distinct (Einsum, tiling) once: an Einsum equal to an earlier one up
// to tensor names, with the same layer constraints, reuses the pmappings of every context that one
// generated with the same tiling (backing level, on-chip tensors, shared factors, top level;
// EinsumPmappings::contexts_reused, and reused_from when all come from one Einsum): GPT-3's K
// reuses V's contexts it shares, Q all of K's and V's; the repeating shapes of a matmul chain.
// Exact: generation reads nothing else. Mapspace constraints (PmappingOptions::constraints)
// are checked against every Einsum before anything is generated (InputError, naming file:line).
FfmResult ffm_search(const Workload& w, const Core& c, const FfmOptions& o = {});
// InputError (naming file:line) for a constraint on a layer w does not have or one that does
// not fit an Einsum on c (make_mapspace); what ffm_search and the baselines check first.
void check_constraints(const Workload& w, const Core& c, const std::vector<ConstraintSpec>& constraints);
std::string generation_key(const Einsum& e, const std::vector<PmappingContext>& contexts,
                           const std::vector<ConstraintSpec>& constraints = {});

// Step 2 alone, on given pmappings (one EinsumPmappings per Einsum, in workload order).
// max_memory_bytes: FfmOptions::max_memory_mib in bytes (0 = no limit, checked per order);
// epsilon and all_orders as in FfmOptions. With all_orders every solution's energy and latency
// are summed in workload order, so that a mapping found in several orders compares equal; the
// front keeps the first order's among equal points.
FfmResult ffm_join(const Workload& w, const Core& c, std::vector<EinsumPmappings> pmappings,
                   int64_t max_memory_bytes = 0, double epsilon = 0, bool all_orders = false);

// Why a join found no fused mapping: the first Einsum after which no partial mapping was left,
// with the step's counts ("" when the join found one).
std::string empty_join_reason(const Workload& w, const FfmResult& r);

// Bytes FFM keeps for these pmappings (the estimate behind max_memory_mib).
int64_t pmapping_bytes(const std::vector<EinsumPmappings>& pm);

// The LoopTree of one pmapping per Einsum (compatible choices, as the join returns them).
LoopTree build_looptree(const Workload& w, const Core& c, const std::vector<EinsumPmappings>& pm,
                        const std::vector<Choice>& choices);

}  // namespace mapfuse::ffm
