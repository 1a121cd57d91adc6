#pragma once
// Computation tiles (CTs) of a workload, as Stream (Symons et al., "Stream", §3.3) cuts layers for
// multi-core, layer-fused scheduling: each Einsum is split by its outer-CT loops (rank ranges), and
// every CT knows the hyper-rectangle of every tensor it reads and writes, halos included (they come
// from the projections) and clipped to the tensor (coordinates outside it are padding).
// Layer stacks decide which layers are fused; the scheduling order (a priority per CT) follows
// Stream classic's. The dependency graph over the CTs is in tile_graph.hpp. docs/stream.md, "Computation tiles".
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/workload/workload.hpp"

namespace mapfuse {

// Half-open [lo, hi); empty when hi <= lo. 32-bit: a graph of 10^6 CTs holds ~2*10^7 of them
// (generate_tiles refuses ranks and tensors of 2^31 or more).
struct Range {
  int32_t lo = 0, hi = 0;
  int64_t size() const { return hi > lo ? hi - lo : 0; }
  bool empty() const { return hi <= lo; }
  bool operator==(const Range&) const = default;
};

// One outer-CT loop: the rank `rank` cut into `parts` tiles (0 = one tile per index, Stream's "all"),
// or, when `size` > 0, into tiles of `size` indices (parts = ceil(rank / size); `parts` is ignored).
struct TileSplit {
  std::string rank;
  int64_t parts = 0;
  int64_t size = 0;
};

// A layer's outer-CT loops. `intra` tiles run one after the other (on one core, as the inter-core
// group allows), `inter` tiles of the same intra slot go to different cores: their index is the
// CT's `group`. Both lists are outer loop first; the inter-core loops are innermost (fastest).
struct LayerTiling {
  std::vector<TileSplit> intra;
  std::vector<TileSplit> inter;
};

// How a rank that `parts` does not divide is cut. Pad (Stream): `parts` tiles of ceil(size/parts),
// the rank extended to parts*ceil(size/parts); the excess is padding that reads and writes nothing.
// Ragged: tiles of ceil(size/parts), the last one smaller (so there may be fewer than `parts`).
enum class Remainder : uint8_t { Pad, Ragged };

struct TilingOptions {
  // Per Einsum (workload order); empty = every layer one CT. A layer alone in its stack keeps only
  // its inter-core splits (Stream: a layer-by-layer layer is not cut into intra-core tiles).
  std::vector<LayerTiling> layers;
  // The stacks, in execution order (from layer_stacks_*). Empty = every layer its own stack.
  std::vector<std::vector<int>> stacks;
  Remainder remainder = Remainder::Pad;
};

// The rank that indexes the output's row dimension: dimension 2 of an output with 4 dimensions
// (P of a conv or pool, H of an element-wise op on NCHW), else dimension 0 (M of a matmul); -1 when
// that dimension is not a single rank.
int row_rank(const Einsum& e);

// Stream classic's tiling of the tpu_like quad-core runs (shared/data/stream/derived/
// mapping_tpu_like_quad_core_fixed_k4.yaml): in fused stacks one CT per output row (row_rank);
// Mac Einsums split their output channels (K of a conv, N of a matmul) into `inter_parts`;
// element-wise Einsums with one activation input (ReLU) split their columns (the output's last
// dimension, Stream's "K" of relu) into `inter_parts`; pools, adds and copies are not split.
std::vector<LayerTiling> stream_tiling(const Workload& w, int64_t inter_parts);

// Every layer's output cut into tiles of `rows` x `cols` values along its last two dimensions
// (an NCHW output's H and W), each split by size; a layer whose last two output dimensions are not
// single ranks stays whole. bench_tiles' Fsrcnn1M (2x2: ~10^6 CTs) uses it.
std::vector<LayerTiling> pixel_tiling(const Workload& w, int64_t rows, int64_t cols);

// ---- layer stacks -----------------------------------------------------------------------------
// Every Einsum its own stack (layer by layer).
std::vector<std::vector<int>> layer_stacks_lbl(const Workload& w);
// Given stacks (Einsum indices). Each stack must be non-empty, name each Einsum at most once and be
// contiguous in the workload's order; a stack listed before one it depends on is a cyclic order.
// Einsums not named become singleton stacks. The result runs stacks in order of their first Einsum.
// Throws InputError (key "stacks[i]") for any of these faults.
std::vector<std::vector<int>> layer_stacks_manual(const Workload& w,
                                                  const std::vector<std::vector<int>>& given);
// Stream's automatic rule: walk the Einsums in order and cut before the one whose constant
// weights (Weight-role tensors no Einsum produces) would push the stack's sum above
// `weight_capacity_bits` (the cores' weight memory). only_first = Stream classic's default
// (get_layer_stacks_fused_single): only the first such stack is fused, the rest run layer by layer.
std::vector<std::vector<int>> layer_stacks_auto(const Workload& w, int64_t weight_capacity_bits,
                                                bool only_first = false);
// How a study or `--stacks` names a fused workload's stacks, parsed once and applied per workload
// and architecture: "auto" (Stream's rule at the cores' weight memory), "auto:F" (the same rule at
// F times it: F < 1 cuts more, smaller stacks; F > 1 lets a stack's weights spread over several
// cores, as WACO's per-core weight rows allow), "first" (Stream classic's default) or Einsum index
// ranges "0-10,11-21" (layer_stacks_manual). A joint exploration sweeps these cut points.
struct StackSpec {
  enum class Kind { Auto, First, Ranges };
  Kind kind = Kind::Auto;
  double capacity_scale = 1;              // auto:F
  std::vector<std::vector<int>> ranges;   // Ranges
};
// Throws InputError (at `key`) naming the accepted forms.
StackSpec parse_stack_spec(const std::string& text, const std::string& key = "stacks");
std::vector<std::vector<int>> layer_stacks(const Workload& w, const StackSpec& spec, int64_t weight_capacity_bits);
// Constant weight bits of one Einsum (as layer_stacks_auto counts them).
int64_t weight_bits(const Workload& w, int einsum);

// ---- the tiles --------------------------------------------------------------------------------
// One tensor a CT reads or writes: `dims` ranges from TileSet::ranges[box].
struct TileAccess {
  int tensor = -1;    // index into Workload::tensors
  uint32_t box = 0;   // first of `dims` ranges in TileSet::ranges
  int64_t bits = 0;   // values in the box × bits per value (0 for an empty box)
  // As Stream sizes the CT's tensor: the window of the padded rank ranges, not clipped to the
  // tensor (a conv's padding rows and a Pad remainder's excess included). Stream transfers and
  // stores tensors of this size.
  int64_t stream_bits = 0;
  TensorRole role = TensorRole::Input;
  uint8_t dims = 0;
};

struct Tile {
  int layer = -1;        // Einsum index
  int sub_id = 0;        // position in the layer's outer-CT loop nest (inter-core loops fastest)
  int group = 0;         // inter-core group (index over the inter-core splits); 0 when unsplit
  int stack = 0;         // index into TileSet::stacks
  int64_t priority = 0;  // position in the scheduling order; 0 is scheduled first
  uint32_t ranks = 0;     // first of n_ranks rank ranges in TileSet::ranges (the Einsum's order)
  uint32_t accesses = 0;  // first of n_accesses entries in TileSet::accesses (the Einsum's order)
  uint16_t n_ranks = 0, n_accesses = 0;
};

// The CTs of a workload: flat arrays, tiles grouped by layer in sub-id order.
struct TileSet {
  std::vector<Tile> tiles;
  std::vector<Range> ranges;           // rank ranges and tensor boxes, indexed from Tile/TileAccess
  std::vector<TileAccess> accesses;    // per tile, in the Einsum's tensor order
  std::vector<int> layer_first;        // per Einsum its first tile; one extra entry = tiles.size()
  std::vector<int> layer_groups;       // per Einsum the number of inter-core groups
  std::vector<std::vector<int>> stacks;
  std::vector<int> order;              // tile indices by priority

  // Rank ranges: the work the CT does, padding included (Remainder::Pad may extend past the rank).
  std::span<const Range> rank_ranges(int tile) const {
    return {ranges.data() + tiles[tile].ranks, tiles[tile].n_ranks};
  }
  std::span<const TileAccess> tile_accesses(int tile) const {
    return {accesses.data() + tiles[tile].accesses, tiles[tile].n_accesses};
  }
  std::span<const Range> box(const TileAccess& a) const { return {ranges.data() + a.box, size_t(a.dims)}; }
};

// The bounds of every workload tensor: a produced tensor spans its producer's output; a tensor no
// Einsum produces (network input, weights) spans the largest view of it, its padding included (as
// Timeloop counts it), and its readers' offsets are ignored.
std::vector<std::vector<int64_t>> tensor_bounds(const Workload& w);

// Cuts every Einsum of `w` as `opt` says. Throws InputError (key "layers[i].intra|inter") for an
// unknown rank (with a suggestion), a rank split twice, a negative part count, or options that do
// not match the workload.
TileSet generate_tiles(const Workload& w, const TilingOptions& opt);

}  // namespace mapfuse
