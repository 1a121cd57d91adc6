#pragma once
// The exact cost of a fused mapping (LoopTree) of a whole workload on one core, built from the
// single-Einsum model (model.hpp). The semantics are FFM's (docs/ffm.md):
//  - A fusion group of two or more Einsums has one on-chip backing level b for every tensor it
//    exchanges, and shared loops directly above b (SharedLoop::level == b), each around a run of
//    the group's Einsums (all of them, or a nested run: nested fusion). A shared loop runs, in
//    every Einsum it covers, over a rank that indexes one plain dimension of its output, so that
//    iteration produces final values, or over a rank the output lacks (a reduction rank) when
//    the output is exchanged and read only after the loop: stored at b above it, the output then
//    accumulates across its iterations (FusedContext::reduction; storage above the split). Around
//    an exchanged tensor's producer and a consumer a loop steps the same plain dimension of the
//    tensor in both.
//  - An exchanged tensor is stored at b under the loops common to its producer and all its
//    consumers (its tile); a deeper loop around the producer fills that tile piece by piece, one
//    around a consumer alone reads it again and again, so the tile is held for the whole of such
//    loops.
//  - Below the shared loops each Einsum runs its own mapping on one tile (its ranks divided by
//    the shared factors). Its storage nodes are in its branch: a tile's data is fetched once per
//    iteration. So the Einsum's cost is the single-Einsum model of one tile times the number of
//    iterations, with the exchanged tensors backed at b: never read from or written to DRAM.
//    Across a shared reduction loop, every tile after the first of it starts from the partial
//    sums at b (EvalPlan::output_accumulates: read back, no update lands on zero).
//  - Reservations: an exchanged tensor's tile at b is live from its producer's branch to its
//    last consumer's (widened to the runs of the deeper loops just described); everything else an Einsum keeps is live during its own branch. Usage of a
//    level is the sum of what is live during a branch, and the maximum over branches (and over
//    the groups, which run one after another) must fit the level's capacity.
//  - Storage above the split (FFM's storage nodes above the shared loops): a tensor that one
//    Einsum of the group reads from the outermost level, indexed by none of the shared loops
//    around it (a weight), may be kept resident at b for the whole group (FusionGroup::resident).
//    Its tile is then the whole tensor, filled once instead of once per iteration, and reserved
//    at b during every branch of the group. The fill's energy is charged once; for latency its
//    words are spread evenly over the iterations (PlanLevel::extra_*_words), so that the Einsum's
//    bandwidth demand is that of its whole run, as for any other transfer.
//  - Energy is the sum over Einsums; latency is the sum over Einsums too (groups run in sequence,
//    and inside a group the branches of one iteration run one after another).
// An Einsum alone in its group is evaluated exactly as by the single-Einsum model.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/cost/model.hpp"
#include "engine/mapping/looptree.hpp"

