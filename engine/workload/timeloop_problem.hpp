#pragma once
// Timeloop / DOSA problem YAML (docs/workloads.md, "Timeloop problem YAML").
#include <string>

#include "engine/workload/workload.hpp"

namespace mapfuse {

// One Timeloop problem file: `problem: {shape: cnn-layer | dw-cnn-layer | <shape map>,
// instance: {...}}` or the flat form with the dimension keys directly under `problem`.
// A missing shape means cnn-layer. The Einsum is named after the file's stem and has tensors
// Weights, Inputs, Outputs (the shape's data-space names for a custom shape).
// Throws InputError with file, line and key for malformed files.
Einsum import_timeloop_problem(const std::string& path);
// `lenient`: instance keys that are neither dimensions nor coefficients are ignored instead of
// rejected, as Timeloop does for its processed input (`parsed-processed-input.yaml` carries
// H, W, Hpad, densities, ...). Both key spellings (data-spaces / data_spaces, read-write /
// read_write) are accepted either way.
Einsum import_timeloop_problem(const std::string& path, bool lenient);

// A directory of problem files (e.g. a DOSA workload folder). Layer selection:
//  - unique_layers.yaml + layer_count.yaml: the unique layers, weighted by their counts
//    (count formats `key: n` and `key: {count: n, name: layer}`; the key is
//    R_S_P_Q_C_K_N_Wstride_Hstride_Wdilation_Hdilation);
//  - else layers.yaml: every listed layer once; else unique_layers.yaml: each once;
//  - else every *.yaml file in name order.
// Layers are independent: each Einsum's tensors are prefixed with "<layer>.".
Workload import_timeloop_dir(const std::string& dir);

}  // namespace mapfuse
