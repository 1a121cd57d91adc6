// ONNX -> Workload. Operator coverage and conventions are documented in docs/workloads.md.
//
// Values are either *static* (initializers, Constant outputs and everything computed only from
// them, plus Shape/Size outputs) or *activations* (derived from a non-initializer graph input).
// Static values never become Einsums; they are the weight operands of the Einsums that read them.
// Each activation is a View of a workload tensor: shape-only operators (Reshape, Flatten,
// Squeeze, Unsqueeze, Transpose, Identity, ...) change the view, not the tensor, and a consumer's
// projections are rewritten through the view (a merged dimension splits the consumer's rank; a
// split dimension becomes an affine projection such as h*128+e).
#include "engine/workload/onnx_import.hpp"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <numeric>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine/common/error.hpp"
#include "engine/workload/onnx_model.hpp"

namespace mapfuse {
namespace {

using Shape = std::vector<int64_t>;

std::string shape_str(const Shape& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

int64_t volume(const Shape& s) {
  int64_t v = 1;
  for (int64_t d : s) v *= d;
  return v;
}

// A view of a workload tensor. The tensor's dimensions ("canonical") and the view's dimensions
// ("logical") are both products of factors (sizes > 1; size-1 dimensions have no factor).
struct View {
  std::string tensor;
  Shape shape;                              // logical shape
  std::vector<int64_t> factors;             // factor sizes
  std::vector<std::vector<int>> canon;      // per tensor dimension: factor ids, major first
  std::vector<std::vector<int>> logical;    // per view dimension: factor ids, major first

  static View identity(std::string tensor, const Shape& shape) {
    View v;
    v.tensor = std::move(tensor);
    v.shape = shape;
    for (int64_t d : shape) {
      std::vector<int> g;
      if (d > 1) {
        g.push_back(static_cast<int>(v.factors.size()));
        v.factors.push_back(d);
      }
      v.canon.push_back(g);
      v.logical.push_back(g);
    }
    return v;
  }

  // Row-major reshape to `to` (same volume). False when the reshape mixes factors in a way that
  // no affine projection can express (e.g. [6,4] -> [4,6]).
  bool reshape(const Shape& to) {
    std::vector<int> seq;
    for (const auto& g : logical) seq.insert(seq.end(), g.begin(), g.end());
    std::vector<std::vector<int>> out;
    size_t pos = 0;
    for (int64_t s : to) {
      std::vector<int> g;
      int64_t p = 1;
      while (p < s) {
        if (pos >= seq.size()) return false;
        const int f = seq[pos];
        const int64_t fs = factors[f];
        if (s % (p * fs) == 0) {
          g.push_back(f);
          p *= fs;
          ++pos;
        } else if (s % p == 0 && fs % (s / p) == 0) {
          // Split factor f into a major part (taken now) and a minor part (left in the sequence).
          const int64_t major = s / p, minor = fs / major;
          const int a = static_cast<int>(factors.size());
          factors.push_back(major);
          const int b = static_cast<int>(factors.size());
          factors.push_back(minor);
          for (auto& cg : canon) {
            auto it = std::find(cg.begin(), cg.end(), f);
            if (it != cg.end()) {
              *it = b;
              cg.insert(it, a);
            }
          }
          seq[pos] = b;
          g.push_back(a);
          p *= major;
        } else {
          return false;
        }
      }
      if (p != s) return false;
      out.push_back(g);
    }
    if (pos != seq.size()) return false;
    logical = std::move(out);
    shape = to;
    return true;
  }

  void transpose(const std::vector<int64_t>& perm) {
    std::vector<std::vector<int>> l;
    Shape s;
    for (int64_t p : perm) {
      l.push_back(logical[p]);
      s.push_back(shape[p]);
    }
    logical = std::move(l);
    shape = std::move(s);
  }
};

const std::set<std::string> kUnary = {
    "Relu",      "LeakyRelu", "PRelu",    "Clip",       "Sigmoid",  "HardSigmoid", "HardSwish",
    "Tanh",      "Exp",       "Log",      "Sqrt",       "Neg",      "Abs",         "Erf",
    "Gelu",      "Softplus",  "Softsign", "Selu",       "Elu",      "Celu",        "Mish",
    "Reciprocal", "Floor",    "Ceil",     "Round",      "Sign",     "Sin",         "Cos",
    "BatchNormalization", "InstanceNormalization", "LayerNormalization", "LRN",
    "Cast",      "QuantizeLinear", "DequantizeLinear", "Not", "IsNaN", "Silu", "Swish",
    "LpNormalization", "MeanVarianceNormalization", "ThresholdedRelu", "Shrink"};
const std::set<std::string> kBinary = {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min",
                                       "Sum", "Mean", "And", "Or", "Xor", "Equal", "Less",
                                       "Greater", "Where", "Mod"};
const std::set<std::string> kAlias = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose",
                                      "Identity", "Dropout"};

std::vector<std::string> supported_ops() {
  std::vector<std::string> v = {"Conv", "QLinearConv", "Gemm", "MatMul", "QLinearMatMul",
                                "MaxPool", "AveragePool", "LpPool", "GlobalAveragePool",
                                "GlobalMaxPool", "QLinearGlobalAveragePool", "Softmax",
                                "LogSoftmax", "Concat", "Pad", "Resize", "Upsample", "Constant", "Shape",
                                "Size"};
  v.insert(v.end(), kUnary.begin(), kUnary.end());
  v.insert(v.end(), kBinary.begin(), kBinary.end());
  v.insert(v.end(), kAlias.begin(), kAlias.end());
  return v;
}

class Importer {
 public:
  Importer(std::string path, OnnxOptions opt) : path_(std::move(path)), opt_(opt) {}

