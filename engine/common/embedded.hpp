#pragma once
// Data files compiled into the binary (see cmake/EmbedFiles.cmake).
#include <span>
#include <string_view>

namespace mapfuse {

struct EmbeddedFile {
  std::string_view name;  // file stem, e.g. "gemmini_default"
  std::string_view text;
};

std::span<const EmbeddedFile> embedded_arch_presets();
// GET-fusion's GNN classifiers (presets/get/*.gnn: binary, not text).
std::span<const EmbeddedFile> embedded_gnn_models();

}  // namespace mapfuse
