#pragma once
// Schedules of computation tiles on a multi-core accelerator (COALA, docs/stream.md) in HDF5: the
// tiles and transfers placed, each core's memory occupancy over time, the totals and the energy
// breakdown. Plain tables, so that h5py/pandas read them and `mapfuse report` draws the Gantt chart
// and the memory plot (Stream's Fig. 9). results/ knows no cost model: the caller fills the record.
// Layout (format "mapfuse-schedule", schema_version 1): docs/results.md, "Schedule files".
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace mapfuse {

struct ScheduleRecord {
  std::string name;       // the group's name under /schedules (e.g. the replayed folder's name)
  std::string semantics;  // "stream" or "mapfuse"
  std::string source;     // what was scheduled (a folder, a workload on an architecture)
  double latency_cc = 0, energy_pj = 0;
  struct Core {
    std::string name;
    double capacity_bits = 0, peak_memory_bits = 0;
    bool offchip = false;
  };
  struct Link {
    std::string name;
    double bandwidth_bits_per_cc = 0, energy_pj_per_cc = 0;
  };
  struct Tile {
    int32_t layer = 0, sub = 0, core = 0, pick = 0;
    double start = 0, end = 0;
  };
  struct Transfer {
    int32_t tensor = 0, sender = 0, receiver = 0, tile = 0;
    std::string cause;         // OFF_CHIP, CORE_TO_CORE, EVICTION, SINK_LAYER, BLOCK
    std::vector<int32_t> links;  // the path, by row of `links`
    double start = 0, end = 0, bits = 0, bandwidth_bits_per_cc = 0;
    bool occupies_links = true;
    double link_energy_pj = 0, memory_energy_pj = 0;
  };
  struct MemoryStep {
    int32_t core = 0;
    double t = 0, bits = 0;  // from t on (until the core's next step), bits in use
  };
  std::vector<Core> cores;
  std::vector<Link> links;
  std::vector<Tile> tiles;
  std::vector<Transfer> transfers;
  std::vector<MemoryStep> memory;  // grouped by core, times increasing within a core
  std::vector<std::pair<std::string, double>> energy_breakdown;  // term, pJ
};

// Writes the schedules into a new file at `path` atomically (temporary file, rename). Throws
// std::invalid_argument for two schedules of one name or an index out of range, std::runtime_error
// naming the path when it cannot be written.
void write_schedule_h5(const std::string& path, const std::vector<ScheduleRecord>& schedules);

// The record as one line of JSON and back (a study's "schedule" unit carries it in
// UnitResult::data from its rank to the study file); from_json throws std::runtime_error on
// malformed text.
std::string schedule_record_to_json(const ScheduleRecord& r);
ScheduleRecord schedule_record_from_json(const std::string& text);

// True when `path` is a schedule file (root attribute format = "mapfuse-schedule").
bool is_schedule_h5(const std::string& path);

// Reads every schedule back, in name order. Throws InputError naming the path for a missing,
// foreign, newer or damaged file.
std::vector<ScheduleRecord> read_schedule_h5(const std::string& path);

// The schedules under /schedules of any HDF5 file (a schedule file, or a study file whose
// "schedule" units wrote theirs there: docs/results.md), in name order; none when it has no such
// group. Throws InputError naming the path for a damaged group.
std::vector<ScheduleRecord> read_schedules_group(const std::string& path);

}  // namespace mapfuse