  Workload run() {
    load();
    const auto& g = model_.graph();
    for (const auto& t : g.initializer()) {
      static_.insert(t.name());
      shapes_[t.name()] = Shape(t.dims().begin(), t.dims().end());
      if (auto v = onnx_tensor_ints(t)) ints_[t.name()] = *v;
    }
    for (const auto& vi : g.value_info()) record_shape(vi);
    for (const auto& vi : g.output()) record_shape(vi);
    for (const auto& vi : g.input()) {
      record_shape(vi);
      if (static_.count(vi.name())) continue;
      auto it = shapes_.find(vi.name());
      if (it == shapes_.end())
        throw InputError({path_, 0, 0}, "graph input '" + vi.name() + "'",
                         "has no tensor shape; expected a static shape such as [1, 3, 224, 224]");
      views_[vi.name()] = View::identity(vi.name(), it->second);
    }
    for (int i = 0; i < g.node_size(); ++i) node(g.node(i), i);
    w_.name = std::filesystem::path(path_).stem().string();
    try {
      finalize(w_);
    } catch (const InputError& e) {
      throw InputError({path_, 0, 0}, e.key(), e.message());
    }
    return std::move(w_);
  }

 private:
  void load() { read_onnx_model(path_, model_); }

  void record_shape(const onnx::ValueInfoProto& vi) {
    if (auto d = onnx_static_shape(vi)) shapes_[vi.name()] = *d;
  }

  [[noreturn]] void fail(const onnx::NodeProto& n, const std::string& msg) const {
    throw InputError({path_, 0, 0}, onnx_node_key(n), msg);
  }

  static const onnx::AttributeProto* attr(const onnx::NodeProto& n, std::string_view name) {
    for (const auto& a : n.attribute())
      if (a.name() == name) return &a;
    return nullptr;
  }
  static int64_t attr_i(const onnx::NodeProto& n, std::string_view name, int64_t def) {
    const auto* a = attr(n, name);
    return a ? a->i() : def;
  }
  static std::vector<int64_t> attr_ints(const onnx::NodeProto& n, std::string_view name,
                                        std::vector<int64_t> def = {}) {
    const auto* a = attr(n, name);
    if (!a) return def;
    return {a->ints().begin(), a->ints().end()};
  }
  static std::string attr_s(const onnx::NodeProto& n, std::string_view name, std::string def = {}) {
    const auto* a = attr(n, name);
    return a ? a->s() : def;
  }

  bool is_act(const std::string& v) const { return views_.count(v) > 0; }
  const View& act(const onnx::NodeProto& n, const std::string& v) const {
    auto it = views_.find(v);
    if (it == views_.end()) fail(n, "input '" + v + "' is not an activation tensor");
    return it->second;
  }
  Shape shape_of(const onnx::NodeProto& n, const std::string& v) const {
    if (auto it = views_.find(v); it != views_.end()) return it->second.shape;
    if (auto it = shapes_.find(v); it != shapes_.end()) return it->second;
    fail(n, "the shape of input '" + v + "' is unknown (no initializer dims, value_info or "
            "inferable shape); expected a model with static shapes");
  }
  std::optional<Shape> inferred(const std::string& v) const {
    auto it = shapes_.find(v);
    if (it == shapes_.end()) return std::nullopt;
    return it->second;
  }

  std::string unique_einsum_name(const onnx::NodeProto& n) {
    std::string base = n.name().empty() ? n.op_type() + ":" + n.output(0) : n.name();
    std::string name = base;
    for (int k = 2; used_names_.count(name); ++k) name = base + "#" + std::to_string(k);
    used_names_.insert(name);
    return name;
  }

  void set_output(const onnx::NodeProto& n, const std::string& out, const Shape& s) {
    if (auto inf = inferred(out); inf && volume(*inf) == volume(s) && *inf != s &&
                                  inf->size() == s.size())
      fail(n, "ONNX shape inference gives " + shape_str(*inf) + " for output '" + out +
                  "' but the operator's attributes give " + shape_str(s));
    views_[out] = View::identity(out, s);
    shapes_[out] = s;
  }

  // Substitute rank r by sub-ranks (r keeps the major part; the others are appended).
  static std::vector<int> split_rank(Einsum& e, int r, const std::vector<int64_t>& sizes,
                                     std::vector<Projection>& extra) {
    std::vector<int> ids = {r};
    const std::string base = e.ranks[r].name;
    e.ranks[r] = {base + "0", sizes[0]};
    for (size_t j = 1; j < sizes.size(); ++j) {
      ids.push_back(static_cast<int>(e.ranks.size()));
      e.ranks.push_back({base + std::to_string(j), sizes[j]});
    }
    std::vector<int64_t> stride(sizes.size(), 1);
    for (int j = static_cast<int>(sizes.size()) - 2; j >= 0; --j) stride[j] = stride[j + 1] * sizes[j + 1];
    auto subst = [&](Projection& p) {
      Projection q;
      for (const auto& t : p) {
        if (t.rank != r) {
          q.push_back(t);
          continue;
        }
        for (size_t j = 0; j < ids.size(); ++j) q.push_back({ids[j], t.coeff * stride[j]});
      }
      p = std::move(q);
    };
    for (auto& t : e.tensors)
      for (auto& d : t.dims) subst(d);
    for (auto& p : extra) subst(p);
    return ids;
  }

