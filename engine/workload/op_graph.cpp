// ONNX -> OpGraph. Built from the protobuf directly, not from the Einsum Workload: the GET models
// need the operator type, padding and ONNX shapes of every node, and ops the Einsum importer
// represents as views (Flatten, Reshape) or folds (activations) must stay nodes here.
#include "engine/workload/op_graph.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

#include "engine/common/error.hpp"
#include "engine/workload/onnx_model.hpp"
#include "engine/workload/workload.hpp"

namespace mapfuse {

std::string_view to_string(OpClass c) {
  switch (c) {
    case OpClass::Conv: return "conv";
    case OpClass::DepthwiseConv: return "depthwise";
    case OpClass::Gemm: return "gemm";
    case OpClass::Pool: return "pool";
    case OpClass::GlobalPool: return "global_pool";
    case OpClass::Unary: return "unary";
    case OpClass::Binary: return "binary";
    case OpClass::Concat: return "concat";
    case OpClass::Pad: return "pad";
    case OpClass::Resize: return "resize";
    case OpClass::Reshape: return "reshape";
    case OpClass::Softmax: return "softmax";
  }
  return "?";
}

int64_t OpGraph::total_weight_elems() const {
  int64_t s = 0;
  for (const auto& n : nodes) s += n.weight_elems;
  return s;
}

int OpGraph::node_index(std::string_view n) const {
  for (int i = 0; i < size(); ++i)
    if (nodes[i].name == n) return i;
  return -1;
}

void finalize(OpGraph& g) {
  const int n = g.size();
  g.edges.clear();
  for (int v = 0; v < n; ++v) {
    auto& node = g.nodes[v];
    for (const auto& in : node.inputs) {
      if (in.producer >= v || in.producer < -1)
        throw InputError({}, "node '" + node.name + "'",
                         fmt::format("reads node {}; expected an earlier node (topological order)", in.producer));
      if (in.producer < 0) {
        if (in.net_input < 0 || in.net_input >= static_cast<int>(g.network_inputs.size()))
          throw InputError({}, "node '" + node.name + "'", "reads an unknown network input");
        continue;
      }
      g.edges.push_back({in.producer, v, g.nodes[in.producer].out.elems()});
    }
  }
  std::sort(g.edges.begin(), g.edges.end(),
            [](const OpEdge& a, const OpEdge& b) { return a.from != b.from ? a.from < b.from : a.to < b.to; });
  g.edges.erase(std::unique(g.edges.begin(), g.edges.end(),
                            [](const OpEdge& a, const OpEdge& b) { return a.from == b.from && a.to == b.to; }),
                g.edges.end());
  const int m = static_cast<int>(g.edges.size());
  g.succ_offset.assign(n + 1, 0);
  g.pred_offset.assign(n + 1, 0);
  for (const auto& e : g.edges) {
    ++g.succ_offset[e.from + 1];
    ++g.pred_offset[e.to + 1];
  }
  for (int v = 0; v < n; ++v) {
    g.succ_offset[v + 1] += g.succ_offset[v];
    g.pred_offset[v + 1] += g.pred_offset[v];
  }
  g.succ_node.assign(m, 0);
  g.succ_edge.assign(m, 0);
  g.pred_node.assign(m, 0);
  g.pred_edge.assign(m, 0);
  std::vector<int> sfill(g.succ_offset.begin(), g.succ_offset.end() - 1);
  std::vector<int> pfill(g.pred_offset.begin(), g.pred_offset.end() - 1);
  // Edges are sorted by (from, to): both adjacency lists come out ascending.
  for (int e = 0; e < m; ++e) {
    const auto& ed = g.edges[e];
    g.succ_node[sfill[ed.from]] = ed.to;
    g.succ_edge[sfill[ed.from]++] = e;
  }
  for (int e = 0; e < m; ++e) {
    const auto& ed = g.edges[e];
    g.pred_node[pfill[ed.to]] = ed.from;
    g.pred_edge[pfill[ed.to]++] = e;
  }
}

namespace {

using Dims = std::vector<int64_t>;

const std::set<std::string> kUnaryOps = {
    "Relu", "LeakyRelu", "PRelu", "Clip", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh", "Exp", "Log",
    "Sqrt", "Neg", "Abs", "Erf", "Gelu", "Softplus", "Softsign", "Selu", "Elu", "Celu", "Mish",
    "Reciprocal", "Floor", "Ceil", "Round", "Sign", "Silu", "Swish", "ThresholdedRelu", "Shrink",
    "BatchNormalization", "InstanceNormalization", "LayerNormalization", "LRN", "Cast",
    "QuantizeLinear", "DequantizeLinear", "LpNormalization", "MeanVarianceNormalization"};
const std::set<std::string> kBinaryOps = {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum",
                                          "Mean", "Where"};
const std::set<std::string> kReshapeOps = {"Flatten", "Reshape", "Squeeze", "Unsqueeze",
                                           "Transpose", "Identity", "Dropout"};
// Data movement that selects or repeats part of a tensor: nodes of class Reshape that are kept
// even without keep_reshapes (they change the volume). Split has one activation per output.
const std::set<std::string> kSelectOps = {"Split", "Slice", "Gather", "Expand", "Tile", "DepthToSpace",
                                          "SpaceToDepth"};
// Operators whose output is static (known before inference) even when they read an activation.
const std::set<std::string> kShapeOps = {"Shape", "Size", "ConstantOfShape", "Constant"};

std::vector<std::string> known_ops() {
  std::vector<std::string> v = {"Conv", "Gemm", "MatMul", "MaxPool", "AveragePool", "LpPool",
                                "GlobalAveragePool", "GlobalMaxPool", "Concat", "Pad", "Resize",
                                "Upsample", "Softmax", "LogSoftmax"};
  for (const auto* s : {&kUnaryOps, &kBinaryOps, &kReshapeOps, &kSelectOps, &kShapeOps}) v.insert(v.end(), s->begin(), s->end());
  return v;
}

Shape3 to_shape3(const Dims& d) {
  Shape3 s;
  if (d.empty()) return s;
  int64_t lead = 1;  // batch (taken into C when it is not 1)
  if (d.size() >= 3) {
    for (size_t i = 0; i + 3 < d.size(); ++i) lead *= d[i];
    s.c = d[d.size() - 3] * lead;
    s.h = d[d.size() - 2];
    s.w = d[d.size() - 1];
    if (d.size() == 3) {  // [N, C, L]: a 1-D map is one row
      s.c = d[1] * d[0];
      s.h = 1;
      s.w = d[2];
    }
  } else if (d.size() == 2) {
    s.c = d[0] * d[1];
  } else {
    s.c = d[0];
  }
  return s;
}

class Loader {
 public:
  Loader(std::string path, OpGraphOptions opt) : path_(std::move(path)), opt_(opt) {}

