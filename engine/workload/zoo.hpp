#pragma once
// Built-in workloads with exact, documented layer shapes (docs/workloads.md, "Model zoo").
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/workload/workload.hpp"

namespace mapfuse {

struct ZooParams {
  int64_t batch = 1;      // N of the CNNs; B of gpt3_6.7b
  int64_t tokens = 8192;  // gpt3_6.7b sequence length (M = P)
};

// resnet18, resnet50, vgg16, vgg19, mobilenet_v1, mobilenet_v2 (224x224 input), xception (299x299),
// mobilebert_block (embedding + the first body, 128 tokens, batch 1 only), gpt3_6.7b (one decoder
// layer, 10 Einsums), matmul_chain_<n> (n >= 1). Throws InputError for an unknown name
// (with a suggestion) or a non-positive parameter. The result has been finalize()d.
Workload zoo_workload(std::string_view name, const ZooParams& p = {});

// The names zoo_workload accepts; the matmul chains appear as "matmul_chain_<n>".
std::vector<std::string> zoo_names();

}  // namespace mapfuse