  // Rewrite tensor t of e (built with projections over the view's logical dimensions) so that it
  // indexes the view's underlying tensor.
  void apply_view(const onnx::NodeProto& n, Einsum& e, int t, const View& v) {
    if (e.tensors[t].dims.size() != v.shape.size())
      fail(n, fmt::format("internal: operand has {} dimensions but its view {}", e.tensors[t].dims.size(),
                          shape_str(v.shape)));
    if (v.canon == v.logical) {  // the tensor as produced: projections stay as built
      e.tensors[t].name = v.tensor;
      return;
    }
    // A shift (padding, concat place) carries over to the canonical dimension a logical dimension
    // is, one to one; a shift on a merged or split dimension has no affine form.
    std::vector<int64_t> canon_offset;
    if (!e.tensors[t].offset.empty()) {
      canon_offset.assign(v.canon.size(), 0);
      for (size_t i = 0; i < v.logical.size(); ++i) {
        const int64_t off = e.tensors[t].offset[i];
        if (off == 0) continue;
        size_t c = v.canon.size();
        for (size_t j = 0; j < v.canon.size(); ++j)
          if (v.logical[i].size() == 1 && v.canon[j] == v.logical[i]) c = j;
        if (c == v.canon.size())
          fail(n, "a padded or shifted window over the reshaped operand '" + v.tensor +
                      "' is not supported (the shifted dimension is merged or split)");
        canon_offset[c] = off;
      }
    }
    std::vector<Projection> fproj(v.factors.size());
    for (size_t i = 0; i < v.logical.size(); ++i) {
      const auto& grp = v.logical[i];
      if (grp.empty()) continue;
      if (grp.size() == 1) {
        fproj[grp[0]] = e.tensors[t].dims[i];
        continue;
      }
      std::vector<int64_t> sizes;
      for (int f : grp) sizes.push_back(v.factors[f]);
      Projection p = e.tensors[t].dims[i];
      if (p.size() == 1 && p[0].coeff == 1 && e.ranks[p[0].rank].size == v.shape[i]) {
        auto ids = split_rank(e, p[0].rank, sizes, fproj);
        for (size_t j = 0; j < grp.size(); ++j) fproj[grp[j]] = {{ids[j], 1}};
        continue;
      }
      // Already split by another operand: accept when the terms are exactly these factors.
      std::sort(p.begin(), p.end(), [](auto& a, auto& b) { return a.coeff > b.coeff; });
      bool ok = p.size() == sizes.size();
      int64_t stride = 1;
      for (int j = static_cast<int>(sizes.size()) - 1; ok && j >= 0; --j) {
        ok = e.ranks[p[j].rank].size == sizes[j] && p[j].coeff == stride;
        stride *= sizes[j];
      }
      if (!ok)
        fail(n, "the reshaped operand '" + v.tensor + "' (viewed as " + shape_str(v.shape) +
                    ") cannot be indexed by an affine projection in this operator");
      for (size_t j = 0; j < grp.size(); ++j) fproj[grp[j]] = {{p[j].rank, 1}};
    }
    std::vector<Projection> dims;
    for (const auto& grp : v.canon) {
      Projection p;
      int64_t stride = 1;
      for (int j = static_cast<int>(grp.size()) - 1; j >= 0; --j) {
        for (auto term : fproj[grp[j]]) {
          term.coeff *= stride;
          p.push_back(term);
        }
        stride *= v.factors[grp[j]];
      }
      dims.push_back(std::move(p));
    }
    e.tensors[t].dims = std::move(dims);
    e.tensors[t].offset = std::move(canon_offset);
    e.tensors[t].name = v.tensor;
  }

  // Add an Einsum; `views[i]` (when set) is the view of tensor i.
  void add(const onnx::NodeProto& n, Einsum e, const std::vector<const View*>& views) {
    for (size_t i = 0; i < views.size(); ++i)
      if (views[i]) apply_view(n, e, static_cast<int>(i), *views[i]);
    try {
      validate(e);
    } catch (const InputError& err) {
      fail(n, err.message());
    }
    w_.einsums.push_back(std::move(e));
  }

  static std::vector<std::string> generic_rank_names(size_t n) {
    if (n == 4) return {"N", "C", "H", "W"};
    std::vector<std::string> v;
    for (size_t i = 0; i < n; ++i) v.push_back("D" + std::to_string(i));
    return v;
  }

  // Einsum over an output shape: every operand indexed by the output ranks (right-aligned,
  // broadcast dimensions dropped).
  Einsum pointwise(const onnx::NodeProto& n, OpKind op, const Shape& out,
                   const std::vector<std::string>& operands, std::vector<const View*>& views,
                   const std::string& out_name) {
    Einsum e;
    e.name = unique_einsum_name(n);
    e.op = op;
    auto names = generic_rank_names(out.size());
    for (size_t i = 0; i < out.size(); ++i) e.ranks.push_back({names[i], out[i]});
    std::set<std::string> seen;
    for (const auto& o : operands) {
      const View* v = is_act(o) ? &views_.at(o) : nullptr;
      const std::string tname = v ? v->tensor : o;
      if (!seen.insert(tname).second) continue;
      Shape s = shape_of(n, o);
      TensorAccess ta{o, v ? TensorRole::Input : TensorRole::Weight, {}, 8};
      const size_t off = out.size() - s.size();
      for (size_t d = 0; d < s.size(); ++d) {
        if (s[d] == out[off + d]) ta.dims.push_back({{static_cast<int>(off + d), 1}});
        else ta.dims.push_back({});
      }
      e.tensors.push_back(std::move(ta));
      views.push_back(v);
    }
    TensorAccess o{out_name, TensorRole::Output, {}, 8};
    for (size_t d = 0; d < out.size(); ++d) o.dims.push_back({{static_cast<int>(d), 1}});
    e.tensors.push_back(std::move(o));
    views.push_back(nullptr);
    if (e.tensors.size() > static_cast<size_t>(kMaxTensors))
      fail(n, fmt::format("has {} distinct operands; at most {} are supported", e.tensors.size() - 1,
                          kMaxTensors - 1));
    return e;
  }

  static int64_t norm_axis(int64_t a, size_t rank) { return a < 0 ? a + static_cast<int64_t>(rank) : a; }