  OpGraph run() {
    read_onnx_model(path_, model_);
    const auto& gr = model_.graph();
    for (const auto& t : gr.initializer()) {
      int64_t v = 1;
      for (auto d : t.dims()) v *= d;
      const bool is_float = t.data_type() == onnx::TensorProto::FLOAT || t.data_type() == onnx::TensorProto::FLOAT16 ||
                            t.data_type() == onnx::TensorProto::DOUBLE || t.data_type() == onnx::TensorProto::BFLOAT16;
      static_elems_[t.name()] = is_float ? v : 0;
      dims_[t.name()] = Dims(t.dims().begin(), t.dims().end());
    }
    for (const auto& vi : gr.value_info()) record(vi);
    for (const auto& vi : gr.output()) record(vi);
    for (const auto& vi : gr.input()) {
      record(vi);
      if (static_elems_.count(vi.name())) continue;
      auto it = dims_.find(vi.name());
      if (it == dims_.end())
        throw InputError({path_, 0, 0}, "graph input '" + vi.name() + "'",
                         "has no tensor shape; expected a static shape such as [1, 3, 224, 224]");
      act_[vi.name()] = {-1, static_cast<int>(g_.network_inputs.size())};
      g_.network_inputs.push_back(to_shape3(it->second));
    }
    for (const auto& n : gr.node()) node(n);
    std::set<std::string> outs;
    for (const auto& vi : gr.output()) outs.insert(vi.name());
    for (const auto& o : outs) {
      auto it = act_.find(o);
      if (it != act_.end() && it->second.producer >= 0) g_.nodes[it->second.producer].is_output = true;
    }
    g_.name = std::filesystem::path(path_).stem().string();
    finalize(g_);
    return std::move(g_);
  }

 private:
  struct Act {
    int producer = -1, net_input = -1;
  };

  void record(const onnx::ValueInfoProto& vi) {
    if (auto d = onnx_static_shape(vi)) dims_[vi.name()] = *d;
  }

