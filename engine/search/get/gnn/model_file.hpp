#pragma once
// The GNN model files (docs/get.md, "Model files"): a short text header (format, scheme, shape,
// feature layout, tensor names and sizes, a checksum) then the weights as little-endian float32.
// The classifier and the two pre-trained explainers (PGExplainer, RG-Explainer) share the format;
// an explainer's header also names the classifier it was trained against. Torch-free, so that a bad
// file is reported before any torch object exists.
#include <cstdint>
#include <span>
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

// What a file holds; its first line says it ("mapfuse-gnn 1", "mapfuse-pg 1", "mapfuse-rg 1").
enum class ModelKind : uint8_t { Classifier, Pg, Rg };
std::string_view to_string(ModelKind k);  // "GNN classifier", "PGExplainer", "RG-Explainer"

struct ModelFile {
  ModelKind kind = ModelKind::Classifier;
  FusionScheme scheme = FusionScheme::Lbdf;
  int layers = 0, hidden = 0;
  std::string layout;  // feature_layout() of the build that trained it
  std::string classifier;  // explainers: weights_fingerprint() of the classifier they explain
  std::vector<NamedTensor> tensors;
};

std::string serialize(const ModelFile& m);
// Throws InputError naming `source` (and the header line) for anything malformed, truncated or
// failing the checksum, a file of another kind, a scheme other than `expected` and a feature layout
// other than this build's.
ModelFile parse_model_file(std::string_view bytes, const std::string& source, FusionScheme expected,
                           ModelKind kind = ModelKind::Classifier);
// The checksum of weights laid out as a file stores them (FNV-1a 64 of the float32 bytes, hex):
// a classifier's fingerprint, which its explainers record.
std::string weights_fingerprint(std::span<const float> weights);

}  // namespace mapfuse::get::gnn
