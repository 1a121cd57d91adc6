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

// Evaluates one mapping. Allocation-free; safe to call concurrently on the same plan.
void evaluate(const EvalPlan& plan, const FlatMapping& m, CostResult& out);
CostResult evaluate(const EvalPlan& plan, const FlatMapping& m);

// Evaluates many mappings in parallel (OpenMP).
void evaluate_batch(const EvalPlan& plan, std::span<const FlatMapping> mappings,
                    std::span<CostResult> out);

std::string_view to_string(Invalid k);

}  // namespace mapfuse
