#include "engine/workload/onnx_model.hpp"

#include <onnx/shape_inference/implementation.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <algorithm>
#include <fstream>
#include <map>
#include <set>

#include "engine/common/error.hpp"

namespace mapfuse {

void read_onnx_model(const std::string& path, onnx::ModelProto& model, bool infer_shapes) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) throw InputError({path, 0, 0}, {}, "cannot open ONNX file: no such file");
  if (fs::is_directory(path, ec))
    throw InputError({path, 0, 0}, {}, "is a directory; expected an .onnx model file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError({path, 0, 0}, {}, std::string("cannot open ONNX file: ") + std::strerror(errno));
  if (!model.ParseFromIstream(&in))
    throw InputError({path, 0, 0}, {},
                     "not a valid ONNX model: protobuf parsing failed (the file is truncated, "
                     "corrupt or not an ONNX ModelProto)");
  if (!model.has_graph() || model.graph().node_size() == 0)
    throw InputError({path, 0, 0}, {},
                     "ONNX model has no graph nodes (empty, truncated or not an ONNX file); "
                     "expected a ModelProto whose graph has at least one node");
  // Symbolic (dynamic) input dimensions are taken as 1 before shape inference.
  std::set<std::string> inits;
  for (const auto& t : model.graph().initializer()) inits.insert(t.name());
  for (auto& in_vi : *model.mutable_graph()->mutable_input()) {
    if (inits.count(in_vi.name()) || !in_vi.type().has_tensor_type() ||
        !in_vi.type().tensor_type().has_shape())
      continue;
    for (auto& d : *in_vi.mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim())
      if (!d.has_dim_value() || d.dim_value() <= 0) d.set_dim_value(1);
  }
  if (infer_shapes) infer_onnx_shapes(model);
}

namespace {

using Dims = std::vector<int64_t>;

struct ShapeValues {
  std::map<std::string, Dims> dims;                   // static tensor shapes
  std::map<std::string, std::vector<int64_t>> ints;   // values of integer shape tensors

  void record(const onnx::ValueInfoProto& vi) {
    if (auto d = onnx_static_shape(vi)) dims[vi.name()] = *d;
  }
  const std::vector<int64_t>* input(const onnx::NodeProto& n, int i) const {
    if (i >= n.input_size() || n.input(i).empty()) return nullptr;
    auto it = ints.find(n.input(i));
    return it == ints.end() ? nullptr : &it->second;
  }
  // Integer shape arithmetic as torch exports F.interpolate's sizes: Shape -> Slice -> Concat.
  void evaluate(const onnx::NodeProto& n) {
    const std::string& op = n.op_type();
    if (n.output_size() == 0) return;
    const std::string& out = n.output(0);
    if (op == "Constant") {
      for (const auto& a : n.attribute()) {
        if (a.name() == "value") {
          if (auto v = onnx_tensor_ints(a.t())) ints[out] = *v;
        } else if (a.name() == "value_ints") {
          ints[out] = {a.ints().begin(), a.ints().end()};
        }
      }
    } else if (op == "Shape") {
      if (auto it = dims.find(n.input(0)); it != dims.end()) ints[out] = it->second;
    } else if (op == "Slice") {
      const auto *data = input(n, 0), *starts = input(n, 1), *ends = input(n, 2), *steps = input(n, 4);
      if (!data || !starts || !ends || starts->size() != 1 || ends->size() != 1) return;
      if (steps && (steps->size() != 1 || (*steps)[0] != 1)) return;
      const int64_t len = static_cast<int64_t>(data->size());
      auto clampi = [&](int64_t x) { return std::clamp(x < 0 ? x + len : x, int64_t{0}, len); };
      std::vector<int64_t> v;
      for (int64_t i = clampi((*starts)[0]); i < clampi((*ends)[0]); ++i) v.push_back((*data)[i]);
      ints[out] = v;
    } else if (op == "Concat") {
      std::vector<int64_t> v;
      for (int i = 0; i < n.input_size(); ++i) {
        const auto* p = input(n, i);
        if (!p) return;
        v.insert(v.end(), p->begin(), p->end());
      }
      ints[out] = v;
    } else if (op == "Cast" || op == "Identity" || op == "Squeeze" || op == "Unsqueeze" || op == "Reshape") {
      if (const auto* p = input(n, 0)) ints[out] = *p;
    }
  }
};

}  // namespace

