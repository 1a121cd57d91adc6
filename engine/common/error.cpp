#include "engine/common/error.hpp"

#include <algorithm>

namespace mapfuse {

static std::string format_error(const SourceLocation& where, const std::string& key,
                                const std::string& message) {
  std::string out;
  if (!where.file.empty()) {
    out += where.file;
    if (where.line > 0) {
      out += ':' + std::to_string(where.line);
      if (where.column > 0) out += ':' + std::to_string(where.column);
    }
    out += ": ";
  }
  if (!key.empty()) out += key + ": ";
  out += message;
  return out;
}

InputError::InputError(SourceLocation where, std::string key, std::string message)
    : std::runtime_error(format_error(where, key, message)),
      where_(std::move(where)),
      key_(std::move(key)),
      message_(std::move(message)) {}

static size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      char ca = static_cast<char>(std::tolower(static_cast<unsigned char>(a[i - 1])));
      char cb = static_cast<char>(std::tolower(static_cast<unsigned char>(b[j - 1])));
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (ca == cb ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string nearest_name(std::string_view name, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_d = std::max<size_t>(2, name.size() / 3) + 1;
  for (const auto& c : candidates) {
    size_t d = edit_distance(name, c);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  return best;
}

std::string did_you_mean(std::string_view name, const std::vector<std::string>& candidates) {
  std::string n = nearest_name(name, candidates);
  return n.empty() ? std::string{} : " (did you mean '" + n + "'?)";
}

}  // namespace mapfuse
