#pragma once
// A COALA problem (engine/cost/coala.hpp) from a tile graph, an allocation and per-tile costs, with
// the rules Stream classic (cb9dfc52) uses to turn its CN graph into what its scheduler sees, so
// that the same inputs give Stream's schedule (docs/stream.md, "Building the schedule problem").
#include <span>

#include "engine/arch/architecture.hpp"
#include "engine/cost/coala.hpp"
#include "engine/cost/tile_cost.hpp"
#include "engine/workload/tile_graph.hpp"

namespace mapfuse {

struct ScheduleProblemOptions {
  // Stream: a CT is a sink (its output written back to DRAM when it ends) when no CT of its layer
  // has a successor, intra-layer edges included, so a tiled last layer never writes its output
  // back. Off (mapfuse): every CT whose output tensor no Einsum reads (the network's outputs).
  bool sinks_by_layer_edges = true;
  static ScheduleProblemOptions for_semantics(coala::Semantics s) {
    ScheduleProblemOptions o;
    o.sinks_by_layer_edges = s == coala::Semantics::Stream;
    return o;
  }
};

// Hardware from coala::set_hardware(arch); per CT (problem tile i = graph tile i):
//  - core = core_of_tile[i] (an arch core index), priority = Tile::priority, runtime and energies
//    from costs[i], bw_fraction = 1 / the layer's inter-core groups;
//  - tensors as Stream identifies them: a CT's output (Stream's size: TileAccess::stream_bits);
//    a constant operand (a tensor no Einsum produces: weights, the network input) is one object per
//    (layer, operand, box), shared by the CTs that read the same box (the four K-split CTs of a row
//    read one input row), owned by the first of them, in DRAM at t = 0;
//  - inputs, in Stream's order: the outputs of the inter-layer producers (each once) by (layer,
//    sub id), then the constant operands, weights before the network input; operands that stream
//    from DRAM (TileCost offchip) are not fetched;
//  - blocks: an offchip output (first; the output then goes to DRAM) and each offchip input (as
//    its constant object, or the CT's own window of the produced tensor) with their DRAM bandwidths;
//  - sinks: ScheduleProblemOptions::sinks_by_layer_edges;
//  - edges: every graph edge once per (producer, consumer).
// Throws InputError for mismatched sizes, a core index out of range or a core that cannot run the
// CT's operator.
coala::Problem build_schedule_problem(const Workload& w, const TileGraph& g, const Architecture& arch,
                                      std::span<const int> core_of_tile, std::span<const TileCost> costs,
                                      const ScheduleProblemOptions& options = {});

// Per entry of g.tiles.accesses, what COALA holds on a CT's core for that operand when it is
// fetched (build_schedule_problem's objects): for an input another layer produces, the whole
// outputs (TileAccess::stream_bits) of its producer CTs, each once; 0 for outputs and constant
// operands (their object is the CT's own box). More than the box where producers are coarser than
// the consumer: a fused stack after a layer run whole, a stride-2 consumer of row CTs.
// map_tile_costs sends such an operand off-chip when these objects do not fit.
std::vector<int64_t> held_input_bits(const TileGraph& g);

}  // namespace mapfuse
