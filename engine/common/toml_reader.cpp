#include "engine/common/toml_reader.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace mapfuse {

toml::table parse_toml(std::string_view text, const std::string& file) {
  try {
    return toml::parse(text, file);
  } catch (const toml::parse_error& e) {
    SourceLocation loc{file, static_cast<int>(e.source().begin.line),
                       static_cast<int>(e.source().begin.column)};
    throw InputError(loc, {}, "malformed TOML: " + std::string(e.description()));
  }
}

toml::table parse_toml_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError({path, 0, 0}, {}, "cannot open file for reading");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_toml(ss.str(), path);
}

TomlReader::TomlReader(const toml::table& t, std::string file, std::string path)
    : table_(&t), file_(std::move(file)), path_(std::move(path)) {}

std::string TomlReader::key_path(std::string_view key) const {
  return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
}

SourceLocation TomlReader::where(std::string_view key) const {
  const toml::node* n = table_->get(key);
  const auto& src = n ? n->source() : table_->source();
  return {file_, static_cast<int>(src.begin.line), static_cast<int>(src.begin.column)};
}

void TomlReader::fail(std::string_view key, const std::string& message) const {
  throw InputError(where(key), key_path(key), message);
}

bool TomlReader::has(std::string_view key) const { return table_->contains(key); }

const toml::node* TomlReader::get(std::string_view key) {
  read_.emplace_back(key);
  return table_->get(key);
}

const toml::node& TomlReader::need(std::string_view key) {
  const toml::node* n = get(key);
  if (!n) throw InputError(where({}), key_path(key), "missing required key");
  return *n;
}

static std::string type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    default: return "a date/time";
  }
}

std::string TomlReader::str(std::string_view key) {
  const toml::node& n = need(key);
  if (!n.is_string()) fail(key, "expected a string, found " + type_name(n));
  return std::string(*n.value<std::string_view>());
}

std::optional<std::string> TomlReader::opt_str(std::string_view key) {
  if (!has(key)) return (void)get(key), std::nullopt;
  return str(key);
}

int64_t TomlReader::integer(std::string_view key) {
  const toml::node& n = need(key);
  if (!n.is_integer()) fail(key, "expected an integer, found " + type_name(n));
  return *n.value<int64_t>();
}

std::optional<int64_t> TomlReader::opt_integer(std::string_view key) {
  if (!has(key)) return (void)get(key), std::nullopt;
  return integer(key);
}

double TomlReader::number(std::string_view key) {
  const toml::node& n = need(key);
  if (!n.is_number()) fail(key, "expected a number, found " + type_name(n));
  return *n.value<double>();
}

std::optional<double> TomlReader::opt_number(std::string_view key) {
  if (!has(key)) return (void)get(key), std::nullopt;
  return number(key);
}

std::optional<bool> TomlReader::opt_bool(std::string_view key) {
  if (!has(key)) return (void)get(key), std::nullopt;
  const toml::node& n = need(key);
  if (!n.is_boolean()) fail(key, "expected true or false, found " + type_name(n));
  return *n.value<bool>();
}

std::vector<std::string> TomlReader::str_list(std::string_view key) {
  std::vector<std::string> out;
  const toml::node* n = get(key);
  if (!n) return out;
  const toml::array* a = n->as_array();
  if (!a) fail(key, "expected an array of strings, found " + type_name(*n));
  for (const auto& el : *a) {
    if (!el.is_string()) fail(key, "expected an array of strings; an element is " + type_name(el));
    out.emplace_back(*el.value<std::string_view>());
  }
  return out;
}

std::vector<double> TomlReader::number_list(std::string_view key) {
  std::vector<double> out;
  const toml::node* n = get(key);
  if (!n) return out;
  const toml::array* a = n->as_array();
  if (!a) fail(key, "expected an array of numbers, found " + type_name(*n));
  for (const auto& el : *a) {
    if (auto d = el.value<double>(); d && (el.is_floating_point() || el.is_integer()))
      out.push_back(*d);
    else
      fail(key, "expected an array of numbers; an element is " + type_name(el));
  }
  return out;
}

TomlReader TomlReader::table(std::string_view key) {
  const toml::node& n = need(key);
  if (!n.is_table()) fail(key, "expected a table, found " + type_name(n));
  return TomlReader(*n.as_table(), file_, key_path(key));
}

std::optional<TomlReader> TomlReader::opt_table(std::string_view key) {
  if (!has(key)) return (void)get(key), std::nullopt;
  return table(key);
}

std::vector<TomlReader> TomlReader::tables(std::string_view key) {
  std::vector<TomlReader> out;
  const toml::node* n = get(key);
  if (!n) return out;
  const toml::array* a = n->as_array();
  if (!a) fail(key, "expected an array of tables ([[" + std::string(key) + "]]), found " + type_name(*n));
  int i = 0;
  for (const auto& el : *a) {
    if (!el.is_table()) fail(key, "expected an array of tables; an element is " + type_name(el));
    out.emplace_back(*el.as_table(), file_, key_path(key) + "[" + std::to_string(i++) + "]");
  }
  return out;
}

void TomlReader::finish(const std::vector<std::string>& also_valid) const {
  std::vector<std::string> known = read_;
  known.insert(known.end(), also_valid.begin(), also_valid.end());
  for (const auto& [k, v] : *table_) {
    std::string key(k.str());
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    SourceLocation loc{file_, static_cast<int>(k.source().begin.line),
                       static_cast<int>(k.source().begin.column)};
    throw InputError(loc, key_path(key), "unknown key" + did_you_mean(key, known));
  }
}

}  // namespace mapfuse
