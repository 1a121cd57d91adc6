#include "engine/common/csv.hpp"

#include <archive.h>
#include <archive_entry.h>

#include <fstream>
#include <sstream>

#include "engine/common/error.hpp"

namespace mapfuse {

int CsvTable::column(std::string_view name) const {
  for (size_t i = 0; i < header.size(); ++i)
    if (header[i] == name) return static_cast<int>(i);
  throw InputError({source, 1, 0}, std::string(name), "missing column" + did_you_mean(name, header));
}

CsvTable parse_csv(std::string_view text, const std::string& source) {
  CsvTable t;
  t.source = source;
  std::vector<std::string> row;
  std::string field;
  bool quoted = false, any = false;
  int line = 1;
  auto end_row = [&]() {
    row.push_back(std::move(field));
    field.clear();
    if (t.header.empty()) {
      t.header = std::move(row);
    } else if (!(row.size() == 1 && row[0].empty())) {
      if (row.size() != t.header.size())
        throw InputError({source, line, 0}, {},
                         "row has " + std::to_string(row.size()) + " fields; the header has " +
                             std::to_string(t.header.size()));
      t.rows.push_back(std::move(row));
    }
    row.clear();
    any = false;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (quoted) {
      if (c == '"') {
        if (i + 1 < text.size() && text[i + 1] == '"') field += '"', ++i;
        else quoted = false;
      } else {
        if (c == '\n') ++line;
        field += c;
      }
      continue;
    }
    any = true;
    if (c == '"') quoted = true;
    else if (c == ',') row.push_back(std::move(field)), field.clear();
    else if (c == '\n') end_row(), ++line;
    else if (c != '\r') field += c;
  }
  if (quoted) throw InputError({source, line, 0}, {}, "unterminated quoted field");
  if (any || !field.empty() || !row.empty()) end_row();
  if (t.header.empty()) throw InputError({source, 0, 0}, {}, "empty CSV file; expected a header row");
  return t;
}

static bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

CsvTable read_csv(const std::string& path) {
  if (ends_with(path, ".tar.gz") || ends_with(path, ".tgz")) {
    archive* a = archive_read_new();
    archive_read_support_filter_all(a);
    archive_read_support_format_all(a);
    if (archive_read_open_filename(a, path.c_str(), 1 << 16) != ARCHIVE_OK) {
      std::string msg = archive_error_string(a) ? archive_error_string(a) : "unknown error";
      archive_read_free(a);
      throw InputError({path, 0, 0}, {}, "cannot open archive: " + msg);
    }
    archive_entry* entry;
    int rc;
    while ((rc = archive_read_next_header(a, &entry)) == ARCHIVE_OK) {
      std::string name = archive_entry_pathname(entry);
      if (!ends_with(name, ".csv")) continue;
      std::string text;
      char buf[1 << 16];
      la_ssize_t n;
      while ((n = archive_read_data(a, buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
      if (n < 0) {
        std::string msg = archive_error_string(a) ? archive_error_string(a) : "read error";
        archive_read_free(a);
        throw InputError({path, 0, 0}, {}, "corrupt archive member " + name + ": " + msg);
      }
      archive_read_free(a);
      return parse_csv(text, path + ":" + name);
    }
    std::string msg = rc == ARCHIVE_EOF ? "no .csv member found"
                                        : std::string("corrupt archive: ") +
                                              (archive_error_string(a) ? archive_error_string(a) : "");
    archive_read_free(a);
    throw InputError({path, 0, 0}, {}, msg);
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError({path, 0, 0}, {}, "cannot open file for reading");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_csv(ss.str(), path);
}

}  // namespace mapfuse
