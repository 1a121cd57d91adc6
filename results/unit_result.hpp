#pragma once
// What a worker returns for one work unit: status, timing and the metrics a study records.
// Plain data with a JSON form, so that the cluster can move it between ranks and the journal can
// append it, without either knowing what computed it.
#include <cstdint>
#include <string>
#include <vector>

#include "partitioners/work_unit.hpp"

namespace mapfuse {

struct UnitResult {
  enum class Status : uint8_t { Done, Failed };

  std::string unit_id;
  std::string kind;
  std::string label;
  std::vector<UnitColumn> columns;  // the unit's parameters as table columns (WorkUnit::columns)
  Status status = Status::Done;
  std::string message;  // the failure's reason (Failed)
  int rank = 0;         // the rank that computed it
  double wall_seconds = 0;
  // What computed it: "<mapfuse version>/<model fingerprint>" (cli/model_fingerprint.hpp). A
  // resumed run refuses results another producer journaled, so one file never mixes cost
  // models. Empty in journals written before it was recorded.
  std::string producer;

  // Metrics of a Done unit (0 / empty when not applicable).
  double energy_pj = 0;
  double cycles = 0;
  double edp = 0;  // energy_pj * cycles
  std::vector<std::string> level_names;  // outermost first
  std::vector<double> level_energy_pj;
  std::vector<double> level_cycles;
  std::string best_mapping;  // text form (engine/mapping/mapping.hpp)

  struct TracePoint {  // optimizer progress: best objective so far
    double seconds = 0;
    int64_t evaluations = 0;
    double best = 0;
  };
  std::vector<TracePoint> trace;

  struct ParetoPoint {  // energy / cycles front
    double energy_pj = 0;
    double cycles = 0;
    std::string mapping;
  };
  std::vector<ParetoPoint> pareto;

  // Named scalar metrics of kinds whose results are not energy and cycles (get_partition:
  // dram_mb, mbu_kb, plans, rectify_rate, ...), in the order the unit reports them; NaN where a
  // metric is undefined (a rectify rate of the random split). Empty for the other kinds.
  struct Metric {
    std::string name;
    double value = 0;
  };
  std::vector<Metric> metrics;
  double metric(const std::string& name, double missing) const {
    for (const Metric& m : metrics)
      if (m.name == name) return m.value;
    return missing;
  }

  // What a later step of the same run needs from this unit (FFM's generated pmappings, which
  // the join consumes), or a "schedule" unit's schedule (results/schedule_h5.hpp's JSON record,
  // written to the study file's /schedules): journaled and moved between ranks like the rest; no
  // other kind's data reaches the HDF5 file. Empty for most units.
  std::string data;

  // What the computing process hands to rank 0's process beside the result, which rank 0's sink
  // takes off before journaling it (so it reaches neither the journal nor the study file): a
  // schedule unit's new tile-cost cache entries, which rank 0 keeps in the study's cache file
  // (docs/studies.md, "Tile-cost cache"). Moved between ranks with the result; empty for most.
  std::string side_data;
};

// The parameter columns of a table of these results (the HDF5 /units, report --csv): the standard
// ones (workload, einsum, arch, method, seed, objective) always, in this order, then every other
// name in the order it first appears. Each is returned holding its missing-cell value: "" (text),
// -1 (integer: seeds and indices are >= 0), NaN (real). Throws std::invalid_argument on a name
// given two types or named like a fixed field (a bug of the unit kind that gave it).
std::vector<UnitColumn> table_columns(const std::vector<UnitResult>& results);
bool is_missing_cell(const UnitColumn& c);
// The fields of the unit table that are not parameter columns (id, kind, label, status, ...).
bool is_fixed_unit_field(const std::string& name);

// One line of JSON (no newlines inside) and back; from_json throws std::runtime_error with the
// reason on malformed text.
std::string to_json(const UnitResult& r);
UnitResult unit_result_from_json(const std::string& text);

}  // namespace mapfuse
