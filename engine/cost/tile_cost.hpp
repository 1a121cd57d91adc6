#pragma once
// Per-tile costs for Stream-style scheduling (Stream's cost LUT): what one computation tile (CT,
// engine/workload/tiles.hpp) costs on one core of a multi-core architecture. COALA (coala.hpp)
// takes them as given; they come either from mapfuse's own optimal mapper (each unique CT shape
// mapped once per core under that core's dataflow, with the exact cost model, and cached:
// engine/search/stream/tile_costs.hpp) or from an external table (tile_cost_csv.hpp), so that schedulers can be compared on identical tile
// costs. docs/stream.md, "Per-tile cost".
#include <cstdint>
#include <vector>

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

}  // namespace mapfuse