void infer_onnx_shapes(onnx::ModelProto& model) {
  // ONNX shape inference leaves a Resize output symbolic when its sizes are computed, and
  // everything downstream with it. So: infer, evaluate the integer shape arithmetic, state each
  // such Resize's output shape in value_info, and infer again until nothing changes.
  auto* gr = model.mutable_graph();
  for (int pass = 0; pass < 8; ++pass) {
    try {
      onnx::shape_inference::InferShapes(model);
    } catch (const std::exception&) {
      // Not fatal: callers derive or demand the shapes they need.
    }
    ShapeValues sv;
    for (const auto& t : gr->initializer()) {
      sv.dims[t.name()] = Dims(t.dims().begin(), t.dims().end());
      if (auto iv = onnx_tensor_ints(t)) sv.ints[t.name()] = *iv;
    }
    for (const auto& vi : gr->value_info()) sv.record(vi);
    for (const auto& vi : gr->output()) sv.record(vi);
    for (const auto& vi : gr->input()) sv.record(vi);
    bool changed = false;
    for (const auto& n : gr->node()) {
      sv.evaluate(n);
      if ((n.op_type() != "Resize" && n.op_type() != "Upsample") || n.output_size() == 0 ||
          sv.dims.count(n.output(0)) || !sv.input(n, 3))
        continue;
      onnx::ValueInfoProto* vi = nullptr;
      for (auto& v : *gr->mutable_value_info())
        if (v.name() == n.output(0)) vi = &v;
      if (!vi) {
        vi = gr->add_value_info();
        vi->set_name(n.output(0));
        vi->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
      }
      auto* shape = vi->mutable_type()->mutable_tensor_type()->mutable_shape();
      shape->clear_dim();
      for (int64_t d : *sv.input(n, 3)) shape->add_dim()->set_dim_value(d);
      sv.dims[n.output(0)] = *sv.input(n, 3);
      changed = true;
    }
    if (!changed) break;
  }
}

std::optional<std::vector<int64_t>> onnx_static_shape(const onnx::ValueInfoProto& vi) {
  if (!vi.type().has_tensor_type() || !vi.type().tensor_type().has_shape()) return std::nullopt;
  std::vector<int64_t> s;
  for (const auto& d : vi.type().tensor_type().shape().dim()) {
    if (!d.has_dim_value() || d.dim_value() <= 0) return std::nullopt;
    s.push_back(d.dim_value());
  }
  return s;
}

std::string onnx_node_key(const onnx::NodeProto& n) {
  const std::string name = n.name().empty() ? (n.output_size() ? n.output(0) : std::string("?")) : n.name();
  return "node '" + name + "' (" + n.op_type() + ")";
}

std::optional<std::vector<int64_t>> onnx_tensor_ints(const onnx::TensorProto& t) {
  const auto dt = t.data_type();
  if (dt == onnx::TensorProto::INT64) {
    if (t.int64_data_size() > 0) return std::vector<int64_t>(t.int64_data().begin(), t.int64_data().end());
    if (t.has_raw_data() && t.raw_data().size() % 8 == 0) {
      std::vector<int64_t> v(t.raw_data().size() / 8);
      std::memcpy(v.data(), t.raw_data().data(), t.raw_data().size());
      return v;
    }
  } else if (dt == onnx::TensorProto::INT32) {
    if (t.int32_data_size() > 0) return std::vector<int64_t>(t.int32_data().begin(), t.int32_data().end());
    if (t.has_raw_data() && t.raw_data().size() % 4 == 0) {
      std::vector<int32_t> v(t.raw_data().size() / 4);
      std::memcpy(v.data(), t.raw_data().data(), t.raw_data().size());
      return std::vector<int64_t>(v.begin(), v.end());
    }
  }
  return std::nullopt;
}

}  // namespace mapfuse
