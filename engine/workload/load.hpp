#pragma once
// One entry point for every workload source (docs/workloads.md).
#include <string>

#include "engine/workload/workload.hpp"
#include "engine/workload/zoo.hpp"

namespace mapfuse {

// `spec` is, in this order: an existing directory (Timeloop/DOSA problem files), an existing file
// (.onnx; .yaml/.yml Timeloop problem; .toml workload file), or a zoo name (with ZooParams).
// Unknown names and missing paths throw InputError with a suggestion.
Workload load_workload(const std::string& spec, const ZooParams& p = {});

// The TOML workload format (docs/workloads.md, "TOML workload files"):
//   name = "two_convs"                      # optional, defaults to the file stem
//   [[einsum]]
//   name = "conv1"
//   op = "mac"                              # mac | elementwise | pool | softmax | copy (default mac)
//   count = 1                               # optional multiplicity
//   ranks = { P = 16, R = 3, C = 8, K = 4 }
//   tensors = [
//     { name = "W1", role = "weight", dims = ["r", "c", "k"] },
//     { name = "I",  role = "input",  dims = ["c", "p + r"] },
//     { name = "O1", role = "output", dims = ["k", "p"], bits = 8 },
//   ]
// Projection terms are `rank`, `coeff*rank` or `rank*coeff`, joined by '+'; a lower-case rank
// name refers to the upper-case rank. Unknown keys, undeclared or unused ranks, non-positive
// sizes and cycles are rejected with file, line and key.
Workload load_workload_toml(const std::string& path);

}  // namespace mapfuse
