#pragma once
// Reading an .onnx file into the onnx protobuf, shared by the Einsum importer (onnx_import.cpp)
// and the operator-graph loader (op_graph.cpp). Includes the onnx headers: keep it out of
// widely used headers.
#include <onnx/onnx_pb.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mapfuse {

// Parses the file, sets symbolic input dimensions to 1 and, with infer_shapes, runs ONNX shape
// inference (its errors are not fatal). Throws InputError naming the file when it is missing, a
// directory, unreadable, not a ModelProto or has no nodes.
void read_onnx_model(const std::string& path, onnx::ModelProto& model, bool infer_shapes = true);
// ONNX shape inference in place (errors are not fatal), plus the shape of every Resize whose
// sizes come from integer shape arithmetic (Shape/Slice/Concat/Constant), which ONNX's
// inference leaves symbolic.
void infer_onnx_shapes(onnx::ModelProto& model);

// The values of an INT64 or INT32 tensor (shape constants), or nullopt for other types / no data.
std::optional<std::vector<int64_t>> onnx_tensor_ints(const onnx::TensorProto& t);

// The shape of a value when every dimension is a positive number, else nullopt.
std::optional<std::vector<int64_t>> onnx_static_shape(const onnx::ValueInfoProto& vi);

// "node '<name>' (<op_type>)" for error keys; the first output names an unnamed node.
std::string onnx_node_key(const onnx::NodeProto& n);

}  // namespace mapfuse
