#pragma once
// Paths to reference data for tests.
#include <cstdlib>
#include <string>

namespace mapfuse::test {

inline std::string shared_data(const std::string& rel) {
  const char* env = std::getenv("MAPFUSE_SHARED_DATA");
  return std::string(env ? env : MAPFUSE_SHARED_DATA) + "/" + rel;
}

inline std::string source_dir(const std::string& rel) { return std::string(MAPFUSE_SOURCE_DIR) + "/" + rel; }

}  // namespace mapfuse::test
