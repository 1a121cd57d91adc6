#pragma once
// The operator graph of a network (GET-fusion's computational graph, docs/get.md): every ONNX
// operator that reads an activation is a node, numbered in the file's topological order (node
// index = topological label, so i < j for every edge (i, j)). Static computation (Constant,
// initializer aliases, Shape/Slice/Concat arithmetic on shapes) is folded into the attributes and
// weights of its consumer. Shapes are at batch 1 as (C, H, W); a 2-D [1, N] tensor is (N, 1, 1).
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace mapfuse {

struct Workload;

// What the buffer and DRAM models need to know about an operator.
enum class OpClass : uint8_t {
  Conv,           // dense or grouped convolution (weights reduce over input channels)
  DepthwiseConv,  // group == C_in == C_out: per-channel window, no channel reduction
  Gemm,           // Gemm / MatMul (a whole-input reduction)
  Pool,           // MaxPool / AveragePool / LpPool (windowed, no weights)
  GlobalPool,     // GlobalAveragePool / GlobalMaxPool (whole-map reduction to C x 1 x 1)
  Unary,          // Relu, Clip, Sigmoid, HardSigmoid, HardSwish, BatchNorm, ... (one input)
  Binary,         // Add / Mul / Sub / Div / ... with two or more activation inputs
  Concat,         // channel (or other axis) concatenation of activations
  Pad,            // explicit padding
  Resize,         // Resize / Upsample (needs its whole input, as the note's whole-map ops)
  Reshape,        // Flatten / Reshape / Squeeze / Unsqueeze / Transpose / Identity on activations,
                  // and data selection: Split (one node, one activation per output), Slice, Gather
  Softmax,        // Softmax / LogSoftmax
};
std::string_view to_string(OpClass c);

struct Shape3 {
  int64_t c = 1, h = 1, w = 1;
  int64_t elems() const { return c * h * w; }
  bool operator==(const Shape3&) const = default;
};

struct OpInput {
  int producer = -1;   // node index, or -1 for a network input
  int net_input = -1;  // index into OpGraph::network_inputs when producer == -1
  Shape3 shape;
};

struct OpNode {
  std::string name;     // ONNX node name (or its first output's name when unnamed)
  std::string op_type;  // ONNX op_type, e.g. "Conv", "HardSigmoid"
  OpClass cls = OpClass::Unary;
  std::vector<OpInput> inputs;  // activation inputs in ONNX operand order (static operands dropped)
  Shape3 out;
  int kh = 1, kw = 1, sh = 1, sw = 1;        // window and stride (1 for non-windowed ops)
  int pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
  int64_t groups = 1;
  bool depthwise = false;
  int64_t weight_elems = 0;  // elements of float initializers it reads (weights + bias)
  int64_t bias_elems = 0;    // the part of weight_elems that is a bias vector
  bool is_output = false;    // produces a network output

  bool windowed() const { return cls == OpClass::Conv || cls == OpClass::DepthwiseConv || cls == OpClass::Pool; }
};

struct OpEdge {
  int from = 0, to = 0;
  int64_t elems = 0;  // elements of the tensor `from` produces
};

struct OpGraph {
  std::string name;
  std::vector<OpNode> nodes;          // topological order
  std::vector<Shape3> network_inputs;
  std::vector<OpEdge> edges;          // sorted by (from, to); one edge per producer-consumer pair
  // CSR adjacency: node ids and edge ids, sorted ascending.
  std::vector<int> succ_offset, succ_node, succ_edge;
  std::vector<int> pred_offset, pred_node, pred_edge;

  int size() const { return static_cast<int>(nodes.size()); }
  std::span<const int> succs(int v) const {
    return {succ_node.data() + succ_offset[v], succ_node.data() + succ_offset[v + 1]};
  }
  std::span<const int> preds(int v) const {
    return {pred_node.data() + pred_offset[v], pred_node.data() + pred_offset[v + 1]};
  }
  std::span<const int> out_edges(int v) const {
    return {succ_edge.data() + succ_offset[v], succ_edge.data() + succ_offset[v + 1]};
  }
  std::span<const int> in_edges(int v) const {
    return {pred_edge.data() + pred_offset[v], pred_edge.data() + pred_offset[v + 1]};
  }
  int64_t total_weight_elems() const;
  int node_index(std::string_view name) const;  // -1 if absent
};

// Builds edges and the CSR arrays from nodes[].inputs; checks that producers precede consumers.
// For graphs built by hand (tests) and by load_op_graph.
void finalize(OpGraph& g);

struct OpGraphOptions {
  // Keep Flatten/Reshape/Squeeze/Unsqueeze/Transpose/Identity/Dropout on activations as nodes
  // (true: every ONNX operator is a node, the paper's computational graph).
  bool keep_reshapes = true;
};

// Reads an .onnx file (weights optional; shapes from ONNX shape inference). Throws InputError
// naming the file for an unreadable file, and the node and operator for an unsupported operator.
OpGraph load_op_graph(const std::string& onnx_path, const OpGraphOptions& options = {});

// The operator graph of a CNN workload built as the zoo builds them (engine/workload/zoo.hpp): one
// node per Einsum, in the workload's order. Convs (make_conv) are Conv, or Gemm when they reduce
// their whole input to 1x1 (the zoo's fully connected layers); depthwise convs DepthwiseConv; Pool
// Einsums Pool, or GlobalPool when the window covers the input; element-wise Einsums Binary (two
// or more activation inputs) or Unary. Activations and BatchNorm are folded in the zoo, so they are
// not nodes, unlike the ONNX graph of the same network. Throws InputError naming the Einsum for
// any other operator (matmuls over tokens, softmax, copies) or a tensor that is not [N, C, H, W].
OpGraph op_graph_from_workload(const Workload& w);

}  // namespace mapfuse
