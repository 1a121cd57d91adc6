#pragma once
// FADiff's differentiable cost model (Jia et al., "FADiff", Section 3.2-3.3): a smooth relaxation
// of the Gemmini loop-nest model over continuous tiling factors T_t[d][m] (temporal) and T_s[d][m]
// (spatial) for every rank d and level m, and fusion variables sigma_e in [0, 1] on
// producer->consumer edges. Network EDP and the penalties P_map, P_mem, P_align come with exact
// gradients from hand-derived adjoints (reverse mode) kept next to the forward code in
// relaxed.cpp; an evaluation allocates nothing. Every equation as implemented, and every choice
// where the paper is silent, is in docs/fadiff.md.
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/arch/architecture.hpp"
#include "engine/cost/plan.hpp"
#include "engine/mapping/mapping.hpp"
#include "engine/workload/workload.hpp"

namespace mapfuse {

// Temporal loop order of every level, outermost first, as rank indices (all ranks of the Einsum;
// loops of factor 1 are no loops). The relaxation keeps the order fixed and relaxes the factors.
using LoopOrders = std::array<std::array<int8_t, kMaxRanks>, kMaxLevels>;

// At every level: loops over ranks the weights index outside those over ranks they do not index
// (weight stationary, Gemmini's dataflow), rank order otherwise.
LoopOrders weight_stationary_orders(const Einsum& e, int n_levels);

// How FetchCount (Eq. 6) treats outer loops over ranks a tensor does not index.
enum class ReuseModel : uint8_t {
  // They refetch the tile when a loop over a rank it does index lies inside them (Timeloop's
  // stationarity), smoothly gated by that inner loop's factor: exact at integer points.
  LoopOrder,
  // Eq. 6 read literally: only loops over ranks the tensor indexes count (perfect reuse).
  Ideal,
};

// One MAC Einsum on one core, compiled for the relaxed model. Levels keep every role they may
// keep (Gemmini: registers W, accumulator O, scratchpad W+I, DRAM all).
struct RelaxedLayer {
  struct LevelInfo {
    TensorMask keep = 0;
    double entries = 0;         // capacity of one instance in words; 0 = unbounded
    double buffering = 1;       // multiple buffering
    double bandwidth = 0;       // shared words/cycle per instance; 0 = unlimited
    double read_pj = 0, write_pj = 0, update_pj = 0;  // EPA at the level's capacity (DOSA's fit)
    std::array<int64_t, 2> fanout{1, 1};              // x, y
  };
  std::string name;
  int einsum = -1;     // index in the workload (-1 for a lone Einsum)
  double count = 1;    // multiplicity in the network
  int8_t n_ranks = 0, n_levels = 0, n_tensors = 0;
  int8_t output = -1;
  int8_t input = -1;          // the Input-role tensor a fused producer supplies (first one)
  int8_t fusion_level = -1;   // outermost on-chip level keeping `input`: where fused data lands
  ReuseModel reuse = ReuseModel::LoopOrder;
  bool legacy_output_fills = false;
  double ops = 0, op_pj = 0;
  std::array<int64_t, kMaxRanks> rank_size{};
  std::array<PlanTensor, kMaxTensors> tensors{};
  std::array<LevelInfo, kMaxLevels> levels{};
  LoopOrders order{};
  // Axis of T_s[d][m] (0 = x, 1 = y), or -1 where rank d cannot be spread below level m (the
  // factor is then fixed at 1 and no variable of the optimizer).
  std::array<std::array<int8_t, kMaxRanks>, kMaxLevels> axis{};

