#pragma once
// Errors caused by the user's input (files, keys, values). The CLI maps them to exit status 2;
// everything else is a bug or an environment failure.
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace mapfuse {

struct SourceLocation {
  std::string file;  // empty when the input did not come from a file
  int line = 0;      // 1-based; 0 when unknown
  int column = 0;
};

class InputError : public std::runtime_error {
 public:
  // what = "<file>:<line>:<col>: <key>: <message>" with the parts that are known.
  InputError(SourceLocation where, std::string key, std::string message);
  explicit InputError(std::string message) : InputError({}, {}, std::move(message)) {}

  const SourceLocation& where() const { return where_; }
  const std::string& key() const { return key_; }
  const std::string& message() const { return message_; }

 private:
  SourceLocation where_;
  std::string key_;
  std::string message_;
};

// Closest candidate by edit distance, or "" when none is close enough to be a likely typo.
std::string nearest_name(std::string_view name, const std::vector<std::string>& candidates);

// " (did you mean 'x'?)" or "" — for unknown-name messages.
std::string did_you_mean(std::string_view name, const std::vector<std::string>& candidates);

}  // namespace mapfuse
