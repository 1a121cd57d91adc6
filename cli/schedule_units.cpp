// The study's "schedule" unit (partitioners/study.hpp StudySchedule): `mapfuse schedule`'s
// pipeline on one (workload, architecture, mode), its totals as metrics and its schedule as the
// record the study file stores under /schedules.
#include <nlohmann/json.hpp>

#include "cli/schedule_record.hpp"
#include "cli/schedule_run.hpp"
#include "cli/study_units.hpp"

namespace mapfuse::cli {

UnitResult run_schedule_unit(const WorkUnit& unit) {
  const nlohmann::json p = nlohmann::json::parse(unit.payload);
  ScheduleSpec spec;
  spec.workload = p.at("workload").get<std::string>();
  spec.arch = p.at("arch").get<std::string>();
  spec.mode = p.at("mode").get<std::string>();
  spec.allocation = p.at("allocation").get<std::string>();
  spec.stacks = p.at("stacks").get<std::string>();
  spec.granularity = p.at("granularity").get<std::string>();
  spec.tile_costs = p.at("tile_costs").get<std::string>();
  spec.semantics = p.at("semantics").get<std::string>();
  spec.fold_unary = p.at("fold_unary").get<bool>();
  const ScheduleRun run = run_schedule(spec);
  const coala::Schedule& s = run.schedule;
  UnitResult r;
  r.cycles = s.latency_cc;
  r.energy_pj = s.energy.total();
  r.edp = r.cycles * r.energy_pj;
  auto metric = [&](const std::string& name, double v) { r.metrics.push_back({name, v}); };
  metric("latency_cc", s.latency_cc);
  metric("energy_pj", r.energy_pj);
  metric("cts", double(run.graph.tiles.tiles.size()));
  metric("edges", double(run.graph.edges.size()));
  metric("stacks", double(run.graph.tiles.stacks.size()));
  metric("transfers", double(s.transfers.size()));
  for (const auto& [k, v] : energy_parts(s.energy)) metric("energy_" + k + "_pj", v);
  double peak = 0;
  for (size_t c = 0; c < run.problem.cores.size() && c < s.peak_memory_bits.size(); ++c)
    if (!run.problem.cores[c].offchip) peak = std::max(peak, s.peak_memory_bits[c]);
  metric("peak_core_memory_bits", peak);
  if (run.mapped) {
    metric("tile_cost_unique_keys", double(run.tile_cost_stats.unique_keys));
    metric("tile_cost_mapper_calls", double(run.tile_cost_stats.mapper_calls));
    metric("tile_cost_seconds", run.tile_cost_stats.seconds);
  }
  metric("schedule_seconds", run.seconds.at("schedule").get<double>());
  // The group's name: the label without spaces and slashes, then the unit id (two entries may
  // schedule one workload on one architecture with different allocations).
  std::string name;
  for (char ch : unit.label.substr(unit.label.find(' ') + 1)) name += ch == ' ' || ch == '/' ? '_' : ch;
  name += "_" + unit.id.substr(0, 8);
  r.data = schedule_record_to_json(schedule_record(name, spec.semantics, unit.label, run.problem, s));
  return r;
}

}  // namespace mapfuse::cli
