#include "partitioners/slice.hpp"

#include <algorithm>
#include <charconv>
#include <numeric>
#include <utility>

#include "engine/common/error.hpp"

namespace mapfuse {

namespace {

bool parse_int(const std::string& s, long long& v) {
  if (s.empty()) return false;
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, v);
  return ec == std::errc() && p == end;
}

}  // namespace

StudySlice parse_slice(const std::string& spec) {
  const auto slash = spec.find('/');
  long long i = -1, n = -1;
  const bool ok = slash != std::string::npos && parse_int(spec.substr(0, slash), i) &&
                  parse_int(spec.substr(slash + 1), n);
  if (!ok)
    throw InputError({}, "--slice", "'" + spec + "' is not a slice: expected i/n, two integers with 0 <= i < n (e.g. 0/4)");
  if (n < 1 || n > 1'000'000)
    throw InputError({}, "--slice", "'" + spec + "': the number of slices n must be between 1 and 1000000");
  if (i < 0 || i >= n)
    throw InputError({}, "--slice", "'" + spec + "': the slice index i must satisfy 0 <= i < n (slices are numbered 0.." +
                                        std::to_string(n - 1) + ")");
  return {static_cast<int>(i), static_cast<int>(n)};
}

std::string describe(const StudySlice& s) {
  return s.whole() ? "the whole study" : "slice " + std::to_string(s.index) + "/" + std::to_string(s.count);
}

std::vector<int> slice_assignment(const std::vector<WorkUnit>& units, int count) {
  std::vector<int> slice(units.size(), 0);
  if (count <= 1) return slice;
  std::vector<std::size_t> order(units.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (units[a].cost_hint != units[b].cost_hint) return units[a].cost_hint > units[b].cost_hint;
    return units[a].id < units[b].id;
  });
  // (cost so far, units so far) per slice: equal (or zero) hints still spread the units evenly.
  std::vector<std::pair<double, std::size_t>> load(static_cast<std::size_t>(count), {0.0, 0});
  for (std::size_t k : order) {
    const auto least = std::min_element(load.begin(), load.end());  // the first of equal loads
    slice[k] = static_cast<int>(least - load.begin());
    least->first += std::max(units[k].cost_hint, 0.0);
    least->second += 1;
  }
  return slice;
}

std::vector<WorkUnit> units_of_slice(std::vector<WorkUnit> units, const StudySlice& s) {
  order_for_dispatch(units);
  if (s.whole()) return units;
  const std::vector<int> slice = slice_assignment(units, s.count);
  std::vector<WorkUnit> out;
  for (std::size_t k = 0; k < units.size(); ++k)
    if (slice[k] == s.index) out.push_back(std::move(units[k]));
  return out;
}

}  // namespace mapfuse