  void node(const onnx::NodeProto& n, int index) {
    const std::string& op = n.op_type();
    if (n.output_size() == 0) return;
    std::vector<std::string> acts;
    for (const auto& in : n.input()) {
      if (in.empty()) continue;
      if (is_act(in)) acts.push_back(in);
      else if (!static_.count(in))
        fail(n, "reads '" + in + "', which is neither a graph input, an initializer nor the "
                "output of an earlier node (the graph is truncated or not topologically sorted)");
    }
    if (op == "Shape" || op == "Size" || op == "Constant" || op == "ConstantOfShape" || acts.empty()) {
      // Static computation (shape arithmetic, constants, weight preprocessing).
      for (const auto& o : n.output()) static_.insert(o);
      if (op == "Constant") {
        if (const auto* a = attr(n, "value")) {
          shapes_[n.output(0)] = Shape(a->t().dims().begin(), a->t().dims().end());
          if (auto v = onnx_tensor_ints(a->t())) ints_[n.output(0)] = *v;
        } else if (const auto* a2 = attr(n, "value_ints")) {
          ints_[n.output(0)] = {a2->ints().begin(), a2->ints().end()};
          shapes_[n.output(0)] = {static_cast<int64_t>(a2->ints_size())};
        }
      } else if (op == "Unsqueeze" || op == "Squeeze" || op == "Identity" || op == "Reshape") {
        // Weight preprocessing keeps data when the element count is preserved (e.g. BN params).
        if (n.input_size() > 0 && ints_.count(n.input(0))) ints_[n.output(0)] = ints_[n.input(0)];
      }
      return;
    }
    const std::string& out = n.output(0);
    for (int i = 1; i < n.output_size(); ++i) static_.insert(n.output(i));  // masks, BN stats

    if (op == "Conv" || op == "QLinearConv") return conv(n, op == "QLinearConv");
    if (op == "Gemm") return gemm(n);
    if (op == "MatMul" || op == "QLinearMatMul") return matmul(n, op == "QLinearMatMul");
    if (op == "MaxPool" || op == "AveragePool" || op == "LpPool") return pool(n, false);
    if (op == "GlobalAveragePool" || op == "GlobalMaxPool" || op == "GlobalLpPool" ||
        op == "QLinearGlobalAveragePool")
      return pool(n, true);
    if (op == "Softmax" || op == "LogSoftmax") {
      const View& v = act(n, n.input(0));
      std::vector<const View*> views;
      Einsum e = pointwise(n, OpKind::Softmax, v.shape, {n.input(0)}, views, out);
      add(n, std::move(e), views);
      set_output(n, out, v.shape);
      return;
    }
    if (op == "Concat") return concat(n);
    if (op == "Pad") return pad(n);
    if (kUnary.count(op) || ((kBinary.count(op) || op == "PRelu") && acts.size() == 1)) {
      const View& v = act(n, acts[0]);
      Shape outs = v.shape;
      for (const auto& in : n.input())
        if (!in.empty() && kBinary.count(op)) {
          Shape s = shape_of(n, in);
          outs = broadcast(n, outs, s);
        }
      if (opt_.fold_unary && !opt_.keep_all_ops && outs == v.shape) {
        views_[out] = v;
        shapes_[out] = v.shape;
        return;
      }
      std::vector<std::string> operands = {acts[0]};
      if (kBinary.count(op))
        for (const auto& in : n.input())
          if (!in.empty() && in != acts[0]) operands.push_back(in);
      std::vector<const View*> views;
      Einsum e = pointwise(n, OpKind::Elementwise, outs, operands, views, out);
      add(n, std::move(e), views);
      set_output(n, out, outs);
      return;
    }
    if (kBinary.count(op)) {
      Shape outs;
      std::vector<std::string> operands;
      for (const auto& in : n.input()) {
        if (in.empty()) continue;
        outs = broadcast(n, outs, shape_of(n, in));
        operands.push_back(in);
      }
      std::vector<const View*> views;
      Einsum e = pointwise(n, OpKind::Elementwise, outs, operands, views, out);
      add(n, std::move(e), views);
      set_output(n, out, outs);
      return;
    }
    if (op == "Resize" || op == "Upsample") return resize(n);
    if (kAlias.count(op) || op == "Cast") return alias(n);
    (void)index;
    std::string ops;
    for (const auto& s : supported_ops()) ops += (ops.empty() ? "" : ", ") + s;
    fail(n, "unsupported ONNX operator '" + op + "'" + did_you_mean(op, supported_ops()) +
                "; supported: " + ops);
  }

  Shape broadcast(const onnx::NodeProto& n, const Shape& a, const Shape& b) const {
    Shape r(std::max(a.size(), b.size()), 1);
    for (size_t i = 0; i < r.size(); ++i) {
      int64_t x = i < r.size() - a.size() ? 1 : a[i - (r.size() - a.size())];
      int64_t y = i < r.size() - b.size() ? 1 : b[i - (r.size() - b.size())];
      if (x != y && x != 1 && y != 1)
        fail(n, "operands " + shape_str(a) + " and " + shape_str(b) + " do not broadcast");
      r[i] = std::max(x, y);
    }
    return r;
  }

