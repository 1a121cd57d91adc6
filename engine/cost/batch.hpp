#pragma once
// Lane-parallel evaluation of mappings that share one loop structure (the levels, ranks, kinds and
// order of their loops, and what each level keeps) and differ only in their factors: the inner
// loop of a mapper that enumerates tile shapes for a loop-order/bypass template. Everything that
// depends on the structure alone is worked out once per template; per batch only the arithmetic
// on the factors remains, lane by lane. Results equal evaluate() exactly (a test checks it).
#include <array>
#include <cstdint>
#include <vector>

#include "engine/cost/model.hpp"

namespace mapfuse {

inline constexpr int kBatchLanes = 8;

// factors[i][k]: factor of loop i in lane k.
using LaneFactors = std::array<std::array<int64_t, kBatchLanes>, kMaxLoops>;

struct BatchResult {
  std::array<double, kBatchLanes> energy_pj{};
  std::array<double, kBatchLanes> cycles{};
  std::array<Invalid, kBatchLanes> invalid{};
};

class BatchEvaluator {
 public:
  // `shape` supplies the structure; its factors are ignored. Loops must be in FlatMapping order
  // (outermost first, temporal before spatial within a level).
  BatchEvaluator(const EvalPlan& plan, const FlatMapping& shape);

  int loops() const { return n_; }
  // Lanes k < count (count <= kBatchLanes) are evaluated. A factor of 1 means no loop.
  void evaluate(const LaneFactors& factors, int count, BatchResult& out) const;

 private:
  struct Spatial {
    int8_t loop, level, dim;  // dim: the tensor dimension the loop's rank moves (-1: several)
    int64_t coeff;
  };
  struct Pair {  // one (tensor, kept level)
    int8_t tensor, level, child;
    bool output, backing;
    int8_t n_dims;
    std::array<std::array<int8_t, kMaxTerms>, kMaxTensorDims> dim_rank;
    std::array<std::array<int64_t, kMaxTerms>, kMaxTensorDims> dim_coeff;
    std::vector<Spatial> between;   // spatial loops of levels child+1..level that t indexes
    bool between_simple = true;     // no two of them in one level move the same dimension
    std::vector<int8_t> partition;  // spatial loops above `level` that t indexes
  };

  const EvalPlan* plan_;
  int n_ = 0, L_ = 0, T_ = 0, R_ = 0;
  Invalid structural_ = Invalid::None;
  std::array<int8_t, kMaxLoops> rank_{}, level_{};
  std::array<LoopKind, kMaxLoops> kind_{};
  std::array<int, kMaxLevels> boundary_{};
  std::vector<int8_t> temporal_;                 // loop indices, outermost first
  std::array<int, kMaxLevels> temporal_above_{}; // temporal loops outside each level's tile
  std::vector<Pair> pairs_;                      // per tensor, innermost kept level first
};

}  // namespace mapfuse