  [[noreturn]] void fail(const onnx::NodeProto& n, const std::string& msg) const {
    throw InputError({path_, 0, 0}, onnx_node_key(n), msg);
  }
  const Dims& dims(const onnx::NodeProto& n, const std::string& v) const {
    auto it = dims_.find(v);
    if (it == dims_.end())
      fail(n, "the shape of '" + v + "' is unknown; expected a model with static shapes (run ONNX shape inference)");
    return it->second;
  }
  static const onnx::AttributeProto* attr(const onnx::NodeProto& n, std::string_view name) {
    for (const auto& a : n.attribute())
      if (a.name() == name) return &a;
    return nullptr;
  }
  static std::vector<int64_t> ints(const onnx::NodeProto& n, std::string_view name) {
    const auto* a = attr(n, name);
    return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : std::vector<int64_t>{};
  }

  // Window attributes of Conv / pooling on a 1-D or 2-D NCHW input.
  void window(const onnx::NodeProto& n, OpNode& o, const Dims& x, const Dims& y, std::vector<int64_t> k) {
    const size_t nd = x.size() >= 2 ? x.size() - 2 : 0;
    if (nd < 1 || nd > 2) fail(n, "only 1-D and 2-D windows are supported; input shape has rank " + std::to_string(x.size()));
    if (k.size() != nd) fail(n, "kernel_shape does not match the input rank");
    auto st = ints(n, "strides");
    auto pads = ints(n, "pads");
    auto dil = ints(n, "dilations");
    if (st.empty()) st.assign(nd, 1);
    if (dil.empty()) dil.assign(nd, 1);
    for (size_t d = 0; d < nd; ++d) k[d] = dil[d] * (k[d] - 1) + 1;  // effective extent
    const auto* ap = attr(n, "auto_pad");
    const std::string auto_pad = ap ? ap->s() : "NOTSET";
    if (pads.empty() || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      pads.assign(2 * nd, 0);
      if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER")
        for (size_t d = 0; d < nd; ++d) {
          const int64_t total = std::max<int64_t>(0, (y[2 + d] - 1) * st[d] + k[d] - x[2 + d]);
          const int64_t small = total / 2, big = total - small;
          pads[d] = auto_pad == "SAME_UPPER" ? small : big;
          pads[d + nd] = total - pads[d];
        }
    }
    if (nd == 1) {  // a 1-D map is one row of width L
      o.kw = static_cast<int>(k[0]);
      o.sw = static_cast<int>(st[0]);
      o.pad_left = static_cast<int>(pads[0]);
      o.pad_right = static_cast<int>(pads[1]);
    } else {
      o.kh = static_cast<int>(k[0]);
      o.kw = static_cast<int>(k[1]);
      o.sh = static_cast<int>(st[0]);
      o.sw = static_cast<int>(st[1]);
      o.pad_top = static_cast<int>(pads[0]);
      o.pad_left = static_cast<int>(pads[1]);
      o.pad_bottom = static_cast<int>(pads[2]);
      o.pad_right = static_cast<int>(pads[3]);
    }
  }