  void alias(const onnx::NodeProto& n) {
    const std::string& op = n.op_type();
    const std::string& out = n.output(0);
    View v = act(n, n.input(0));
    const Shape in = v.shape;
    std::optional<Shape> to;
    if (op == "Transpose") {
      std::vector<int64_t> perm = attr_ints(n, "perm");
      if (perm.empty())
        for (int64_t i = static_cast<int64_t>(in.size()) - 1; i >= 0; --i) perm.push_back(i);
      if (perm.size() != in.size()) fail(n, "perm has the wrong length for input " + shape_str(in));
      v.transpose(perm);
      return alias_result(n, out, v);
    }
    if (op == "Flatten") {
      int64_t axis = norm_axis(attr_i(n, "axis", 1), in.size());
      Shape s = {1, 1};
      for (size_t i = 0; i < in.size(); ++i) s[static_cast<int64_t>(i) < axis ? 0 : 1] *= in[i];
      to = s;
    } else if (op == "Squeeze" || op == "Unsqueeze") {
      std::vector<int64_t> axes = attr_ints(n, "axes");
      if (axes.empty() && n.input_size() > 1 && ints_.count(n.input(1))) axes = ints_[n.input(1)];
      if (op == "Squeeze") {
        Shape s;
        for (size_t i = 0; i < in.size(); ++i) {
          bool drop = axes.empty() ? in[i] == 1
                                   : std::any_of(axes.begin(), axes.end(), [&](int64_t a) {
                                       return norm_axis(a, in.size()) == static_cast<int64_t>(i);
                                     });
          if (!drop) s.push_back(in[i]);
        }
        to = s;
      } else if (!axes.empty()) {
        const size_t r = in.size() + axes.size();
        Shape s(r, 0);
        for (int64_t a : axes) s[norm_axis(a, r)] = 1;
        size_t k = 0;
        for (auto& d : s)
          if (d == 0) d = in[k++];
        to = s;
      }
    } else if (op == "Reshape") {
      if (auto inf = inferred(out)) to = inf;
      else if (n.input_size() > 1 && ints_.count(n.input(1))) {
        Shape s = ints_[n.input(1)];
        int64_t known = 1, neg = -1;
        for (size_t i = 0; i < s.size(); ++i) {
          if (s[i] == 0 && i < in.size()) s[i] = in[i];
          if (s[i] == -1) neg = static_cast<int64_t>(i);
          else known *= s[i];
        }
        if (neg >= 0) s[neg] = volume(in) / known;
        to = s;
      }
    } else {
      to = in;  // Identity, Dropout, Cast
    }
    if (!to) {
      if (auto inf = inferred(out)) to = inf;
      else fail(n, "cannot determine the output shape (no shape data and no inferred shape)");
    }
    if (volume(*to) != volume(in))
      fail(n, "reshapes " + shape_str(in) + " to " + shape_str(*to) + ", which has a different size");
    if (!v.reshape(*to))
      fail(n, "reshape from " + shape_str(in) + " to " + shape_str(*to) +
                  " mixes dimensions in a way no affine projection expresses; supported: merging "
                  "or splitting adjacent dimensions, and transposes");
    alias_result(n, out, v);
  }

  // A shape-only operator's output: a view of its input, or (keep_all_ops) a Copy Einsum that
  // reads the input through that view.
  void alias_result(const onnx::NodeProto& n, const std::string& out, const View& v) {
    if (!opt_.keep_all_ops) {
      views_[out] = v;
      shapes_[out] = v.shape;
      return;
    }
    const std::string tmp = out + "#view";
    views_[tmp] = v;
    std::vector<const View*> views;
    Einsum e = pointwise(n, OpKind::Copy, v.shape, {tmp}, views, out);
    add(n, std::move(e), views);
    views_.erase(tmp);
    set_output(n, out, v.shape);
  }

  // Resize: a Copy Einsum over the output. An integer upsampling factor f splits the output rank
  // into (input index, phase), so the input is read at o / f; a size-1 input dimension is
  // broadcast. Other factors (DeepLabV3's final 33 -> 513) have no affine projection.
  void resize(const onnx::NodeProto& n) {
    const View& v = act(n, n.input(0));
    const auto outs = inferred(n.output(0));
    if (!outs || outs->size() != v.shape.size())
      fail(n, "the output shape is unknown; expected static sizes (a constant or Shape/Slice/Concat arithmetic)");
    Einsum e;
    e.name = unique_einsum_name(n);
    e.op = OpKind::Copy;
    const auto names = generic_rank_names(outs->size());
    TensorAccess in{n.input(0), TensorRole::Input, {}, 8};
    TensorAccess o{n.output(0), TensorRole::Output, {}, 8};
    for (size_t d = 0; d < outs->size(); ++d) {
      const int64_t a = v.shape[d], b = (*outs)[d];
      const int r = static_cast<int>(e.ranks.size());
      if (a == b || a == 1) {
        e.ranks.push_back({names[d], b});
        in.dims.push_back(a == b ? Projection{{r, 1}} : Projection{});
        o.dims.push_back({{r, 1}});
      } else if (b % a == 0) {
        e.ranks.push_back({names[d], a});
        e.ranks.push_back({names[d] + "f", b / a});
        in.dims.push_back({{r, 1}});
        o.dims.push_back({{r, b / a}, {r + 1, 1}});
      } else {
        fail(n, fmt::format("resizes dimension {} from {} to {}, which is not an integer upsampling; no "
                            "affine projection reads its input (the operator graph, load_op_graph, reads it)",
                            d, a, b));
      }
    }
    e.tensors = {std::move(in), std::move(o)};
    add(n, std::move(e), {&v, nullptr});
    set_output(n, n.output(0), *outs);
  }

  struct Window {
    std::vector<int64_t> k, stride, dil, out;
    std::vector<int64_t> pad_begin;  // leading padding per spatial dimension
  };
  Window window(const onnx::NodeProto& n, const Shape& x, const std::vector<int64_t>& kernel,
                bool ceil_mode) const {
    const size_t nd = x.size() - 2;
    Window w;
    w.k = kernel;
    w.stride = attr_ints(n, "strides", std::vector<int64_t>(nd, 1));
    w.dil = attr_ints(n, "dilations", std::vector<int64_t>(nd, 1));
    std::vector<int64_t> pads = attr_ints(n, "pads", std::vector<int64_t>(2 * nd, 0));
    const std::string auto_pad = attr_s(n, "auto_pad", "NOTSET");
    if (w.k.size() != nd || w.stride.size() != nd || w.dil.size() != nd || pads.size() != 2 * nd)
      fail(n, fmt::format("kernel_shape/strides/dilations/pads do not match a {}-D input {}", nd,
                          shape_str(x)));
    for (size_t d = 0; d < nd; ++d) {
      const int64_t in = x[2 + d], eff = w.dil[d] * (w.k[d] - 1) + 1;
      if (w.stride[d] <= 0 || w.dil[d] <= 0 || w.k[d] <= 0)
        fail(n, "kernel_shape, strides and dilations must be positive");
      int64_t o, pb = 0;
      if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
        o = (in + w.stride[d] - 1) / w.stride[d];
        // ONNX: the odd one of the total padding goes to the end (UPPER) or the beginning (LOWER).
        const int64_t total = std::max<int64_t>(0, (o - 1) * w.stride[d] + eff - in);
        pb = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      } else if (auto_pad == "VALID") {
        o = (in - eff) / w.stride[d] + 1;
      } else {
        const int64_t span = in + pads[d] + pads[d + nd] - eff;
        o = (ceil_mode ? (span + w.stride[d] - 1) / w.stride[d] : span / w.stride[d]) + 1;
        pb = pads[d];
      }
      w.pad_begin.push_back(pb);
      if (o <= 0) fail(n, "the window does not fit the input " + shape_str(x));
      w.out.push_back(o);
    }
    return w;
  }

