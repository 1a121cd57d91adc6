#pragma once
// Per-tile costs for Stream-style scheduling (Stream's cost LUT): what one computation tile (CT,
// engine/workload/tiles.hpp) costs on one core of a multi-core architecture. COALA (coala.hpp)
// takes them as given; they come either from mapfuse's own optimal mapper (each unique CT shape
// mapped once per core under that core's dataflow, with the exact cost model, and cached) or from
// an external table (tile_cost_csv.hpp), so that schedulers can be compared on identical tile
// costs. docs/stream.md, "Per-tile cost".
#include <cstdint>
#include <span>
#include <vector>

#include "engine/arch/architecture.hpp"
#include "engine/search/random_search.hpp"
#include "engine/workload/tiles.hpp"

namespace mapfuse {

// One tensor the CT reads or writes, in the Einsum's tensor order (TileSet::tile_accesses).
struct OperandCost {
  // The operand does not fit on the core with the CT's other operands: DRAM is added above the
  // core's top memory for it (as Stream does) and it streams from (inputs) or to (the output)
  // DRAM while the CT runs.
  bool offchip = false;
  // When offchip: the DRAM bandwidth it takes for the CT's whole runtime (bits per cycle; Stream's
  // block_bw_<operand> "rd_out_to_low" for inputs, "wr_in_by_low" for the output).
  double dram_bits_per_cycle = 0;
  // Its footprint in the core's top on-chip memory while the CT runs (bits; 0 when offchip).
  int64_t memory_bits = 0;
};

struct TileCost {
  double latency_cc = 0;
  double onchip_energy_pj = 0;   // compute and on-chip memories
  double offchip_energy_pj = 0;  // DRAM accesses of offchip operands, priced inside the tile
  std::vector<OperandCost> operands;
  bool any_offchip() const {
    for (const auto& o : operands)
      if (o.offchip) return true;
    return false;
  }
};

// ---- the mapper-based tile costs -------------------------------------------------------------

struct TileCostOptions {
  // Stream's criterion (ZigZag's opt="latency" and its reduce stage): the fewest cycles, then, among
  // mappings that tie on cycles, the least energy. With energy_tiebreak the mapper enumerates every
  // valid mapping (the energy/cycles front); without it, branch and bound on `objective` alone.
  Objective objective = Objective::Cycles;
  bool energy_tiebreak = true;
  int64_t max_mappings = 0;  // per mapper call; 0 = no limit (exhaustive_search's max_mappings)
};

struct TileCostStats {
  int64_t tiles = 0;
  int64_t unique_keys = 0;   // distinct (CT shape, core) pairs
  // Distinct mapping problems among them: keys that differ only in their boxes (a conv's clipped
  // edge rows) and send the same operands off-chip are mapped once.
  int64_t mapper_problems = 0;
  int64_t mapper_calls = 0;  // exhaustive searches (a key whose operands do not fit may need several)
  int64_t mappings_evaluated = 0;
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
std::vector<TileCost> map_tile_costs(const Workload& w, const TileSet& tiles, const Architecture& a,
                                     std::span<const int> core_of_tile, const TileCostOptions& opt,
                                     TileCostStats* stats = nullptr);

// The Einsum a CT computes: the layer's Einsum with every rank's size that of the CT's range
// (padding of a Pad remainder included, as Stream pads).
Einsum tile_einsum(const Workload& w, const TileSet& tiles, int tile);

}  // namespace mapfuse