  void node(const onnx::NodeProto& n) {
    const std::string& op = n.op_type();
    if (n.output_size() == 0) return;
    std::vector<std::string> acts, statics;
    for (int i = 0; i < n.input_size(); ++i) {
      const std::string& in = n.input(i);
      if (in.empty()) continue;
      if (act_.count(in)) acts.push_back(in);
      else if (static_elems_.count(in)) statics.push_back(in);
      else
        fail(n, "reads '" + in + "', which is neither a graph input, an initializer nor the output of an "
                "earlier node (the graph is truncated or not topologically sorted)");
    }
    if (acts.empty() || kShapeOps.count(op)) {
      // Static computation: Identity/Reshape of an initializer still carries its weights.
      const bool pass = (op == "Identity" || op == "Reshape" || op == "Squeeze" || op == "Unsqueeze" ||
                         op == "Transpose" || op == "Cast") && !statics.empty();
      for (const auto& o : n.output()) static_elems_[o] = pass ? static_elems_[statics[0]] : 0;
      return;
    }
    const bool multi = op == "Split";
    if (!multi)
      for (int i = 1; i < n.output_size(); ++i) static_elems_[n.output(i)] = 0;  // masks, indices
    const std::string& out = n.output(0);
    if (kReshapeOps.count(op) && !opt_.keep_reshapes) {
      act_[out] = act_[acts[0]];  // the consumer reads the producer's tensor
      return;
    }

    OpNode o;
    o.name = n.name().empty() ? out : n.name();
    o.op_type = op;
    for (const auto& a : acts) {
      const Act& src = act_.at(a);
      const Shape3 s = src.producer >= 0 ? g_.nodes[src.producer].out : g_.network_inputs[src.net_input];
      // The tensor as this node reads it (a Split part, or a reshaped view without reshape nodes).
      auto it = dims_.find(a);
      o.inputs.push_back({src.producer, src.net_input, it != dims_.end() ? to_shape3(it->second) : s});
    }
    // Constant operands of compute ops are weights; those of data movement are attributes.
    const bool moves = kReshapeOps.count(op) || kSelectOps.count(op) || op == "Pad" || op == "Resize" || op == "Upsample";
    if (!moves)
      for (const auto& s : statics) o.weight_elems += static_elems_.at(s);
    o.out = to_shape3(dims(n, out));

    if (op == "Conv") {
      const Dims& x = dims(n, acts[0]);
      const Dims& y = dims(n, out);
      auto k = ints(n, "kernel_shape");
      if (k.empty()) {
        if (n.input_size() < 2 || !dims_.count(n.input(1))) fail(n, "kernel_shape is missing and the weight shape is unknown");
        const Dims& w = dims_.at(n.input(1));
        k.assign(w.begin() + 2, w.end());
      }
      window(n, o, x, y, k);
      const auto* ga = attr(n, "group");
      o.groups = ga ? ga->i() : 1;
      o.depthwise = o.groups > 1 && o.groups == x[1] && y[1] == x[1];
      o.cls = o.depthwise ? OpClass::DepthwiseConv : OpClass::Conv;
      if (n.input_size() > 2 && !n.input(2).empty() && static_elems_.count(n.input(2)))
        o.bias_elems = static_elems_.at(n.input(2));
      if (acts.size() != 1) fail(n, "a convolution with an activation as its weight is not supported");
    } else if (op == "MaxPool" || op == "AveragePool" || op == "LpPool") {
      window(n, o, dims(n, acts[0]), dims(n, out), ints(n, "kernel_shape"));
      o.cls = OpClass::Pool;
    } else if (op == "GlobalAveragePool" || op == "GlobalMaxPool") {
      o.cls = OpClass::GlobalPool;
    } else if (op == "Gemm" || op == "MatMul") {
      o.cls = OpClass::Gemm;
      if (op == "Gemm" && n.input_size() > 2 && !n.input(2).empty() && static_elems_.count(n.input(2)))
        o.bias_elems = static_elems_.at(n.input(2));
    } else if (op == "Concat") {
      o.cls = OpClass::Concat;
    } else if (op == "Pad") {
      o.cls = OpClass::Pad;
    } else if (op == "Resize" || op == "Upsample") {
      o.cls = OpClass::Resize;
    } else if (op == "Softmax" || op == "LogSoftmax") {
      o.cls = OpClass::Softmax;
    } else if (kReshapeOps.count(op) || kSelectOps.count(op)) {
      o.cls = OpClass::Reshape;
    } else if (kUnaryOps.count(op)) {
      o.cls = OpClass::Unary;
    } else if (kBinaryOps.count(op)) {
      o.cls = acts.size() >= 2 ? OpClass::Binary : OpClass::Unary;
    } else {
      fail(n, "unsupported ONNX operator '" + op + "'" + did_you_mean(op, known_ops()) +
                  "; the operator graph reads Conv, Gemm, MatMul, pooling, global pooling, Concat, Pad, "
                  "Resize, Softmax, unary activations, element-wise binary ops and reshapes");
    }
    for (int i = 0; i < (multi ? n.output_size() : 1); ++i) act_[n.output(i)] = {static_cast<int>(g_.nodes.size()), -1};
    g_.nodes.push_back(std::move(o));
  }

