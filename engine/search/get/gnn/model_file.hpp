#pragma once
// The GNN model file (docs/get.md, "Model files"): a short text header (format, scheme, shape,
// feature layout, tensor names and sizes, a checksum) then the weights as little-endian float32.
// Torch-free, so that a bad file is reported before any torch object exists.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/cost/fusion_group.hpp"

namespace mapfuse::get::gnn {

struct NamedTensor {
  std::string name;
  std::vector<int64_t> dims;
  std::vector<float> data;
};

struct ModelFile {
  FusionScheme scheme = FusionScheme::Lbdf;
  int layers = 0, hidden = 0;
  std::string layout;  // feature_layout() of the build that trained it
  std::vector<NamedTensor> tensors;
};

std::string serialize(const ModelFile& m);
// Throws InputError naming `source` (and the header line) for anything malformed, truncated or
// failing the checksum, a scheme other than `expected` and a feature layout other than this build's.
ModelFile parse_model_file(std::string_view bytes, const std::string& source, FusionScheme expected);

}  // namespace mapfuse::get::gnn
