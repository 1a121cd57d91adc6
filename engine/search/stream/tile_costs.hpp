#pragma once
// Per-tile costs from mapfuse's own optimal mapper (Stream's cost LUT, made with the exact model
// instead of ZigZag's): each unique computation-tile shape mapped once per core under that core's
// dataflow. The value type is engine/cost/tile_cost.hpp; docs/stream.md, "Per-tile cost".
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "engine/arch/architecture.hpp"
#include "engine/cost/tile_cost.hpp"
#include "engine/mapping/mapping.hpp"
#include "engine/search/random_search.hpp"
#include "engine/search/stream/tile_cost_cache.hpp"
#include "engine/workload/tiles.hpp"

namespace mapfuse {

struct TileCostOptions {
  // Stream's criterion (ZigZag's opt="latency" and its reduce stage): the fewest cycles, then, among
  // mappings that tie on cycles, the least energy (ExhaustiveOptions::energy_tiebreak: one branch
  // and bound search). Without energy_tiebreak, `objective` alone.
  Objective objective = Objective::Cycles;
  bool energy_tiebreak = true;
  // A CT with off-chip operands searched over its whole energy/cycles front instead of by branch
  // and bound (the same choice, much slower; for testing).
  bool offchip_front = false;
  int64_t max_mappings = 0;  // per mapper call; 0 = no limit (exhaustive_search's max_mappings)
  // Each per-tile search within this relative gap of its optimum (ExhaustiveOptions::gap: the
  // least cycles exactly, the energy within the gap); 0 = exact. Part of the cache key.
  double mapper_gap = 0;
  // Each per-tile search stops after this much work (ExhaustiveOptions::max_work) with the best
  // mapping found: an anytime search for CTs whose proof of optimality takes minutes (whole layers
  // of 540 x 960 pixels on a weight-stationary core). 0 = no limit. Part of the cache key.
  int64_t mapper_work = 0;
  // Called after every mapper call (from the OpenMP threads, one call at a time) with a line that
  // names the CT and core, its rank sizes, what the search evaluated and cut per level, and its
  // time (`mapfuse schedule --trace-mapper`). Empty: nothing is reported.
  std::function<void(const std::string&)> trace;
};

struct TileCostStats {
  int64_t tiles = 0;
  int64_t unique_keys = 0;   // distinct (CT shape, core) pairs
  // Distinct mapping problems among them: keys that differ only in their boxes (a conv's clipped
  // edge rows) and send the same operands off-chip are mapped once.
  int64_t mapper_problems = 0;
  int64_t mapper_calls = 0;  // exhaustive searches (a key whose operands do not fit may need several)
  int64_t mappings_evaluated = 0;
  int64_t truncated = 0;     // mapper calls that TileCostOptions::mapper_work stopped early
  // With a cache: the mapping problems found there (no search) and those mapped and inserted
  // (hits + misses = mapper_problems; mapper_calls and mappings_evaluated count the misses only).
  int64_t cache_hits = 0, cache_misses = 0;
  double seconds = 0;        // wall time of map_tile_costs
};

// costs[t]: tile t of `tiles` on core core_of_tile[t] of `a` (docs/stream.md, "Per-tile cost").
// Each unique (Einsum structure, CT rank sizes, tensor box sizes, core) is costed once (and mapped
// once per distinct mapping problem: see TileCostStats::mapper_problems) with
// exhaustive_search on the CT-sized Einsum under the core's dataflow (its fan-outs' ranks), with
// every operand that fits held whole in its home memory (the outermost on-chip level that may keep
// its role) and the off-chip memory as the top level of the others. OpenMP over unique keys; the
// result does not depend on the thread count. Throws InputError for a core index out of range, a
// core that cannot run the layer's operator, or a CT that no mapping fits even with off-chip
// memory (naming the layer, the CT and the core).
// With a cache, each mapping problem is looked up first (tile_cost_cache_key) and only the misses
// are searched, then inserted: the result is bit-identical with and without it, and does not
// depend on what other calls put there before (docs/stream.md, "Tile-cost cache").
//
// held_bits (empty, or one per entry of tiles.accesses): what the scheduler must hold on the core
// for each operand, where that is more than the CT's own box (held_input_bits: the whole outputs
// of the producer CTs an input overlaps). Stream's rule then sends an operand off-chip when those
// objects do not fit, not only when its box does not: a pool CT whose input comes from a producer
// layer run whole and split by K over four cores holds all four outputs.
std::vector<TileCost> map_tile_costs(const Workload& w, const TileSet& tiles, const Architecture& a,
                                     std::span<const int> core_of_tile, const TileCostOptions& opt,
                                     TileCostStats* stats = nullptr, TileCostCache* cache = nullptr,
                                     std::span<const int64_t> held_bits = {});

// The cache key of one mapping problem: everything the mapper's answer depends on. The core by
// core_fingerprint (not its name); the CT-sized Einsum's operator, ranks (names, as mapping texts
// use them, and sizes) and tensors (names, roles, widths, projections; not the Einsum's name nor
// the tensors' offsets, which the cost model does not read); the operands sent off-chip; and the
// options. Two problems with the same key get the same TileCost from the mapper (memory_bits
// aside, which come from each CT's boxes).
std::string tile_cost_cache_key(const Einsum& ct, const std::string& core_fp, TensorMask offchip,
                                const TileCostOptions& opt);

// The Einsum a CT computes: the layer's Einsum with every rank's size that of the CT's range
// (padding of a Pad remainder included, as Stream pads).
Einsum ct_einsum(const Workload& w, const TileSet& tiles, int tile);

}  // namespace mapfuse