  std::string path_;
  OpGraphOptions opt_;
  onnx::ModelProto model_;
  OpGraph g_;
  std::unordered_map<std::string, Dims> dims_;
  std::unordered_map<std::string, int64_t> static_elems_;  // static value -> float weight elements it carries
  std::unordered_map<std::string, Act> act_;
};

}  // namespace

OpGraph op_graph_from_workload(const Workload& w) {
  OpGraph g;
  g.name = w.name;
  std::vector<int> net_input(w.tensors.size(), -1);
  auto refuse = [&](const Einsum& e, const std::string& what) {
    return InputError({}, "einsum '" + e.name + "'",
                      what + "; the operator graph takes the zoo's CNN operators (conv, depthwise conv, "
                             "pool, element-wise, fully connected)");
  };
  for (const Einsum& e : w.einsums) {
    int64_t ext[kMaxRanks];
    for (size_t r = 0; r < e.ranks.size(); ++r) ext[r] = e.ranks[r].size;
    auto shape = [&](const TensorAccess& ta) {
      if (ta.dims.size() != 4) throw refuse(e, "tensor '" + ta.name + "' is not [N, C, H, W]");
      return Shape3{Einsum::dim_extent(ta.dims[1], ext), Einsum::dim_extent(ta.dims[2], ext),
                    Einsum::dim_extent(ta.dims[3], ext)};
    };
    auto rank = [&](const char* n) { return e.rank_index(n); };
    OpNode node;
    node.name = e.name;
    const TensorAccess& out = e.tensors[e.output_index()];
    node.out = shape(out);
    const TensorAccess* act = nullptr;  // the windowed input
    for (const TensorAccess& ta : e.tensors) {
      if (&ta == &out) continue;
      const TensorInfo& t = w.tensors[w.tensor_index(ta.name)];
      if (ta.role == TensorRole::Weight && t.producer < 0) {
        node.weight_elems += t.volume;
        continue;
      }
      OpInput in;
      in.producer = t.producer;
      if (t.producer >= 0) {
        in.shape = g.nodes[t.producer].out;
      } else {  // the zoo's input view includes the padding: take it off on both sides
        in.shape = shape(ta);
        in.shape.h = std::max<int64_t>(1, in.shape.h + 2 * ta.dim_offset(2));
        in.shape.w = std::max<int64_t>(1, in.shape.w + 2 * ta.dim_offset(3));
        const int ti = w.tensor_index(ta.name);
        if (net_input[ti] < 0) {
          net_input[ti] = static_cast<int>(g.network_inputs.size());
          g.network_inputs.push_back(in.shape);
        }
        in.net_input = net_input[ti];
      }
      node.inputs.push_back(in);
      act = &ta;
    }
    if (node.inputs.empty()) throw refuse(e, "reads no activation");
    // Window, stride and padding of a conv or pool from its input projection p*stride + r.
    auto window = [&](int R, int S, int P, int Q) {
      if (R < 0 || S < 0 || P < 0 || Q < 0) throw refuse(e, "has no R, S, P, Q ranks");
      node.kh = static_cast<int>(e.ranks[R].size);
      node.kw = static_cast<int>(e.ranks[S].size);
      for (const ProjectionTerm& t : act->dims[2])
        if (t.rank == P) node.sh = static_cast<int>(t.coeff);
      for (const ProjectionTerm& t : act->dims[3])
        if (t.rank == Q) node.sw = static_cast<int>(t.coeff);
      node.pad_top = static_cast<int>(-act->dim_offset(2));
      node.pad_left = static_cast<int>(-act->dim_offset(3));
      const Shape3& in = node.inputs.front().shape;
      node.pad_bottom = static_cast<int>(
          std::max<int64_t>(0, (node.out.h - 1) * node.sh + node.kh - in.h - node.pad_top));
      node.pad_right = static_cast<int>(
          std::max<int64_t>(0, (node.out.w - 1) * node.sw + node.kw - in.w - node.pad_left));
    };
    const int R = rank("R"), S = rank("S"), P = rank("P"), Q = rank("Q");
    switch (e.op) {
      case OpKind::Mac: {
        window(R, S, P, Q);
        const Shape3& in = node.inputs.front().shape;
        if (rank("K") < 0) {
          node.cls = OpClass::DepthwiseConv;
          node.op_type = "Conv";
          node.depthwise = true;
          node.groups = node.out.c;
        } else if (node.out.h == 1 && node.out.w == 1 && node.kh == in.h && node.kw == in.w) {
          node.cls = OpClass::Gemm;
          node.op_type = "Gemm";
          node.kh = node.kw = 1;
          node.pad_bottom = node.pad_right = 0;
        } else {
          node.cls = OpClass::Conv;
          node.op_type = "Conv";
        }
        break;
      }
      case OpKind::Pool: {
        window(R, S, P, Q);
        const Shape3& in = node.inputs.front().shape;
        const bool global = node.out.h == 1 && node.out.w == 1 && node.kh == in.h && node.kw == in.w;
        node.cls = global ? OpClass::GlobalPool : OpClass::Pool;
        node.op_type = global ? "GlobalAveragePool" : "MaxPool";
        if (global) node.kh = node.kw = 1;
        break;
      }
      case OpKind::Elementwise:
        node.cls = node.inputs.size() >= 2 ? OpClass::Binary : OpClass::Unary;
        node.op_type = node.inputs.size() >= 2 ? "Add" : "Relu";
        break;
      default: throw refuse(e, "is a " + std::string(to_string(e.op)) + " Einsum");
    }
    g.nodes.push_back(std::move(node));
  }
  for (const TensorInfo& t : w.tensors)
    if (t.producer >= 0 && t.consumers.empty()) g.nodes[t.producer].is_output = true;
  finalize(g);
  return g;
}

OpGraph load_op_graph(const std::string& onnx_path, const OpGraphOptions& options) {
  return Loader(onnx_path, options).run();
}

}  // namespace mapfuse
