#pragma once
// Reading CSV tables (RFC 4180 quoting), from plain files or from the first .csv member of a
// .tar.gz/.tgz archive (libarchive), as the reference datasets are shipped.
#include <string>
#include <string_view>
#include <vector>

namespace mapfuse {

struct CsvTable {
  std::string source;
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;

  // Column index by name; throws InputError naming the file if absent.
  int column(std::string_view name) const;
};

CsvTable parse_csv(std::string_view text, const std::string& source);
// Throws InputError for unreadable files, corrupt archives and ragged rows.
CsvTable read_csv(const std::string& path);

}  // namespace mapfuse
