#pragma once
// FFM, step 1: per-Einsum pmapping generation (docs/ffm.md). A pmapping is one Einsum's mapping
// in a fused context: which of its intermediate tensors are backed on chip (and at which level
// b), the shared loops above b (a factor per rank), and the Einsum's own mapping of one tile
// below them. Pmappings are generated per context (= per compatibility key), evaluated exactly
// with the fused model (engine/cost/fused.hpp), and Pareto-pruned inside each context on the
// objectives (energy, latency) and the reservations (words per level of the Einsum's branch).
#include <array>
#include <cstdint>
#include <functional>
#include <vector>

#include "engine/arch/architecture.hpp"
#include "engine/cost/fused.hpp"
#include "engine/mapping/mapping.hpp"
#include "engine/search/mapspace_toml.hpp"
#include "engine/workload/workload.hpp"

namespace mapfuse::ffm {

// The compatibility of one shared (intermediate) tensor: FFM's c_T = (tile shape, backing level,
// order of the loops above the backing). Loops above the backing are shared loops; their order
// does not change any cost in this model, so they are kept in a canonical order (tensor
// dimension order) and c_T reduces to the backing level and a factor per dimension: of the
// group's loops, and, for a tensor exchanged inside a nested run (nested fusion), of that run's
// loops, which are then above its storage too.
struct TensorCompat {
  int tensor = -1;     // workload tensor index
  int level = -1;      // backing level; the outermost level = unfused (through DRAM)
  std::array<int64_t, kMaxTensorDims> factor{};  // group loop factor over each dimension (1 = none)
  std::array<int64_t, kMaxTensorDims> inner{};   // nested run's loop factor over each dimension when
                                                 // the tensor is stored below them (all 0: it is not)
  int64_t tile = 0;    // words of the stored tile at the backing level (0 when unfused)
  bool fused() const { return tile > 0; }
  bool nested() const {
    for (int64_t f : inner)
      if (f > 1) return true;
    return false;
  }
  bool operator==(const TensorCompat&) const = default;
};

// FNV-1a over every field of a TensorCompat, for hash maps and sets of compatibilities.
uint64_t hash_value(const TensorCompat& tc, uint64_t h = 1469598103934665603ull);
struct TensorCompatHash {
  size_t operator()(const TensorCompat& tc) const { return static_cast<size_t>(hash_value(tc)); }
};

// One compatibility group of an Einsum's pmappings.
struct PmappingContext {
  FusedContext fused;                          // backing level, on-chip tensors, iterations
  std::array<int64_t, kMaxRanks> shared{};     // shared factor per rank of the Einsum (1 = none), all loops
  // Nested fusion: the factor of the Einsum's loop per rank that only a run of the group's
  // Einsums shares (1 = none; a part of `shared`). An Einsum with such loops is in a nested run:
  // it starts one, or continues the open one when it consumes a tensor stored below its loops.
  std::array<int64_t, kMaxRanks> inner{};
  std::vector<TensorCompat> compat;            // every intermediate tensor the Einsum touches, by tensor index
  int top_level = 0;                           // outermost level the tile mapping may loop at
  const TensorCompat* find(int tensor) const;
};

struct Pmapping {
  double energy_pj = 0;  // whole Einsum (tile x iterations)
  double cycles = 0;
  std::array<int64_t, kMaxLevels> own{};  // reservations of the Einsum's branch, words per instance
  Mapping mapping;                        // the tile mapping (DRAM keeps every tensor formally)
};

struct PmappingOptions {
  bool explore_orders = true;  // every temporal loop order per level; false: rank order only
  bool reduce_orders = true;   // one order per class of orders with equal reuse (exact; false: testing)
  bool prune = true;           // capacity pruning while enumerating and Pareto pruning per context
  bool prune_partial = true;   // with prune: exact pruning of partial tile choices level by level
                               // (TileSearchSpec::prune_partial; false: testing)
  size_t last_level_min_orders = 8;  // TileSearchSpec::last_level_min_orders (1: compare all; testing)
  bool merge_passthrough = true;  // with prune: a level keeping nothing leaves its loops to the one above
                                  // (TileSearchSpec::merge_passthrough; false: testing)
  // With prune: branch and bound against the context's front where partial pruning does not
  // apply (convolutions' window tensors): a choice is not extended once a pmapping of the front
  // strictly dominates the lower bounds of all its completions (TileSearchSpec::bound_scalar;
  // exact; false: testing). Unfused and fused contexts alike.
  bool bound_front = true;
  bool allow_fusion = true;    // false: only the unfused context
  // Nested fusion (docs/ffm.md): at most this many loops per Einsum that a run of consecutive
  // Einsums inside a fusion group shares below the group's loops (0 = none: every loop of a
  // group covers all of it). Two levels: the group's loops and one nested run's.
  int nested_loops = 0;
  // Storage above the split (engine/cost/fused.hpp): fused contexts also in variants that keep
  // tensors no shared loop steps (weights) resident at the backing level for the whole group.
  bool resident = true;
  int64_t max_evaluations = 0; // InputError beyond this many evaluations per Einsum; 0 = no limit
  // Mapspace constraints (Timeloop-style, engine/search/mapspace_toml.hpp) on every context's
  // tile mappings: loop orders, factor bounds, kept tensors, spatial ranks. A keep constraint
  // that leaves out a tensor a context backs on that level excludes the context's mappings.
  std::vector<ConstraintSpec> constraints;
};

struct EinsumPmappings {
  int einsum = -1;
  std::vector<PmappingContext> contexts;
  std::vector<std::vector<Pmapping>> pmappings;  // per context
  int64_t evaluated = 0;        // tile mappings evaluated
  int64_t capacity_pruned = 0;  // partial tile mappings cut at a full level
  int64_t kept = 0;             // after Pareto pruning
  int64_t lane_calls = 0;       // SIMD evaluator calls (evaluated / lane_calls = lanes filled)
  int64_t partial_evaluated = 0;  // partial tile choices compared (TileSearchSpec::prune_partial)
  int64_t partial_dropped = 0;    // ... and dropped as dominated
  int64_t bound_skipped = 0;      // partial choices not completed: the context's front beat their bounds
  int64_t fanout_skipped = 0;     // choices of the level below the top not completed: their fan-out's bounds were beaten
  int reused_from = -1;         // >= 0: every context copied from this Einsum's (ffm_search; nothing evaluated here)
  int64_t contexts_reused = 0;  // contexts whose pmappings were copied from an earlier, equal Einsum (ffm_search)
  double cpu_seconds = 0;       // process CPU time of the generation (ffm_search; all threads)
};

// Every context of an Einsum: unfused, and for each non-empty set of its intermediate tensors,
// each on-chip level that may hold them and each choice of shared factors (divisors) over the
// ranks that may carry a shared loop; with o.resident, each fused one with shared loops also
// with every non-empty set of its resident candidates (tensors it alone reads from the
// outermost level, stepped by none of its shared loops, that the backing level may hold). With o.prune, contexts whose stored tiles alone overflow
// their backing level are left out (they have no valid pmapping).
std::vector<PmappingContext> make_contexts(const Workload& w, int einsum, const Core& c,
                                           const PmappingOptions& o);

// Every tile mapping of a context (loops only at levels <= top_level; on-chip tensors kept at b
// and bypassing the levels above it), as Mapping objects passed to `emit`. With o.prune, partial
// mappings whose kept tiles already exceed a level's capacity are cut. Returns the number cut.
int64_t enumerate_tile_mappings(const Einsum& tile, const Core& c, const PmappingContext& ctx,
                                const PmappingOptions& o, const std::function<void(const Mapping&)>& emit);

// Generation with evaluation and (o.prune) Pareto pruning per context: every context of
// make_contexts, or the given ones. Tile mappings are enumerated and evaluated as by the
// exhaustive mapper (engine/search/tile_search/tile_search.hpp: divisor tables, capacity pruning innermost
// level first, loop-order classes, SIMD lanes per support), OpenMP over (context, innermost level
// choice). Each context's pmappings come sorted by criteria; among pmappings with equal criteria
// the one first in TileCandidate::key order is kept, so the result is the same for any number of
// threads.
EinsumPmappings generate_pmappings(const Workload& w, int einsum, const Core& c, const PmappingOptions& o);
EinsumPmappings generate_pmappings(const Workload& w, int einsum, const Core& c, const PmappingOptions& o,
                                   std::vector<PmappingContext> contexts);

// Classes of contexts that tile the Einsum the same way (backing level, on-chip tensors, top
// level, tile size per rank after merging equivalent ranks as generation does: they differ only
// in which loops are nested, which tensors are stored below them, or how equivalent ranks split
// a product), numbered in order of first appearance: per context, its class.
// generate_pmappings evaluates one context per class.
std::vector<size_t> tile_classes(const Einsum& e, const Core& c, const PmappingOptions& o,
                                 const std::vector<PmappingContext>& contexts);

// The straightforward generator the fast one replaced (one Mapping, analysis and scalar evaluation
// per tile mapping, every loop order when o.explore_orders, no threads), kept as the reference the tests compare with.
// Same contexts, same pmappings' criteria; among pmappings with equal criteria it keeps the first
// it meets.
EinsumPmappings generate_pmappings_reference(const Workload& w, int einsum, const Core& c, const PmappingOptions& o,
                                             std::vector<PmappingContext> contexts);

// Drops, in place, every context with a shared tensor whose compatibility no context of the
// tensor's producer or of one of its consumers offers (repeated until nothing changes): such
// pmappings could never be joined, so they need not be generated. Exact.
void drop_unmatched_contexts(const Workload& w, std::vector<std::vector<PmappingContext>>& contexts);

// Levels whose capacity is bounded (checked when joining, reported as peak usage).
std::vector<int> tracked_levels(const Core& c);

// The levels whose reservation can decide a join, the Pareto criteria after energy and latency:
// a fused context's backing level, if bounded; none for an unfused one. The join checks a
// branch's own words plus the exchanged tiles live during it, and exchanged tiles live only at
// the group's backing level (and never during an unfused Einsum); every other level's own words
// were checked against its capacity when the pmapping was generated.
std::vector<int> reservation_levels(const Core& c, const PmappingContext& ctx);

}  // namespace mapfuse::ffm
