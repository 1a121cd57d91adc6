#pragma once
// An (Einsum, core) pair compiled once into flat arrays, and a mapping flattened into a fixed-size
// loop list: the two inputs of the hot evaluation path, which then allocates nothing.
#include <array>
#include <cstdint>

#include "engine/arch/architecture.hpp"
#include "engine/mapping/mapping.hpp"
#include "engine/workload/einsum.hpp"

namespace mapfuse {

inline constexpr int kMaxLoops = 48;
inline constexpr int kMaxTerms = 3;  // rank terms in one tensor dimension (p*stride + r*dilation)
// Unused terms point at this rank slot, whose extent is always 1, with coefficient 0, so that the
// hot loops over terms and dimensions have constant trip counts.
inline constexpr int kPadRank = kMaxRanks;

struct PlanTerm {
  int8_t rank;
  int64_t coeff;
};

struct PlanDim {
  int8_t n_terms = 0;
  std::array<PlanTerm, kMaxTerms> terms{};
};

// A dimension's extent for the given per-rank extents (1 + sum coeff * (extent - 1)). `ext` must
// have the pad slot: ext[kPadRank] == 1, so that the loop over terms has a constant trip count.
inline int64_t dim_extent(const PlanDim& d, const int64_t* ext) {
  // Most dimensions have one term; the branch is the same for every evaluation of a plan.
  int64_t e = 1 + d.terms[0].coeff * (ext[d.terms[0].rank] - 1);
  if (d.n_terms > 1)
    for (int k = 1; k < kMaxTerms; ++k) e += d.terms[k].coeff * (ext[d.terms[k].rank] - 1);
  return e;
}

struct PlanTensor {
  TensorRole role = TensorRole::Input;
  int8_t n_dims = 0;
  std::array<PlanDim, kMaxTensorDims> dims{};
  uint16_t relevant_ranks = 0;  // bit r: rank r appears in some dimension
  // Dimensions indexed by one rank with coefficient 1 (most of them): their extent is that
  // rank's extent. -1 for the others.
  std::array<int8_t, kMaxTensorDims> plain_rank{};
  // Inverse of `dims` for the hot path: where rank r appears (dimension and coefficient).
  std::array<int8_t, kMaxRanks> rank_terms{};
  std::array<std::array<int8_t, 2>, kMaxRanks> rank_dim{};
  std::array<std::array<int64_t, 2>, kMaxRanks> rank_coeff{};
  // Exact packed form of the translations the refill analysis compares: dimension d occupies
  // bits [d * b, (d + 1) * b) of a 64- or 128-bit word, where b = word bits / n_dims. All
  // compared values are non-negative and below 2^b, so equal words are equal vectors. Chosen at
  // compile time from the tensor's extents; `None` falls back to explicit vectors.
  enum class Packing : uint8_t { Word64, Word128, None } packing = Packing::None;
  std::array<uint64_t, kMaxRanks> key64{};            // unit step of rank r
  std::array<unsigned __int128, kMaxRanks> key128{};
  int64_t volume = 0;           // values in the whole tensor
};

struct PlanLevel {
  int64_t entries = 0;  // per instance; 0 = unbounded
  int64_t block_size = 1;
  int multiple_buffering = 1;
  double read_bw = 0, write_bw = 0, shared_bw = 0;
  double read_pj = 0, write_pj = 0, update_pj = 0;
  RoleMask may_keep = kAllRoles;
  RoleMask must_keep = 0;
  int64_t fanout_x = 1, fanout_y = 1;
  int64_t min_x = 1, min_y = 1;                          // instances the Einsum must use (min_usage)
  RoleMask multicast_x = kAllRoles, multicast_y = kAllRoles;  // roles sharing transfers across the axis
  // Words per instance moved by each evaluation outside the mapping's own loops, which compete
  // for the level's bandwidth (latency only; their energy is the caller's). Fused Einsums: a
  // tensor kept above the shared loops is filled once for all iterations, spread evenly over
  // them (engine/cost/fused.hpp). 0 for every single-Einsum mapping.
  double extra_read_words = 0, extra_write_words = 0;
};

struct EvalPlan {
  int8_t n_ranks = 0, n_tensors = 0, n_levels = 0;
  int8_t output = -1;
  std::array<int64_t, kMaxRanks> rank_size{};
  std::array<PlanTensor, kMaxTensors> tensors{};
  std::array<PlanLevel, kMaxLevels> levels{};
  double op_pj = 0;
  bool legacy_output_fills = false;
  // The output already holds partial sums when the evaluation starts (fused: every tile of a
  // shared loop over a reduction rank after the first, engine/cost/fused.hpp): no update lands
  // on zero, so every level reads back and fills the partial sums it accumulates onto.
  bool output_accumulates = false;
  int64_t operations = 0;
};

// Throws InputError if the Einsum exceeds the fixed bounds above.
EvalPlan compile_plan(const Einsum& e, const Core& c);

struct FlatLoop {
  int8_t level;
  int8_t rank;
  LoopKind kind;
  int64_t factor;
};

// Loops outermost first; unit factors dropped. Produced by flatten() or directly by mappers.
struct FlatMapping {
  int8_t n_loops = 0;
  int8_t n_levels = 0;
  std::array<FlatLoop, kMaxLoops> loops{};
  std::array<TensorMask, kMaxLevels> keep{};
  // Bit t: tensor t is backed on chip (fused, engine/cost/fused.hpp): its outermost kept level is
  // its backing store (no fills from above, outputs not drained) and the outermost level need not
  // keep it. 0 for every single-Einsum mapping.
  TensorMask onchip_backing = 0;
};

// Throws InputError if the mapping has more loops than kMaxLoops.
FlatMapping flatten(const Mapping& m);

}  // namespace mapfuse
