#pragma once
// The exact analytical loop-nest model (Timeloop semantics): loop order decides temporal reuse,
// tile shapes come from the projections (halos included), bypassed levels pass traffic through,
// spatial fan-out multicasts inputs and reduces outputs, energy is actions x energy per action,
// and latency is the maximum over compute and every level's bandwidth-bound transfer time.
#include <array>
#include <cstdint>
#include <span>

#include "engine/cost/plan.hpp"

namespace mapfuse {

// Word accesses of one tensor at one level, summed over all instances of the level.
struct TensorAccesses {
  int64_t reads = 0;    // words read out (to an inner level or compute; outputs: also drained)
  int64_t fills = 0;    // words written in from the next outer level that keeps the tensor
  int64_t updates = 0;  // partial sums written back from inner levels or compute
  int64_t tile = 0;     // words one instance holds (utilized capacity), 0 if bypassed
  int64_t total() const { return reads + fills + updates; }
};

enum class Invalid : uint8_t {
  None,
  LevelCount,
  FactorProduct,
  FanoutExceeded,
  KeepNotAllowed,
  BackingMissing,
  CapacityExceeded,
  KeepMissing,      // a level does not keep a tensor whose role it must keep (Level::must_keep)
  FanoutUnderused,  // fewer instances of an axis used than its min_usage asks (Fanout::x_min_usage)
};

struct CostResult {
  Invalid invalid = Invalid::None;
  int8_t invalid_level = -1;
  double energy_pj = 0;
  double cycles = 0;
  double compute_cycles = 0;
  double compute_energy_pj = 0;
  int64_t operations = 0;
  double utilization = 0;  // spatial: used compute instances / available
  std::array<std::array<TensorAccesses, kMaxTensors>, kMaxLevels> access{};
  std::array<double, kMaxLevels> level_energy_pj{};
  std::array<double, kMaxLevels> level_cycles{};
  std::array<int64_t, kMaxLevels> level_occupancy{};  // words per instance, all kept tensors
  std::array<int64_t, kMaxLevels> level_instances{};  // instances used by this mapping

  bool valid() const { return invalid == Invalid::None; }
  double edp() const { return energy_pj * cycles; }
};

// What a mapper needs of an evaluation.
struct CompactCost {
  Invalid invalid = Invalid::None;
  double energy_pj = 0;
  double cycles = 0;
  bool valid() const { return invalid == Invalid::None; }
  double edp() const { return energy_pj * cycles; }
};

// The part of a mapping that does not depend on its factors: loop order, levels, ranks, kinds
// and what every level keeps. Worked out once, it leaves only arithmetic per evaluation.
struct NestStructure {
  struct Pair {          // one (tensor, level that keeps it), innermost level first per tensor
    int8_t tensor, level, child;  // child: next inner level keeping the tensor, -1 = compute
    bool output, backing;
    bool between_simple;  // multicast groups are a plain product of `between` factors
    uint64_t between;     // spatial loops of levels child+1..level over ranks the tensor indexes
    uint64_t partition;   // spatial loops above `level` over ranks the tensor indexes
    // Spatial loops of levels child+1..level over ranks the tensor does not index, on axes that
    // may not multicast (or reduce) it: every instance is served on its own.
    uint64_t replicated;
  };
  int8_t n = 0, n_levels = 0, n_temporal = 0, n_pairs = 0;
  Invalid structural = Invalid::None;  // KeepNotAllowed / KeepMissing / BackingMissing / LevelCount
  int8_t structural_level = -1;
  std::array<int8_t, kMaxLoops> rank{}, level{};
  std::array<LoopKind, kMaxLoops> kind{};
  std::array<int8_t, kMaxLevels> boundary{};        // first loop of each level
  std::array<int8_t, kMaxLoops> temporal{};         // temporal loops, outermost first
  std::array<int8_t, kMaxLevels> temporal_above{};  // temporal loops outside each level's tile
  std::array<uint64_t, kMaxLevels> spatial_x{}, spatial_y{};
  std::array<Pair, kMaxLevels * kMaxTensors> pairs{};
  std::array<TensorMask, kMaxLevels> keep{};
  uint8_t refilled = 0;  // bit t: the tensor has a kept level below the backing store
};
NestStructure analyze(const EvalPlan& plan, const FlatMapping& m);

// Evaluates the structure with the given factors (factors[i] for loop i; 1 = no loop). Writes
// the full breakdown when `full` is given. Allocation-free.
CompactCost evaluate(const EvalPlan& plan, const NestStructure& s, const int64_t* factors,
                     CostResult* full = nullptr);

// Evaluates one mapping. Allocation-free; safe to call concurrently on the same plan.
void evaluate(const EvalPlan& plan, const FlatMapping& m, CostResult& out);
CostResult evaluate(const EvalPlan& plan, const FlatMapping& m);

// Evaluates many mappings in parallel (OpenMP).
void evaluate_batch(const EvalPlan& plan, std::span<const FlatMapping> mappings,
                    std::span<CostResult> out);

std::string_view to_string(Invalid k);

}  // namespace mapfuse
