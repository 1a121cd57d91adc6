#include "engine/workload/onnx_model.hpp"

#include <onnx/shape_inference/implementation.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
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

void infer_onnx_shapes(onnx::ModelProto& model) {
  try {
    onnx::shape_inference::InferShapes(model);
  } catch (const std::exception&) {
    // Not fatal: callers derive or demand the shapes they need.
  }
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
