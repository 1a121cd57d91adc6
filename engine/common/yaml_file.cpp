#include "engine/common/yaml_file.hpp"

#include <filesystem>

namespace mapfuse {

SourceLocation yaml_location(const std::string& file, const YAML::Node& n) {
  const YAML::Mark m = n.Mark();
  if (m.is_null()) return {file, 0, 0};
  return {file, m.line + 1, m.column + 1};
}

YAML::Node load_yaml_file(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_regular_file(path, ec))
    throw InputError({path, 0, 0}, {}, fs::exists(path, ec) ? "is not a regular file; expected a YAML file"
                                                            : "cannot open file: no such file");
  try {
    return YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    throw InputError({path, 0, 0}, {}, "cannot open file for reading");
  } catch (const YAML::Exception& e) {
    throw InputError({path, e.mark.is_null() ? 0 : e.mark.line + 1, e.mark.is_null() ? 0 : e.mark.column + 1},
                     {}, "malformed YAML: " + e.msg);
  }
}

}  // namespace mapfuse
