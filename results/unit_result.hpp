#pragma once
// What a worker returns for one work unit: status, timing and the metrics a study records.
// Plain data with a JSON form, so that the cluster can move it between ranks and the journal can
// append it, without either knowing what computed it.
#include <cstdint>
#include <string>
#include <vector>

namespace mapfuse {

struct UnitResult {
  enum class Status : uint8_t { Done, Failed };

  std::string unit_id;
  std::string kind;
  std::string label;
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

  // What a later step of the same run needs from this unit (FFM's generated pmappings, which
  // the join consumes): journaled and moved between ranks like the rest, not written to the
  // HDF5 file. Empty for most units.
  std::string data;
};

// One line of JSON (no newlines inside) and back; from_json throws std::runtime_error with the
// reason on malformed text.
std::string to_json(const UnitResult& r);
UnitResult unit_result_from_json(const std::string& text);

}  // namespace mapfuse
