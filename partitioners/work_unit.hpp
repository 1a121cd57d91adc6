#pragma once
// A study is cut into work units: independent pieces (one layer's mapper run on one hardware
// point, one optimizer run, ...) that any rank can compute. Plain data: the cluster moves them
// without knowing what they compute.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace mapfuse {

// One of a unit's parameters as a column of the study's unit table (`/units` in the HDF5 file,
// `mapfuse report --csv`; docs/results.md, "Parameter columns"): the partitioner gives each unit
// the columns of its kind, the executors copy them onto its result, the writer makes one column
// per name over all units. A new unit kind plugs in by filling its units' columns.
struct UnitColumn {
  enum class Type : uint8_t { Text, Integer, Real };
  std::string name;
  Type type = Type::Text;
  std::string text;
  int64_t integer = 0;
  double real = 0;

  static UnitColumn of_text(std::string name, std::string v) { return {std::move(name), Type::Text, std::move(v), 0, 0}; }
  static UnitColumn of_integer(std::string name, int64_t v) { return {std::move(name), Type::Integer, {}, v, 0}; }
  static UnitColumn of_real(std::string name, double v) { return {std::move(name), Type::Real, {}, 0, v}; }
  bool operator==(const UnitColumn&) const = default;
};

// The column named `name` of a unit or result, or null.
const UnitColumn* find_column(const std::vector<UnitColumn>& columns, const std::string& name);

struct WorkUnit {
  std::string id;          // stable hash of the unit's content (hex): a resumed run recognises it
  std::string kind;        // what computes it, e.g. "map_layer"
  std::string label;       // for people: "resnet18/conv1 @ pe16_sp256_acc64"
  double cost_hint = 1.0;  // relative expected cost; executors start the largest first
  std::string payload;     // the parameters its computation needs (JSON text)
  // Its parameters as table columns (not part of the id; not sent to workers: the master copies
  // them onto the result).
  std::vector<UnitColumn> columns;
};

// Stable 64-bit FNV-1a hash of a text, as 16 hex digits (the same on every platform and run).
std::string stable_id(const std::string& content);

// Units in the order executors hand them out: largest cost hint first, ties by id.
void order_for_dispatch(std::vector<WorkUnit>& units);

}  // namespace mapfuse