  void conv(const onnx::NodeProto& n, bool qlinear) {
    const std::string& x = n.input(0);
    const std::string& wname = n.input(qlinear ? 3 : 1);
    const View& xv = act(n, x);
    const Shape xs = xv.shape;
    if (xs.size() != 3 && xs.size() != 4)
      fail(n, "only 1-D and 2-D convolutions are supported; input is " + shape_str(xs));
    const size_t nd = xs.size() - 2;
    std::optional<Shape> ws = is_act(wname) ? std::optional<Shape>(views_.at(wname).shape) : inferred(wname);
    std::vector<int64_t> kernel = attr_ints(n, "kernel_shape");
    if (kernel.empty() && ws && ws->size() == xs.size()) kernel.assign(ws->begin() + 2, ws->end());
    if (kernel.empty()) fail(n, "kernel_shape is missing and the weight shape is unknown");
    const int64_t group = attr_i(n, "group", 1);
    int64_t K = 0;
    if (ws && !ws->empty()) K = (*ws)[0];
    else if (auto o = inferred(n.output(0)); o && o->size() > 1) K = (*o)[1];
    else fail(n, "cannot determine the number of output channels (weight shape unknown)");
    const int64_t C = xs[1];
    if (group <= 0 || C % group != 0 || K % group != 0)
      fail(n, fmt::format("group {} does not divide input channels {} and output channels {}", group, C, K));
    if (ws && ws->size() > 1 && (*ws)[1] != C / group)
      fail(n, fmt::format("weight {} expects {} input channels per group but the input has {} / group {}",
                          shape_str(*ws), (*ws)[1], C, group));
    Window win = window(n, xs, kernel, false);
    ConvShape s;
    s.N = xs[0];
    s.P = win.out[0];
    s.R = win.k[0];
    s.Wstride = win.stride[0];
    s.Wdilation = win.dil[0];
    if (nd == 2) {
      s.Q = win.out[1];
      s.S = win.k[1];
      s.Hstride = win.stride[1];
      s.Hdilation = win.dil[1];
    }
    Einsum e;
    const std::string out = n.output(0);
    const std::string name = unique_einsum_name(n);
    if (group == 1) {
      s.C = C;
      s.K = K;
      e = make_conv(name, s, x, wname, out);
      // Weights in ONNX order [K, C, R, S].
      e.tensors[0].dims = {{{5, 1}}, {{4, 1}}, {{0, 1}}, {{1, 1}}};
    } else if (group == C && K == C) {
      s.C = C;
      e = make_depthwise_conv(name, s, x, wname, out);
      // ranks R,S,P,Q,C,N; weights [C, 1, R, S]
      e.tensors[0].dims = {{{4, 1}}, {}, {{0, 1}}, {{1, 1}}};
    } else {
      s.C = C / group;
      s.K = K / group;
      s.groups = group;
      e = make_conv(name, s, x, wname, out);
      enum { R, S, P, Q, Cr, Kr, N, G };
      // Channels of input and output are g*C + c and g*K + k of the 4-D ONNX tensors.
      e.tensors[0].dims = {{{G, s.K}, {Kr, 1}}, {{Cr, 1}}, {{R, 1}}, {{S, 1}}};
      e.tensors[1].dims = {{{N, 1}}, {{G, s.C}, {Cr, 1}}, {{R, s.Wdilation}, {P, s.Wstride}},
                           {{S, s.Hdilation}, {Q, s.Hstride}}};
      e.tensors[2].dims = {{{N, 1}}, {{G, s.K}, {Kr, 1}}, {{P, 1}}, {{Q, 1}}};
    }
    e.tensors[1].offset = {0, 0, -win.pad_begin[0], nd == 2 ? -win.pad_begin[1] : 0};
    if (nd == 1) {
      for (auto& t : e.tensors) t.dims.pop_back();
      e.tensors[1].offset.pop_back();
    }
    const View* wv = is_act(wname) ? &views_.at(wname) : nullptr;
    add(n, std::move(e), {wv, &xv, nullptr});
    Shape os = {xs[0], K, s.P};
    if (nd == 2) os.push_back(s.Q);
    set_output(n, out, os);
  }