  // A layer's variables: T_t[d][m] at tt(m, d), then T_s[d][m] at ts(m, d).
  int n_vars() const { return 2 * n_levels * n_ranks; }
  int tt(int m, int d) const { return m * n_ranks + d; }
  int ts(int m, int d) const { return (n_levels + m) * n_ranks + d; }
};

// Throws InputError for a non-MAC Einsum or one beyond the plan's fixed bounds.
RelaxedLayer make_relaxed_layer(const Einsum& e, const Core& c, const LoopOrders& orders,
                                ReuseModel reuse = ReuseModel::LoopOrder);
RelaxedLayer make_relaxed_layer(const Einsum& e, const Core& c, ReuseModel reuse = ReuseModel::LoopOrder);

// Per-layer breakdown of the relaxed model (no fusion), for validation against the exact model.
struct RelaxedLayerCost {
  double energy_pj = 0, cycles = 0, compute_cycles = 0;
  std::array<std::array<double, kMaxTensors>, kMaxLevels> reads{}, fills{}, updates{};
  std::array<double, kMaxLevels> level_accesses{}, level_cycles{}, occupancy{};
};
// x: the layer's n_vars() factors (all > 0).
RelaxedLayerCost relaxed_layer_cost(const RelaxedLayer& layer, const double* x);

// The layer's variables for an integer mapping (one loop per rank and level; spatial loops on
// the layer's axes) and back. Factors are rounded to the nearest integer >= 1.
void factors_from_mapping(const RelaxedLayer& layer, const Mapping& m, double* x);
Mapping mapping_from_factors(const RelaxedLayer& layer, const double* x);
// The loop orders a mapping uses (ranks without a loop at a level appended in rank order).
LoopOrders loop_orders_of(const Mapping& m, int n_ranks);

// A network: the MAC Einsums of a workload in topological order, and the fusable edges. Edge
// p -> c exists when c's first Input-role tensor is p's output; every consumer has at most one.
struct RelaxedNetwork {
  struct Edge {
    int producer = -1, consumer = -1;
    bool align = true;  // producer output and consumer input have the same dimensions (Eq. 26)
  };
  std::vector<RelaxedLayer> layers;
  std::vector<Edge> edges;
  std::vector<int> var_begin;               // first variable of each layer
  std::vector<int> in_edge;                 // per layer, -1 = none
  std::vector<std::vector<int>> out_edges;  // per layer
  // The output is also read where no edge can fuse it (non-MAC consumer, a second input, a
  // network output): it is always written back to DRAM.
  std::vector<uint8_t> must_drain;
  int sigma_begin = 0, n_vars = 0;

  int tt(int v, int m, int d) const { return var_begin[v] + layers[v].tt(m, d); }
  int ts(int v, int m, int d) const { return var_begin[v] + layers[v].ts(m, d); }
  int sigma(int e) const { return sigma_begin + e; }
};

// `orders`: one per MAC Einsum (weight stationary when absent).
RelaxedNetwork make_relaxed_network(const Workload& w, const Core& c, ReuseModel reuse = ReuseModel::LoopOrder,
                                    const std::vector<LoopOrders>* orders = nullptr);
// A network of one layer (no edges).
RelaxedNetwork make_relaxed_network(const RelaxedLayer& layer);

// Loss = w.edp * EDP + w.map * (P_valid + P_spatial) + w.mem * P_mem + w.align * P_align (Eq. 20
// with separate lambdas).
struct LossWeights {
  double edp = 1, map = 1, mem = 1, align = 1;
};

struct RelaxedCost {
  double energy_pj = 0;  // sum over layers of count x energy
  double cycles = 0;     // sum over layers of count x latency
  double edp = 0;        // energy_pj x cycles
  double p_valid = 0, p_spatial = 0, p_mem = 0, p_align = 0;
  double loss = 0;
  double p_map() const { return p_valid + p_spatial; }
};

// Scratch space for relaxed_loss, sized once per network.
class RelaxedWorkspace {
 public:
  explicit RelaxedWorkspace(const RelaxedNetwork& net);

  struct LayerState {
    double energy = 0, latency = 0;
    double a_in = 0, drain = 1, copy = 0;  // fusion inputs of the layer (from sigma)
    std::array<double, kMaxLevels> occupancy{};
    std::array<double, kMaxTensorDims> out_tile{}, in_tile{};
    // adjoints
    double a_in_bar = 0, drain_bar = 0, copy_bar = 0;
    std::array<double, kMaxLevels> occupancy_bar{};
    std::array<double, kMaxTensorDims> out_tile_bar{}, in_tile_bar{};
  };
  std::vector<LayerState> state;
  std::vector<double> req, req_bar;  // per (layer, level): expected group size at group levels
};

// Evaluates the loss at x (net.n_vars values: factors > 0, sigma in [0, 1]). With a non-empty
// `grad` (net.n_vars values) writes d loss / d x. Allocation-free.
double relaxed_loss(const RelaxedNetwork& net, std::span<const double> x, const LossWeights& w,
                    RelaxedWorkspace& ws, RelaxedCost* cost = nullptr, std::span<double> grad = {});

// A starting point: every factor at DRAM (T_t[d][DRAM] = rank size), all others 1, sigma = 0.
std::vector<double> relaxed_trivial_point(const RelaxedNetwork& net);

// The paper's product constraint, kept exact: the DRAM temporal factor of every rank is the rank
// size over the product of all its other factors (as DOSA's search does). chain_dram_gradient turns
// d/d(all factors, independent) into d/d(free factors) with the DRAM factors so derived (their own
// entries become 0).
void derive_dram_factors(const RelaxedNetwork& net, std::span<double> x);
void chain_dram_gradient(const RelaxedNetwork& net, std::span<const double> x, std::span<double> grad);

}  // namespace mapfuse
