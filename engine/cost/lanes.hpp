#pragma once
// SIMD evaluation of up to kLanes factor sets of one loop structure at once: the inner loop of a
// mapper that enumerates tile shapes. The arithmetic of evaluate(plan, structure, factors) is
// done in double precision across lanes (exact for integers below 2^52; a lane whose counts come
// near that bound, or whose multicast groups need the exact enumeration, is recomputed by the
// scalar model) in the same order of operations, so results are bit-identical to the scalar
// model (tests check it). Compiled for AVX-512, AVX2 and baseline x86-64, chosen at load time.
#include <array>
#include <cstdint>

#include "engine/cost/model.hpp"

namespace mapfuse {

inline constexpr int kLanes = 16;

// factors[i][k]: factor of loop i in lane k (1 = no loop).
using LaneFactors = std::array<std::array<int64_t, kLanes>, kMaxLoops>;

// Evaluates lanes 0..count-1 (count <= kLanes) into out[0..count-1].
void evaluate_lanes(const EvalPlan& plan, const NestStructure& s, const LaneFactors& factors,
                    int count, CompactCost* out);

}  // namespace mapfuse