  void pool(const onnx::NodeProto& n, bool global) {
    const std::string& x = n.input(0);
    const View& xv = act(n, x);
    const Shape xs = xv.shape;
    if (xs.size() != 3 && xs.size() != 4)
      fail(n, "only 1-D and 2-D pooling is supported; input is " + shape_str(xs));
    if (n.op_type() == "QLinearGlobalAveragePool" && attr_i(n, "channels_last", 0) != 0)
      fail(n, "channels_last=1 is not supported; expected NCHW");
    const size_t nd = xs.size() - 2;
    Window win;
    if (global) {
      win.k.assign(xs.begin() + 2, xs.end());
      win.stride.assign(nd, 1);
      win.dil.assign(nd, 1);
      win.out.assign(nd, 1);
      win.pad_begin.assign(nd, 0);
    } else {
      std::vector<int64_t> kernel = attr_ints(n, "kernel_shape");
      if (kernel.size() != nd) fail(n, "kernel_shape is missing or does not match the input " + shape_str(xs));
      win = window(n, xs, kernel, attr_i(n, "ceil_mode", 0) != 0);
    }
    Einsum e;
    e.name = unique_einsum_name(n);
    e.op = OpKind::Pool;
    e.ranks = {{"R", win.k[0]}, {"S", nd == 2 ? win.k[1] : 1}, {"P", win.out[0]},
               {"Q", nd == 2 ? win.out[1] : 1}, {"C", xs[1]}, {"N", xs[0]}};
    enum { R, S, P, Q, C, N };
    TensorAccess i{x, TensorRole::Input, {{{N, 1}}, {{C, 1}}, {{R, win.dil[0]}, {P, win.stride[0]}}}, 8};
    TensorAccess o{n.output(0), TensorRole::Output, {{{N, 1}}, {{C, 1}}, {{P, 1}}}, 8};
    i.offset = {0, 0, -win.pad_begin[0]};
    if (nd == 2) {
      i.dims.push_back({{S, win.dil[1]}, {Q, win.stride[1]}});
      o.dims.push_back({{Q, 1}});
      i.offset.push_back(-win.pad_begin[1]);
    }
    e.tensors = {std::move(i), std::move(o)};
    add(n, std::move(e), {&xv, nullptr});
    Shape os = {xs[0], xs[1]};
    os.insert(os.end(), win.out.begin(), win.out.end());
    set_output(n, n.output(0), os);
  }

  TensorAccess operand(const onnx::NodeProto& n, const std::string& name, TensorRole role,
                       std::vector<const View*>& views) {
    views.push_back(is_act(name) ? &views_.at(name) : nullptr);
    return TensorAccess{name, role, {}, 8};
  }

  void gemm(const onnx::NodeProto& n) {
    const std::string &a = n.input(0), &b = n.input(1);
    const Shape as = shape_of(n, a), bs = shape_of(n, b);
    if (as.size() != 2 || bs.size() != 2)
      fail(n, "Gemm operands must be 2-D; got " + shape_str(as) + " and " + shape_str(bs));
    const bool ta = attr_i(n, "transA", 0) != 0, tb = attr_i(n, "transB", 0) != 0;
    const int64_t M = ta ? as[1] : as[0], K = ta ? as[0] : as[1];
    const int64_t Kb = tb ? bs[1] : bs[0], N = tb ? bs[0] : bs[1];
    if (K != Kb) fail(n, fmt::format("reduction sizes differ: A gives {}, B gives {}", K, Kb));
    Einsum e;
    e.name = unique_einsum_name(n);
    e.ranks = {{"M", M}, {"N", N}, {"K", K}};
    enum { m, nn, k };
    std::vector<const View*> views;
    TensorAccess A = operand(n, a, TensorRole::Input, views);
    A.dims = ta ? std::vector<Projection>{{{k, 1}}, {{m, 1}}} : std::vector<Projection>{{{m, 1}}, {{k, 1}}};
    TensorAccess B = operand(n, b, TensorRole::Weight, views);
    B.dims = tb ? std::vector<Projection>{{{nn, 1}}, {{k, 1}}} : std::vector<Projection>{{{k, 1}}, {{nn, 1}}};
    if (A.name == B.name) fail(n, "both operands are the same tensor; not supported");
    e.tensors = {std::move(A), std::move(B), {n.output(0), TensorRole::Output, {{{m, 1}}, {{nn, 1}}}, 8}};
    views.push_back(nullptr);
    add(n, std::move(e), views);
    set_output(n, n.output(0), {M, N});
  }

  void matmul(const onnx::NodeProto& n, bool qlinear) {
    const std::string &a = n.input(0), &b = n.input(qlinear ? 3 : 1);
    Shape as = shape_of(n, a), bs = shape_of(n, b);
    if (as.empty() || bs.empty()) fail(n, "MatMul operands must have at least one dimension");
    const bool a1 = as.size() == 1, b1 = bs.size() == 1;
    Shape A2 = a1 ? Shape{1, as[0]} : as, B2 = b1 ? Shape{bs[0], 1} : bs;
    const int64_t M = A2[A2.size() - 2], K = A2.back(), Kb = B2[B2.size() - 2], N = B2.back();
    if (K != Kb) fail(n, fmt::format("reduction sizes differ: {} vs {}", shape_str(as), shape_str(bs)));
    Shape ba(A2.begin(), A2.end() - 2), bb(B2.begin(), B2.end() - 2);
    Shape batch = broadcast(n, ba, bb);
    Einsum e;
    e.name = unique_einsum_name(n);
    for (size_t i = 0; i < batch.size(); ++i) e.ranks.push_back({"B" + std::to_string(i), batch[i]});
    const int m = static_cast<int>(batch.size()), nn = m + 1, k = m + 2;
    e.ranks.push_back({"M", M});
    e.ranks.push_back({"N", N});
    e.ranks.push_back({"K", K});
    auto batch_dims = [&](const Shape& s) {
      std::vector<Projection> d;
      const size_t off = batch.size() - s.size();
      for (size_t i = 0; i < s.size(); ++i)
        d.push_back(s[i] == batch[off + i] ? Projection{{static_cast<int>(off + i), 1}} : Projection{});
      return d;
    };
    std::vector<const View*> views;
    TensorAccess A = operand(n, a, TensorRole::Input, views);
    A.dims = batch_dims(ba);
    if (!a1) A.dims.push_back({{m, 1}});
    A.dims.push_back({{k, 1}});
    TensorAccess B = operand(n, b, TensorRole::Weight, views);
    B.dims = batch_dims(bb);
    B.dims.push_back({{k, 1}});
    if (!b1) B.dims.push_back({{nn, 1}});
    if (A.name == B.name) fail(n, "both operands are the same tensor; not supported");
    TensorAccess O{n.output(0), TensorRole::Output, {}, 8};
    Shape os = batch;
    for (size_t i = 0; i < batch.size(); ++i) O.dims.push_back({{static_cast<int>(i), 1}});
    if (!a1) {
      O.dims.push_back({{m, 1}});
      os.push_back(M);
    }
    if (!b1) {
      O.dims.push_back({{nn, 1}});
      os.push_back(N);
    }
    e.tensors = {std::move(A), std::move(B), std::move(O)};
    views.push_back(nullptr);
    add(n, std::move(e), views);
    set_output(n, n.output(0), os);
  }

