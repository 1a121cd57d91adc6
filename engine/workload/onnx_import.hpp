#pragma once
// ONNX importer: turns an .onnx model (weights optional) into a Workload DAG.
// See docs/workloads.md ("ONNX") for the operator table and the conventions.
#include <string>

#include "engine/workload/workload.hpp"

namespace mapfuse {

struct OnnxOptions {
  // Unary activations (Relu, Clip, Sigmoid, ...), BatchNormalization, quantize/dequantize and
  // element-wise ops whose other operands are constants are folded into the Einsum that
  // produces their input (their output aliases that Einsum's output). With false, each becomes
  // an OpKind::Elementwise Einsum of its own.
  bool fold_unary = true;
  // Every ONNX operator that reads an activation becomes an Einsum of its own (GET-fusion's
  // computational graph as a Workload, docs/get.md): implies fold_unary = false, and the
  // shape-only operators (Flatten, Reshape, Squeeze, Unsqueeze, Transpose, Identity, Dropout,
  // Cast) become Copy Einsums instead of views of their input.
  bool keep_all_ops = false;
};

// Parses the file with the onnx protobuf, runs ONNX shape inference (errors there are not
// fatal: the importer derives the shapes of the operators it supports itself), and builds one
// Einsum per compute node. Symbolic input dimensions (e.g. a dynamic batch) are taken as 1.
// Throws InputError naming the file for an unreadable, truncated or corrupt file and naming the
// node for an unsupported operator or shape. The result has been finalize()d.
Workload import_onnx(const std::string& path, const OnnxOptions& options = {});

}  // namespace mapfuse
