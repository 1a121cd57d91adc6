#pragma once
// Strict reading of TOML tables: every error names the file, line and dotted key, says what was
// expected, and unknown keys are rejected with the nearest valid name.
#include <toml++/toml.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/common/error.hpp"

namespace mapfuse {

// Parses TOML text; syntax errors become InputError with file and line.
toml::table parse_toml(std::string_view text, const std::string& file);
toml::table parse_toml_file(const std::string& path);

class TomlReader {
 public:
  TomlReader(const toml::table& t, std::string file, std::string path = {});

  bool has(std::string_view key) const;
  std::string str(std::string_view key);
  std::optional<std::string> opt_str(std::string_view key);
  int64_t integer(std::string_view key);
  std::optional<int64_t> opt_integer(std::string_view key);
  double number(std::string_view key);  // accepts integers too
  std::optional<double> opt_number(std::string_view key);
  std::optional<bool> opt_bool(std::string_view key);
  std::vector<std::string> str_list(std::string_view key);  // missing = empty
  std::vector<double> number_list(std::string_view key);    // integers too; missing = empty
  TomlReader table(std::string_view key);
  std::optional<TomlReader> opt_table(std::string_view key);
  std::vector<TomlReader> tables(std::string_view key);  // array of tables; missing = empty

  // Throws for any key that no accessor has read, suggesting the nearest known one.
  void finish(const std::vector<std::string>& also_valid = {}) const;

  [[noreturn]] void fail(std::string_view key, const std::string& message) const;
  SourceLocation where(std::string_view key) const;
  std::string key_path(std::string_view key) const;
  const std::string& file() const { return file_; }

 private:
  const toml::node* get(std::string_view key);
  const toml::node& need(std::string_view key);

  const toml::table* table_;
  std::string file_;
  std::string path_;
  std::vector<std::string> read_;
};

}  // namespace mapfuse
