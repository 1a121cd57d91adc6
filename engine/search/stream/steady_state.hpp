#pragma once
// WACO's steady state of a layer stack (Stream, Symons et al., §5.2): walking the CTs of the
// stack's last layer in scheduling order, each one's *iteration* is the set of its transitive
// predecessors inside the stack that no earlier iteration computed. Iterations that do the same
// work (the same CT shapes per layer) are counted together; the steady state is the iteration whose
// count × MACs is largest. WACO allocates only its CTs and unrolls that allocation over the stack
// (waco.hpp; docs/stream.md, "WACO").
#include <cstdint>
#include <span>
#include <vector>

#include "engine/workload/tile_graph.hpp"

namespace mapfuse {

struct SteadyState {
  int stack = 0;              // index into TileSet::stacks
  std::vector<int> tiles;     // the steady-state CTs (tile indices, ascending)
  int64_t iterations = 0;     // sink CTs whose iteration does this same work (N of Eq. 12)
  int64_t macs = 0;           // MACs of one steady-state iteration
  int64_t stack_tiles = 0;    // CTs of the whole stack
  int64_t stack_macs = 0;     // MACs of the whole stack
  int64_t stack_iterations = 0;  // sink CTs of the stack (iterations of any kind)
};

// MACs of a CT: the product of its rank ranges (padding included) for a MAC Einsum, else 0.
int64_t tile_macs(const Workload& w, const TileSet& tiles, int tile);

// One steady state per stack of g.tiles.stacks, in stack order. Deterministic: ties between
// iterations are broken by count, then by the first one met.
std::vector<SteadyState> steady_states(const Workload& w, const TileGraph& g);

// The paper's Fig. 11 for a workload: how much the steady states shrink the graph and what share
// of the MACs they stand for (iterations × MACs of the steady state, over all MACs).
struct SteadyStateSummary {
  int64_t tiles = 0, steady_tiles = 0;
  int64_t macs = 0, steady_macs = 0;  // steady_macs = sum of iterations × macs
  double tile_share() const { return tiles ? double(steady_tiles) / double(tiles) : 0; }
  double mac_share() const { return macs ? double(steady_macs) / double(macs) : 0; }
};
SteadyStateSummary summarize(std::span<const SteadyState> states);

}  // namespace mapfuse
