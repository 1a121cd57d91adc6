// The study's "schedule" unit (partitioners/study.hpp StudySchedule): `mapfuse schedule`'s
// pipeline on one (workload, architecture, mode), its totals as metrics and its schedule as the
// record the study file stores under /schedules.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <limits>

#include "cli/schedule_record.hpp"
#include "cli/schedule_run.hpp"
#include "cli/study_units.hpp"
#include "engine/search/stream/allocation.hpp"

namespace mapfuse::cli {
namespace {

// The allocation chosen, per layer its cores in network order: "conv1: c0,c1; relu1: c2" (the
// unit's best_mapping, as `mapfuse schedule --json`'s "allocation").
std::string allocation_text(const Workload& w, const Architecture& arch, const TileSet& tiles, const std::vector<int>& cores) {
  const auto per_layer = layer_cores(w, tiles, cores);
  std::string out;
  for (size_t l = 0; l < w.einsums.size(); ++l) {
    out += (l ? "; " : "") + w.einsums[l].name + ":";
    for (size_t k = 0; k < per_layer[l].size(); ++k)
      out += (k ? "," : " ") + arch.cores[size_t(per_layer[l][k])].name;
  }
  return out;
}

// Length of the union of [start, end) intervals, and of the part of `b`'s union outside `a`'s.
std::pair<double, double> union_and_outside(std::vector<std::pair<double, double>> a, std::vector<std::pair<double, double>> b) {
  auto merge = [](std::vector<std::pair<double, double>>& v) {
    std::sort(v.begin(), v.end());
    std::vector<std::pair<double, double>> out;
    for (const auto& [s, e] : v) {
      if (!(e > s)) continue;
      if (!out.empty() && s <= out.back().second) out.back().second = std::max(out.back().second, e);
      else out.push_back({s, e});
    }
    v = std::move(out);
  };
  merge(a);
  merge(b);
  double ua = 0, outside = 0;
  for (const auto& [s, e] : a) ua += e - s;
  size_t k = 0;
  for (const auto& [s, e] : b) {
    double covered = 0;
    while (k < a.size() && a[k].second <= s) ++k;
    for (size_t j = k; j < a.size() && a[j].first < e; ++j) covered += std::min(e, a[j].second) - std::max(s, a[j].first);
    outside += (e - s) - covered;
  }
  return {ua, outside};
}

}  // namespace

UnitResult run_schedule_unit(const WorkUnit& unit, TileCostCache* tile_cache) {
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
  spec.mapper_gap = p.value("mapper_gap", 0.0);
  spec.mapper_work = p.value("mapper_work", int64_t{0});
  if (const auto it = p.find("ga"); it != p.end()) {
    spec.ga.generations = it->at("generations").get<int>();
    spec.ga.population = it->at("population").get<int>();
    spec.ga.seed = it->at("seed").get<uint64_t>();
  }
  if (const auto it = p.find("waco"); it != p.end()) {
    spec.waco.max_parallelism = it->at("max_parallelism").get<int>();
    spec.waco.time_limit_s = it->at("time_limit_s").get<double>();
    spec.waco.max_nodes = it->value("max_nodes", int64_t{0});
    spec.waco.seed = it->at("seed").get<int>();
  }
  const ScheduleRun run = run_schedule(spec, tile_cache);
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
  // Where the latency goes (Stream's Fig. 14 splits it into computation and communication): the
  // time some CT computes, and the time only transfers run (broadcast copies, free on the links, aside).
  {
    std::vector<std::pair<double, double>> computing, moving;
    for (const coala::ScheduledTile& t : s.tiles) computing.push_back({t.start, t.end});
    for (const coala::Transfer& t : s.transfers)
      if (t.occupies_links) moving.push_back({t.start, t.end});
    const auto [busy, comm_only] = union_and_outside(std::move(computing), std::move(moving));
    metric("compute_busy_cc", busy);
    metric("comm_only_cc", comm_only);
  }
  if (run.mapped) {
    metric("tile_cost_unique_keys", double(run.tile_cost_stats.unique_keys));
    metric("tile_cost_mapper_calls", double(run.tile_cost_stats.mapper_calls));
    metric("tile_cost_seconds", run.tile_cost_stats.seconds);
    // Mapping problems of all the unit's phases found in the cache or mapped: like the seconds,
    // they depend on what ran before in the process (and mapper_calls counts misses only), so
    // they are not part of the result's identity; the costs themselves are the same either way.
    metric("tile_cost_cache_hits", double(run.tile_cache_hits));
    metric("tile_cost_cache_misses", double(run.tile_cache_misses));
    // Mapper calls of this unit's misses that the work limit stopped (their CTs' costs are the
    // best found, not proven optimal); 0 without mapper_work.
    metric("tile_cost_truncated", double(run.tile_truncated));
  }
  metric("schedule_seconds", run.seconds.at("schedule").get<double>());
  // The allocation's search (`mapfuse schedule --json`'s search_seconds): the GA's generations
  // (its candidate costs are tile_cost_seconds), WACO's candidate costs, models and CBC.
  metric("search_seconds", run.ga ? run.ga->seconds : run.seconds.at("allocation").get<double>());
  if (run.ga) {
    const GaResult& ga = *run.ga;
    metric("ga_genes", double(run.ga_genes));
    metric("ga_evaluations", double(ga.evaluations));
    metric("ga_infeasible", double(ga.infeasible));
    metric("ga_front", double(ga.front.size()));
    // Best so far per generation (seconds are not timed per generation: NaN).
    for (const GaGeneration& e : ga.trace)
      r.trace.push_back({std::numeric_limits<double>::quiet_NaN(), e.evaluations, e.best_edp});
    for (const GaPoint& pt : ga.front) r.pareto.push_back({pt.energy_pj, pt.latency_cc, {}});
  }
  if (run.waco) {
    const WacoResult& wr = *run.waco;
    double gap = 0, optimal = 0, time_limited = 0, rejected = 0;
    for (const WacoStack& st : wr.stacks) {
      gap = std::max(gap, st.solution.gap);
      optimal += st.solution.optimal;
      time_limited += st.solution.time_limited;
      rejected += st.solution.rejected;
    }
    // CBC incumbents that broke the model, replaced by the start (solve_waco): only when it happens.
    if (rejected > 0) metric("waco_rejected_stacks", rejected);
    // Stacks CBC left at its time limit: their allocation depends on the machine's speed.
    metric("waco_time_limited_stacks", time_limited);
    metric("waco_cost_seconds", wr.cost_seconds);
    metric("waco_solve_seconds", wr.solve_seconds);
    metric("waco_stacks", double(wr.stacks.size()));
    metric("waco_optimal_stacks", optimal);
    metric("waco_max_gap", gap);
    metric("waco_steady_tile_share", wr.summary.tile_share());
    metric("waco_steady_mac_share", wr.summary.mac_share());
  }
  r.best_mapping = allocation_text(run.workload, run.arch, run.graph.tiles, run.core_of_tile);
  // The group's name: the label without spaces and slashes, then the unit id (two entries may
  // schedule one workload on one architecture with different allocations).
  std::string name;
  for (char ch : unit.label.substr(unit.label.find(' ') + 1)) name += ch == ' ' || ch == '/' ? '_' : ch;
  name += "_" + unit.id.substr(0, 8);
  r.data = schedule_record_to_json(schedule_record(name, spec.semantics, unit.label, run.problem, s));
  return r;
}

}  // namespace mapfuse::cli
