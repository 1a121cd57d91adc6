#pragma once
// WACO (Stream, Symons et al., §5): the allocation of each layer stack's steady-state CTs
// (steady_state.hpp) to cores and time slots, with CT parallelism (a CT split along its output
// channels over p cores), by the constraint model of §5.4 (Eqs. 1-12) linearised as a MILP and
// solved with CBC; the steady-state allocation is then unrolled over the whole stack.
// docs/stream.md, "WACO". CBC's headers stay inside waco.cpp.
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "engine/arch/architecture.hpp"
#include "engine/cost/tile_cost.hpp"
#include "engine/search/stream/steady_state.hpp"
#include "engine/workload/tile_graph.hpp"

namespace mapfuse {

// One stack's model (§5.4.2's constants). Tiles are the steady-state CTs; a *layer* here is the
// group of tiles that shares one parallelism choice and one set of weights (the tiles of one Einsum:
// mapfuse cuts a whole layer one way, so its steady-state CTs take the same p).
struct WacoInstance {
  int cores = 0;
  std::vector<double> capacity_bits;           // C_j: weight memory per core
  std::vector<int> layer_of_tile;              // per tile its layer (0..layers-1)
  std::vector<std::vector<int>> choices;       // per layer its allowed p, ascending
  std::vector<double> weight_bits;             // per layer W; a p-way split keeps W / p on each of its cores
  // latency[tile][core][c]: L_ijp for p = choices[layer][c]; +inf where the core cannot run the tile.
  std::vector<std::vector<std::vector<double>>> latency;
  std::vector<std::pair<int, int>> deps;       // D: (i, i') means slot(i) < slot(i')
  int64_t iterations = 1;                      // N of Eq. 12
  bool weight_constraint = true;               // Eq. 5 (off for a lone layer, whose weights may stream)
};

struct WacoOptions {
  double time_limit_s = 60;  // per stack; CBC stops with its best solution and bound
  // Per stack, CBC's branch-and-bound nodes (-maxNodes); 0 = no limit. A time limit that binds
  // makes the allocation depend on the machine's speed and load; a node limit stops at the same
  // place on every machine, so a study whose stacks stop at it gives the same results anywhere
  // (the time limit then only guards against a root LP that runs long).
  int64_t max_nodes = 0;
  int seed = 1;              // CBC's random seeds (one thread: deterministic for a given limit)
  int max_parallelism = 0;   // largest p; 0 = as many as the cores that can run the layer
  // A steady state of more CTs (a stack whose last layer is one CT has the whole stack as its
  // steady state) is modelled with one MILP tile per layer; the MILP grows as n^2 x cores x choices.
  int max_steady_tiles = 24;
};

struct WacoSolution {
  bool optimal = false;               // proven optimal within the time limit
  bool time_limited = false;          // CBC stopped at the time limit (the result depends on the machine)
  bool node_limited = false;          // CBC stopped at WacoOptions::max_nodes
  bool fallback = false;              // CBC returned none in time: the greedy allocation (one tile
                                      // per slot in a topological order, each layer split as far as
                                      // allowed over its fastest cores). With the start handed to CBC
                                      // this happens only when the greedy one does not fit either.
  bool rejected = false;              // CBC's incumbent broke the model's rows (allocation_valid): the
                                      // start was used instead (not seen in the tests; a guard)
  double objective = 0;               // lat of Eq. 12, in cycles
  double bound = 0;                   // the best lower bound: CBC's, or N x the total work over the
                                      // cores where that is higher (CBC's root LP stopped by the limit)
  double start = 0;                   // lat of the greedy allocation CBC starts from (0: none fits)
  double gap = 0;                     // (objective - bound) / objective; 0 when optimal
  std::vector<int> slot;              // per tile
  std::vector<std::vector<int>> cores;  // per tile its p cores, ascending
  std::vector<int> choice;            // per layer: index into choices[layer]
  std::vector<double> slot_latency;   // l_s
  double overlap = 0;                 // o
  int rows = 0, columns = 0, integers = 0;
  int64_t nonzeros = 0, nodes = 0;
  double seconds = 0;                 // CBC's wall time
};

// Builds the MILP and solves it with CBC (one thread, fixed seed, time limit), starting from the
// greedy allocation where it fits; identical cores are ordered by their first slot and each tile's
// slot is confined by its longest dependency chains (both exact). Throws InputError
// (key "allocation.waco") when the model is infeasible (the weights fit no allocation: `what`
// names the stack in the message), or when CBC finds no solution in time and the fallback
// (WacoSolution::fallback) does not fit the weights either.
WacoSolution solve_waco(const WacoInstance& inst, const WacoOptions& opt, const std::string& what = "stack");

// Eq. 12 for a discrete allocation (slots, cores per tile, choice per layer), the idle times
// taken exactly; checks nothing. For reports and for checking CBC's objective.
double waco_latency(const WacoInstance& inst, std::span<const int> slot,
                    const std::vector<std::vector<int>>& cores, std::span<const int> choice);

// Costs of CTs on given cores (map_tile_costs or a tile-cost table, as the schedule uses).
using TileCostFn = std::function<std::vector<TileCost>(const TileSet&, std::span<const int> core_of_tile)>;

struct WacoStack {
  SteadyState steady;
  bool per_layer = false;    // modelled per layer (more than WacoOptions::max_steady_tiles CTs)
  std::vector<int> layers;   // Einsum of each instance layer
  WacoInstance instance;
  WacoSolution solution;
};

struct WacoResult {
  TilingOptions tiling;        // the unrolled tiling: each layer split along K into its chosen p
  TileGraph graph;             // of that tiling
  std::vector<int> core_of_tile;
  std::vector<int> parallelism;  // per Einsum its p
  std::vector<WacoStack> stacks;
  SteadyStateSummary summary;  // Fig. 11
  double cost_seconds = 0, solve_seconds = 0;
};

// The whole method on a workload: CTs one per output row in fused stacks (stream_tiling(w, 1)),
// steady states, per steady CT and core and p its cost by `cost` (the CT split p ways along the
// rank stream_tiling splits: K of a conv, N of a matmul, the columns of a ReLU; p divides it), one
// MILP per stack, and the allocation unrolled: every CT of a layer takes the cores of the steady
// CT at the same row modulo the steady state's rows of that layer, its group g the g-th of them.
// Layers without a steady CT (none in a regular stack) take p = 1 on their first capable core.
// C_j is the core's outermost on-chip level that may keep weights. InputError (key
// "allocation.waco") for a layer no core can run or whose weights fit no core even split.
WacoResult waco_allocate(const Workload& w, const std::vector<std::vector<int>>& stacks, const Architecture& arch,
                         const TileCostFn& cost, const WacoOptions& opt);

// The weight memory of a core: the outermost on-chip level that may keep weights (0 if none).
int64_t core_weight_capacity_bits(const Core& c);

}  // namespace mapfuse
