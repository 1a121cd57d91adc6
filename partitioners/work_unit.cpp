#include "partitioners/work_unit.hpp"

#include <algorithm>
#include <cstdio>

namespace mapfuse {

std::string stable_id(const std::string& content) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : content) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

const UnitColumn* find_column(const std::vector<UnitColumn>& columns, const std::string& name) {
  for (const UnitColumn& c : columns)
    if (c.name == name) return &c;
  return nullptr;
}

void order_for_dispatch(std::vector<WorkUnit>& units) {
  std::stable_sort(units.begin(), units.end(), [](const WorkUnit& a, const WorkUnit& b) {
    if (a.cost_hint != b.cost_hint) return a.cost_hint > b.cost_hint;
    return a.id < b.id;
  });
}

}  // namespace mapfuse