  // Concat: one Copy Einsum over the output's ranks reading every input with the identity
  // projection (a left-deep chain of Copy Einsums when there are more than three inputs).
  void concat(const onnx::NodeProto& n) {
    std::vector<std::string> ins;
    for (const auto& in : n.input())
      if (!in.empty()) ins.push_back(in);
    const Shape first = shape_of(n, ins[0]);
    const int64_t axis = norm_axis(attr_i(n, "axis", 1), first.size());
    if (axis < 0 || axis >= static_cast<int64_t>(first.size())) fail(n, "axis out of range");
    if (ins.size() == 1) {
      views_[n.output(0)] = act(n, ins[0]);
      shapes_[n.output(0)] = first;
      return;
    }
    std::string prev;
    Shape prev_shape;
    size_t i = 0;
    int part = 0;
    while (i < ins.size()) {
      std::vector<std::string> group;
      if (!prev.empty()) group.push_back(prev);
      while (group.size() < static_cast<size_t>(kMaxTensors - 1) && i < ins.size()) group.push_back(ins[i++]);
      Shape outs = shape_of(n, group[0]);
      outs[axis] = 0;
      for (const auto& g : group) {
        Shape s = shape_of(n, g);
        if (s.size() != first.size()) fail(n, "inputs differ in rank");
        for (size_t d = 0; d < s.size(); ++d)
          if (static_cast<int64_t>(d) != axis && s[d] != outs[d])
            fail(n, "input shapes " + shape_str(first) + " and " + shape_str(s) +
                        " differ outside the concat axis");
        outs[axis] += s[axis];
      }
      const bool last = i >= ins.size();
      const std::string out = last ? n.output(0) : n.output(0) + "#part" + std::to_string(++part);
      Einsum e;
      e.name = unique_einsum_name(n);
      e.op = OpKind::Copy;
      auto names = generic_rank_names(outs.size());
      for (size_t d = 0; d < outs.size(); ++d) e.ranks.push_back({names[d], outs[d]});
      std::vector<const View*> views;
      std::set<std::string> seen;
      int64_t at = 0;  // where this input starts along the concat axis
      for (const auto& g : group) {
        const View* v = is_act(g) ? &views_.at(g) : nullptr;
        const int64_t len = shape_of(n, g)[axis];
        at += len;
        if (!seen.insert(v ? v->tensor : g).second) continue;
        TensorAccess ta{g, v ? TensorRole::Input : TensorRole::Weight, {}, 8};
        for (size_t d = 0; d < outs.size(); ++d) ta.dims.push_back({{static_cast<int>(d), 1}});
        ta.offset.assign(outs.size(), 0);
        ta.offset[axis] = -(at - len);
        e.tensors.push_back(std::move(ta));
        views.push_back(v);
      }
      TensorAccess o{out, TensorRole::Output, {}, 8};
      for (size_t d = 0; d < outs.size(); ++d) o.dims.push_back({{static_cast<int>(d), 1}});
      e.tensors.push_back(std::move(o));
      views.push_back(nullptr);
      add(n, std::move(e), views);
      set_output(n, out, outs);
      prev = out;
      prev_shape = outs;
    }
  }

  // Pad: a Copy Einsum over the padded output reading the input with the identity projection.
  void pad(const onnx::NodeProto& n) {
    const View& v = act(n, n.input(0));
    std::vector<int64_t> pads = attr_ints(n, "pads");
    if (pads.empty() && n.input_size() > 1 && ints_.count(n.input(1))) pads = ints_[n.input(1)];
    Shape outs;
    if (pads.size() == 2 * v.shape.size()) {
      outs = v.shape;
      for (size_t d = 0; d < outs.size(); ++d) outs[d] += pads[d] + pads[d + outs.size()];
    } else if (auto inf = inferred(n.output(0))) {
      outs = *inf;
    } else {
      fail(n, "cannot determine the padded shape (pads unknown)");
    }
    for (size_t d = 0; d < outs.size(); ++d)
      if (outs[d] < v.shape[d]) fail(n, "negative padding (cropping) is not supported");
    std::vector<const View*> views;
    Einsum e = pointwise(n, OpKind::Copy, outs, {}, views, n.output(0));
    TensorAccess ta{n.input(0), TensorRole::Input, {}, 8};
    for (size_t d = 0; d < outs.size(); ++d) ta.dims.push_back({{static_cast<int>(d), 1}});
    if (pads.size() == 2 * v.shape.size())
      for (size_t d = 0; d < outs.size(); ++d) ta.offset.push_back(-pads[d]);
    e.tensors.insert(e.tensors.begin(), std::move(ta));
    views.insert(views.begin(), &v);
    add(n, std::move(e), views);
    set_output(n, n.output(0), outs);
  }

  std::string path_;
  OnnxOptions opt_;
  onnx::ModelProto model_;
  std::map<std::string, Shape> shapes_;
  std::map<std::string, std::vector<int64_t>> ints_;
  std::set<std::string> static_;
  std::map<std::string, View> views_;
  std::set<std::string> used_names_;
  Workload w_;
};

}  // namespace

Workload import_onnx(const std::string& path, const OnnxOptions& options) {
  return Importer(path, options).run();
}

}  // namespace mapfuse
