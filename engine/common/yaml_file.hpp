#pragma once
// Reading YAML input files (Timeloop / DOSA formats) with errors that name file, line and column.
#include <yaml-cpp/yaml.h>

#include <string>

#include "engine/common/error.hpp"

namespace mapfuse {

// Where a node sits in its file (1-based; 0 when yaml-cpp does not know).
SourceLocation yaml_location(const std::string& file, const YAML::Node& n);

// Parses a file; a missing or unreadable file or malformed YAML is an InputError.
YAML::Node load_yaml_file(const std::string& path);

}  // namespace mapfuse
