#pragma once
// One Einsum: named ranks with sizes, and tensors whose dimensions are affine projections of the
// rank variables. A conv input row is the projection p*stride + r*dilation, so halos fall out of
// the projection and no layer type is special-cased downstream.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mapfuse {

// Fixed upper bounds let the cost model's evaluation plan use flat arrays only.
inline constexpr int kMaxRanks = 8;
inline constexpr int kMaxTensors = 4;
inline constexpr int kMaxTensorDims = 6;

enum class OpKind : uint8_t {
  Mac,          // multiply-accumulate over the reduction ranks (conv, matmul)
  Elementwise,  // one result per output point (add, mul, activation); runs on a vector unit
  Pool,         // reduction window without weights (max/avg pooling)
  Softmax,      // row-wise exponent-normalise; runs on a vector unit
  Copy,         // data movement only (layout change, concat slice)
};

// The role decides which memory levels may hold a tensor (architectures name roles, not tensors).
enum class TensorRole : uint8_t { Input, Weight, Output };

std::string_view to_string(OpKind k);
std::string_view to_string(TensorRole r);
OpKind op_kind_from_string(std::string_view s);  // throws InputError

struct ProjectionTerm {
  int rank = 0;        // index into Einsum::ranks
  int64_t coeff = 1;   // positive
};
// One tensor dimension: the sum of coeff * rank-variable over its terms.
using Projection = std::vector<ProjectionTerm>;

struct TensorAccess {
  std::string name;  // workload-wide tensor name; shared names connect Einsums
  TensorRole role = TensorRole::Input;
  std::vector<Projection> dims;
  int bits_per_value = 8;
  // Constant added to each dimension's projection (empty = all 0): a conv's leading padding
  // (-pad: output row 0 reads input rows -pad..) or a concat input's place along the concat axis.
  // Extents, and so the cost model, do not depend on it; tiling (tiles.hpp) uses it to place a
  // tile's window in the producer's coordinates, where coordinates outside the tensor are padding.
  std::vector<int64_t> offset;
  int64_t dim_offset(size_t d) const { return d < offset.size() ? offset[d] : 0; }
};

struct Rank {
  std::string name;
  int64_t size = 1;
};

struct Einsum {
  std::string name;
  OpKind op = OpKind::Mac;
  std::vector<Rank> ranks;
  std::vector<TensorAccess> tensors;  // inputs/weights first, the output last

  int rank_index(std::string_view rank_name) const;      // -1 if absent
  int tensor_index(std::string_view tensor_name) const;  // -1 if absent
  int output_index() const;                              // -1 if there is none
  // Product of all rank sizes (MACs for OpKind::Mac).
  int64_t operations() const;
  // Extent of one tensor dimension for the given rank extents (bounding box of the projection).
  static int64_t dim_extent(const Projection& p, const int64_t* rank_extent);
  // Number of values in the whole tensor.
  int64_t tensor_volume(int tensor) const;
  // Does rank r appear in any dimension of tensor t?
  bool rank_relevant(int tensor, int rank) const;
};

// Throws InputError when ranks are empty or non-positive, projections name unknown ranks,
// tensor names repeat, or there is not exactly one output. `where` prefixes messages.
void validate(const Einsum& e, std::string_view where = {});

// The ranks' names in order (for did_you_mean suggestions).
std::vector<std::string> rank_names(const Einsum& e);

// Do a and b pose the same mapping problem: the operator, the ranks (names: constraints and
// dataflows name them; sizes), and per tensor its role, width and projections? Einsum and tensor
// names and offsets are left out (the cost model does not read them), so a network's repeated
// layers compare equal.
bool same_mapping_problem(const Einsum& a, const Einsum& b);

// Conventional builders (Timeloop's cnn-layer semantics: P,Q are output sizes; input width is
// P*Wstride + R*Wdilation). Rank order R,S,P,Q,C,K,N (then G when grouped), as in Timeloop and
// DOSA; tensors Weights, Inputs, Outputs.
struct ConvShape {
  int64_t N = 1, K = 1, C = 1, P = 1, Q = 1, R = 1, S = 1;
  int64_t Wstride = 1, Hstride = 1, Wdilation = 1, Hdilation = 1;
  int64_t groups = 1;  // >1: grouped conv (G rank); C and K are per group
  // Leading padding of the input along the P and Q dimensions (TensorAccess::offset = -pad).
  int64_t Wpad = 0, Hpad = 0;
};
Einsum make_conv(std::string name, const ConvShape& s, std::string input = "Inputs",
                 std::string weight = "Weights", std::string output = "Outputs");
// Depthwise conv: one filter per channel, rank C shared by input, weight and output.
Einsum make_depthwise_conv(std::string name, const ConvShape& s, std::string input,
                           std::string weight, std::string output);
// Out[m,n] = A[m,k] * B[k,n] with ranks M,N,K (B is the weight role).
Einsum make_matmul(std::string name, int64_t M, int64_t N, int64_t K, std::string a = "A",
                   std::string b = "B", std::string out = "Z");

}  // namespace mapfuse
