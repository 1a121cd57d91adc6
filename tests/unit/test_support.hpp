#pragma once
// Paths to reference data for tests, and presets loaded once.
#include <cstdlib>
#include <map>
#include <string>

#include "engine/arch/arch_toml.hpp"

namespace mapfuse::test {

inline std::string shared_data(const std::string& rel) {
  const char* env = std::getenv("MAPFUSE_SHARED_DATA");
  return std::string(env ? env : MAPFUSE_SHARED_DATA) + "/" + rel;
}

// A preset's first core, loaded once per test binary.
inline const Core& preset_core(const std::string& name) {
  static std::map<std::string, Core> cache;
  auto it = cache.find(name);
  if (it == cache.end()) it = cache.emplace(name, load_architecture(name).cores.at(0)).first;
  return it->second;
}

inline std::string source_dir(const std::string& rel) { return std::string(MAPFUSE_SOURCE_DIR) + "/" + rel; }

}  // namespace mapfuse::test