namespace mapfuse {

// How one Einsum sits in its fusion group.
struct FusedContext {
  int backing_level = -1;  // b; -1 = unfused (alone in its group, no shared loops)
  TensorMask onchip = 0;   // the Einsum's tensors backed at b (exchanged inside the group)
  TensorMask resident = 0; // the Einsum's tensors kept at b above the shared loops (storage above the split)
  int64_t iterations = 1;  // product of the shared loop factors
  // Product of the factors of shared loops over ranks that do not index the Einsum's output
  // (reduction ranks): its output, stored at b above them, accumulates across their iterations.
  int64_t reduction = 1;
  // Tensors backed at b as the tile mapping sees them: kept there, never fetched from above.
  TensorMask at_b() const { return static_cast<TensorMask>(onchip | resident); }
};

// The one fill of a context's resident tensors from the outermost level into b.
struct ResidentFill {
  int64_t words = 0;     // words held at b for the whole group
  double energy_pj = 0;  // outermost-level reads and b writes, once
};

// The resident fill of `ctx` on the tile plan of its Einsum, and that plan's bandwidth demand
// for it: the words spread over the iterations as PlanLevel::extra_*_words of the outermost
// level (reads) and of b (writes). Energy is charged per vector of block_size words, as the
// model charges any transfer.
ResidentFill apply_resident_fill(EvalPlan& tile_plan, const FusedContext& ctx);

// What prices an Einsum's tiles under a context, compiled once per context: the tile plan (ranks
// divided by the shared factors, the resident fill applied), and with shared reduction loops
// (ctx.reduction > 1) the plan of a tile after the first of them, whose output accumulates onto
// the partial sums held at b (EvalPlan::output_accumulates). Of the I iterations, I / reduction
// tiles start their output from zero and the others accumulate.
struct FusedTilePlan {
  EvalPlan first, rest;
  ResidentFill fill;
};
FusedTilePlan fused_tile_plan(const Einsum& tile, const Core& c, const FusedContext& ctx);

// An Einsum's total energy or latency from its tiles': `first` for the tiles that start their
// output from zero, `rest` for the others (ctx.reduction; the same when it is 1), plus `once`.
inline double fused_total(double first, double rest, const FusedContext& ctx, double once = 0) {
  const int64_t n_first = ctx.iterations / ctx.reduction;
  if (n_first == ctx.iterations) return first * static_cast<double>(ctx.iterations) + once;
  return first * static_cast<double>(n_first) + rest * static_cast<double>(ctx.iterations - n_first) + once;
}

// One Einsum's share of a fused mapping.
struct FusedEinsumCost {
  CompactCost tile;          // one iteration of the shared loops (model verdict ignoring capacity)
  CompactCost rest;          // one accumulating iteration (FusedContext::reduction > 1), else = tile
  double energy_pj = 0;      // fused_total of the tiles' energies, plus the resident fill
  double cycles = 0;         // fused_total of the tiles' latencies
  int64_t iterations = 1;
  // Words per instance the Einsum's branch reserves at each level, without the exchanged tiles
  // at b (those are the group's, see exchanged_tile) and the resident tensors.
  std::array<int64_t, kMaxLevels> own{};
  int64_t resident = 0;  // words of its resident tensors at b, held during every branch of the group
  // Words of each of the Einsum's tensors backed at b (0 for the others).
  std::array<int64_t, kMaxTensors> exchanged_tile{};
};

// The single-Einsum model of the tiles under a context, the common step of the fused evaluation
// and of FFM's pmapping generation. `plan` is fused_tile_plan's; `s` and `f` describe the tile's
// own mapping with the onchip and resident tensors kept at b, bypassing every level above, and
// flagged in FlatMapping::onchip_backing. Allocation-free.
void evaluate_fused_einsum(const FusedTilePlan& plan, const NestStructure& s, const int64_t* f,
                           const FusedContext& ctx, FusedEinsumCost& out, CostResult& scratch);

struct FusedCost {
  bool valid = false;             // structurally valid and within every capacity
  Invalid invalid = Invalid::None;
  int invalid_level = -1;
  int invalid_einsum = -1;
  double energy_pj = 0;           // sum over Einsums in workload order
  double cycles = 0;              // sum over Einsums in workload order
  std::vector<FusedEinsumCost> einsums;          // by workload Einsum index
  std::vector<FusedContext> contexts;            // by workload Einsum index
  std::vector<CostResult> tiles;                 // per Einsum: the model's breakdown of one tile
  std::vector<std::array<int64_t, kMaxLevels>> usage;  // per Einsum: its branch's usage per level and instance
  std::array<int64_t, kMaxLevels> peak{};        // max usage per instance over all branches
  double edp() const { return energy_pj * cycles; }
};

// Evaluates a LoopTree end to end. Throws InputError when the tree is structurally invalid
// (check_looptree) or outside the fused mapspace modelled here (the message says which rule:
// several backing levels in one group, shared loops not directly above the backing level, a
// shared loop over a rank that does not index the Einsum's output plainly, or that steps an
// exchanged tensor differently in its producer and a consumer, two loops over one rank, own
// loops above the backing level, an exchanged tensor kept between b and DRAM, tiles of one
// exchanged tensor that differ between its producer and a consumer, a resident tensor at
// another level than b, indexed by a shared loop around its Einsum, or not kept at b).
// Capacity overflow is not
// an error: the result is returned with valid = false and the level named.
FusedCost evaluate_fused(const LoopTree& t, const Workload& w, const Core& c);

// The dimension of tensor `tensor` (index in e.tensors) that rank `rank` alone indexes with
// coefficient 1 (no other dimension mentions the rank), or -1: the ranks a shared loop may use.
int plain_dim(const Einsum& e, int tensor, int rank);

// The Einsum with each rank divided by its shared factor (shared[r], 1 = not shared).
Einsum tile_einsum(const Einsum& e, const std::array<int64_t, kMaxRanks>& shared);

// The flat form of a tile mapping under a context: the onchip and resident tensors lose their
// DRAM keep bit and are flagged as backed on chip.
FlatMapping flatten_fused(const Mapping& m, const FusedContext& ctx, int n_levels);

}  // namespace mapfuse
