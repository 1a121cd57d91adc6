// `mapfuse schedule`: COALA list scheduling (engine/cost/coala.hpp) of a workload's computation
// tiles on a multi-core architecture (--arch --workload --allocation [--tile-costs]: tiles, graph,
// allocation, tile costs, problem, schedule), or `--replay-stream DIR`: Stream's own dumped schedule
// (shared/data/stream/derived/coala/README.md) rescheduled and compared CN by CN (docs/stream.md).
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <numeric>

#include "cli/commands.hpp"
#include "cli/schedule_record.hpp"
#include "cli/schedule_run.hpp"
#include "engine/common/error.hpp"
#include "engine/cost/coala.hpp"
#include "engine/search/stream/allocation.hpp"
#include "engine/validation/stream_replay.hpp"

namespace mapfuse::cli {
namespace {

struct ScheduleOptions {
  std::string replay, semantics = "stream", output;
  std::vector<std::string> sets;
  bool json = false;
  int show = 20;
  std::string arch, workload, mode = "fused", stacks = "auto", granularity = "stream:4", allocation, tile_costs,
      write_tile_costs, tile_cache;
  bool fold_unary = false;
  double mapper_gap = 0;
  int64_t mapper_work = 0;
  bool trace_mapper = false;
  GaOptions ga;
  WacoOptions waco;
  int seed = 1;  // --seed: the GA's random seed or CBC's
};

int run_replay(const ScheduleOptions* o) {
  const coala::Options opt = schedule_options(o->semantics, o->sets);
  const StreamReplay replay = load_stream_replay(o->replay);
  const auto t0 = std::chrono::steady_clock::now();
  const coala::Schedule s = coala::schedule(replay.problem, opt);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const ReplayComparison c = compare_replay(replay, s);
  const bool strict = o->semantics == "stream" && o->sets.empty();
  if (!o->output.empty()) {  // named after the folder
    std::string name = std::filesystem::path(o->replay + "/.").lexically_normal().parent_path().filename().string();
    if (name.empty() || name == "." || name == "..") name = "schedule";
    write_schedule_h5(o->output, {schedule_record(name, o->semantics, replay.folder, replay.problem, s)});
  }
  if (o->json) {
    nlohmann::json j;
    j["folder"] = replay.folder;
    j["semantics"] = o->semantics;
    j["latency_cc"] = s.latency_cc;
    j["energy_pj"] = s.energy.total();
    j["expected_latency_cc"] = replay.expected_latency_cc;
    j["expected_energy_pj"] = replay.expected_energy_pj;
    j["latency_match"] = c.latency_match;
    j["energy_match"] = c.energy_match;
    j["cns"] = c.cns;
    j["cn_mismatches"] = c.cn_mismatches;
    j["pick_mismatches"] = c.pick_mismatches;
    j["transfers"] = c.transfers;
    j["expected_transfers"] = c.expected_transfers;
    j["transfer_mismatches"] = c.transfer_mismatches;
    j["schedule_seconds"] = seconds;
    for (const auto& [k, v] : s.energy.stream_breakdown()) j["energy_breakdown_pj"][k] = v;
    j["peak_memory_bits"] = s.peak_memory_bits;
    j["differences"] = nlohmann::json::array();
    for (size_t i = 0; i < c.diffs.size() && int(i) < o->show; ++i) {
      const auto& d = c.diffs[i];
      auto num = [](double v) { return std::isnan(v) ? nlohmann::json() : nlohmann::json(v); };
      j["differences"].push_back({{"cn", fmt::format("L{}S{}", d.layer, d.sub)}, {"start", d.start},
                                  {"end", d.end}, {"expected_start", d.expected_start},
                                  {"expected_end", d.expected_end}, {"preds_end", d.preds_end},
                                  {"ready", d.ready}, {"after_inputs", d.after_inputs},
                                  {"expected_preds_end", num(d.expected_preds_end)},
                                  {"expected_ready", num(d.expected_ready)},
                                  {"expected_after_inputs", num(d.expected_after_inputs)}});
    }
    std::cout << j.dump(1) << "\n";
  } else {
    fmt::print("{}: {} CNs, {} transfers and blocks, semantics {}, scheduled in {:.1f} ms\n", replay.folder,
               c.cns, c.transfers, o->semantics, seconds * 1e3);
    fmt::print("latency  {:.10g} cc (Stream {:.10g}) {}\n", s.latency_cc, replay.expected_latency_cc,
               c.latency_match ? "match" : "DIFFERS");
    fmt::print("energy   {:.12g} pJ (Stream {:.12g}) {}\n", s.energy.total(), replay.expected_energy_pj,
               c.energy_match ? "match" : "DIFFERS");
    for (const auto& [k, v] : s.energy.stream_breakdown()) fmt::print("  {:<46} {:.12g}\n", k, v);
    fmt::print("CNs whose start or end differ: {} of {} (picked in a different order: {})\n",
               c.cn_mismatches, c.cns, c.pick_mismatches);
    if (c.expected_transfers)
      fmt::print("transfer rows differing from transfers.csv: {} of {} (first at row {})\n",
                 c.transfer_mismatches, c.expected_transfers, c.first_transfer_mismatch);
    if (c.first_transfer_mismatch >= 0 && size_t(c.first_transfer_mismatch) < c.transfers &&
        size_t(c.first_transfer_mismatch) < c.expected_transfers) {
      const auto& g = c.first_transfer_got;
      const auto& e = c.first_transfer_expected;
      fmt::print("  row {}: COALA {} of tensor {} {}->{} for tile {} [{:.10g}, {:.10g}) searched from {:.10g}, "
                 "occupies links {}; Stream {} [{:.10g}, {:.10g}) new {}\n",
                 c.first_transfer_mismatch, coala::to_string(g.cause), g.tensor, g.sender, g.receiver, g.tile,
                 g.start, g.end, g.search_from, g.occupies_links, e.block ? "block" : "transfer", e.start,
                 e.end, e.new_event);
    }
    for (size_t i = 0; i < c.diffs.size() && int(i) < o->show; ++i) {
      const auto& d = c.diffs[i];
      fmt::print("  L{}S{}: start {:.10g} end {:.10g} (preds end {:.10g}, ready {:.10g}, after inputs {:.10g}); "
                 "Stream {:.10g} .. {:.10g} (preds end {:.10g}, ready {:.10g}, after inputs {:.10g})\n",
                 d.layer, d.sub, d.start, d.end, d.preds_end, d.ready, d.after_inputs, d.expected_start,
                 d.expected_end, d.expected_preds_end, d.expected_ready, d.expected_after_inputs);
    }
  }
  return strict && !c.ok() ? 1 : 0;
}

int run_pipeline(const ScheduleOptions* o) {
  ScheduleSpec spec;
  spec.arch = o->arch;
  spec.workload = o->workload;
  spec.mode = o->mode;
  spec.stacks = o->stacks;
  spec.granularity = o->granularity;
  spec.allocation = o->allocation;
  spec.tile_costs = o->tile_costs;
  spec.write_tile_costs = o->write_tile_costs;
  spec.semantics = o->semantics;
  spec.sets = o->sets;
  spec.fold_unary = o->fold_unary;
  spec.trace_mapper = o->trace_mapper;
  spec.mapper_gap = o->mapper_gap;
  spec.mapper_work = o->mapper_work;
  spec.ga = o->ga;
  spec.waco = o->waco;
  spec.ga.seed = static_cast<uint64_t>(o->seed);
  spec.waco.seed = o->seed;
  // A tile-cost cache file (docs/stream.md, "Tile-cost cache"): loaded first, saved after.
  TileCostCache cache;
  if (!o->tile_cache.empty()) {
    const CacheLoadResult lr = load_tile_cost_cache(o->tile_cache, cache);
    if (lr.status == CacheLoad::Stale) fmt::print(stderr, "warning: {}\n", lr.message);
  }
  const ScheduleRun run = run_schedule(spec, &cache);
  if (!o->tile_cache.empty() && (run.tile_cache_misses > 0 || !std::filesystem::exists(o->tile_cache)))
    save_tile_cost_cache(o->tile_cache, cache);
  const Architecture& arch = run.arch;
  const Workload& w = run.workload;
  const TileGraph& g = run.graph;
  const coala::Problem& problem = run.problem;
  const coala::Schedule& s = run.schedule;
  const nlohmann::json& seconds = run.seconds;
  const bool mapped = run.mapped;
  const TileCostStats& tstats = run.tile_cost_stats;
  const std::vector<int>& cores = run.core_of_tile;
  if (!o->output.empty())  // named after the workload
    write_schedule_h5(o->output, {schedule_record(w.name, o->semantics, o->workload, problem, s)});
  const double energy = s.energy.total();
  const auto per_layer = layer_cores(w, g.tiles, cores);
  if (o->json) {
    nlohmann::json j;
    j["arch"] = arch.name;
    j["workload"] = w.name;
    j["mode"] = o->mode;
    j["semantics"] = o->semantics;
    j["latency_cc"] = s.latency_cc;
    j["energy_pj"] = energy;
    j["edp"] = s.latency_cc * energy;
    j["cts"] = g.tiles.tiles.size();
    j["edges"] = g.edges.size();
    j["stacks"] = g.tiles.stacks.size();
    j["transfers"] = s.transfers.size();
    for (const auto& [k, v] : energy_parts(s.energy)) j["energy_parts_pj"][k] = v;
    for (const auto& [k, v] : s.energy.stream_breakdown()) j["energy_breakdown_pj"][k] = v;
    j["peak_memory_bits"] = s.peak_memory_bits;
    j["seconds"] = seconds;
    j["search_seconds"] = seconds["allocation"];
    if (run.waco) j["waco"] = waco_json(*run.waco, w);
    j["tile_costs"] = mapped ? nlohmann::json{{"source", "mapper"}, {"tiles", tstats.tiles},
                                              {"unique_keys", tstats.unique_keys},
                                              {"mapper_problems", tstats.mapper_problems},
                                              {"mapper_calls", tstats.mapper_calls},
                                              {"mappings_evaluated", tstats.mappings_evaluated},
                                              {"seconds", tstats.seconds},
                                              {"mapper_gap", o->mapper_gap},
                                              {"mapper_work", o->mapper_work},
                                              {"truncated", run.tile_truncated},
                                              {"cache_hits", run.tile_cache_hits},
                                              {"cache_misses", run.tile_cache_misses}}
                             : nlohmann::json{{"source", o->tile_costs}};
    for (size_t l = 0; l < w.einsums.size(); ++l) {
      nlohmann::json names = nlohmann::json::array();
      for (int c : per_layer[l]) names.push_back(arch.cores[size_t(c)].name);
      j["allocation"][w.einsums[l].name] = names;
    }
    if (run.ga) {
      const GaResult& ga = *run.ga;
      j["search_seconds"] = ga.seconds;
      nlohmann::json trace = nlohmann::json::array(), front = nlohmann::json::array();
      for (const GaGeneration& e : ga.trace)
        trace.push_back({{"generation", e.generation}, {"evaluations", e.evaluations},
                         {"best_latency_cc", e.best_latency_cc}, {"best_energy_pj", e.best_energy_pj},
                         {"best_edp", e.best_edp}});
      for (const GaPoint& p : ga.front)
        front.push_back({{"latency_cc", p.latency_cc}, {"energy_pj", p.energy_pj}, {"edp", p.edp()}});
      j["ga"] = {{"genes", run.ga_genes}, {"generations", o->ga.generations}, {"population", o->ga.population}, {"seed", o->seed},
                 {"evaluations", ga.evaluations}, {"infeasible", ga.infeasible}, {"offspring", ga.offspring}, {"problem_rebuilds", run.ga_rebuilds},
                 {"trace", trace}, {"front", front}};
    }
    std::cout << j.dump(1) << "\n";
  } else {
    fmt::print("{} on {}: {} CTs, {} edges, {} stacks, mode {}, semantics {}\n", w.name, arch.name, g.tiles.tiles.size(),
               g.edges.size(), g.tiles.stacks.size(), o->mode, o->semantics);
    fmt::print("latency  {:.10g} cc\nenergy   {:.12g} pJ\nEDP      {:.6g} cc*pJ\n", s.latency_cc, energy, s.latency_cc * energy);
    for (const auto& [k, v] : s.energy.stream_breakdown()) fmt::print("  {:<46} {:.12g}\n", k, v);
    if (mapped)
      fmt::print("tile costs: mapper, {} CTs, {} unique (CT shape, core) keys, {} mapping problems, {} mapper calls, "
                 "{} mappings evaluated, {:.3f} s\n",
                 tstats.tiles, tstats.unique_keys, tstats.mapper_problems, tstats.mapper_calls,
                 tstats.mappings_evaluated, tstats.seconds);
    if (mapped)
      fmt::print("tile-cost cache: {} of {} mapping problems found (all phases){}\n", run.tile_cache_hits,
                 run.tile_cache_hits + run.tile_cache_misses, o->tile_cache.empty() ? std::string() : ", file " + o->tile_cache);
    if (run.waco)
      fmt::print("waco: steady states {} of {} CTs ({:.1f} %) for {:.1f} % of the MACs; {} stacks solved in {:.3f} s "
                 "(candidate costs {:.3f} s), largest gap {:.3g}\n",
                 run.waco->summary.steady_tiles, run.waco->summary.tiles, 100 * run.waco->summary.tile_share(),
                 100 * run.waco->summary.mac_share(), run.waco->stacks.size(), run.waco->solve_seconds,
                 run.waco->cost_seconds,
                 std::accumulate(run.waco->stacks.begin(), run.waco->stacks.end(), 0.0,
                                 [](double m, const WacoStack& x) { return std::max(m, x.solution.gap); }));
    fmt::print("seconds: load {:.3f}, tiles {:.3f}, allocation {:.3f}, tile costs {:.3f}, problem {:.3f}, schedule {:.3f}\n",
               seconds["load"].get<double>(), seconds["tiles"].get<double>(), seconds["allocation"].get<double>(),
               seconds["tile_costs"].get<double>(), seconds["problem"].get<double>(), seconds["schedule"].get<double>());
    if (run.ga) {
      const GaResult& ga = *run.ga;
      fmt::print("ga: {} genes, {} generations x {} individuals, seed {}: {} schedules ({} problem rebuilds) in {:.3f} s, "
                 "{} allocations on the front\n",
                 run.ga_genes, o->ga.generations, o->ga.population, o->seed, ga.evaluations, run.ga_rebuilds, ga.seconds,
                 ga.front.size());
      for (const GaGeneration& e : ga.trace)
        fmt::print("  generation {:>3}: {:>6} schedules, best latency {:.10g} cc, energy {:.12g} pJ, EDP {:.6g}\n",
                   e.generation, e.evaluations, e.best_latency_cc, e.best_energy_pj, e.best_edp);
    }
  }
  return 0;
}

}  // namespace

Command add_schedule_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("schedule", "COALA list scheduling of computation tiles on a multi-core "
                                             "accelerator (Stream): --arch --workload --allocation [--tile-costs], or "
                                             "--replay-stream DIR to check it against Stream's own schedule");
  auto o = std::make_shared<ScheduleOptions>();
  cmd->add_option("--replay-stream", o->replay, "a folder dumped from Stream (cns.csv, edges.csv, cost_lut.csv, "
                                                "transfers.csv, totals.json)");
  cmd->add_option("--arch", o->arch, "a multi-core architecture (preset name or TOML file)");
  cmd->add_option("--workload", o->workload, "the workload (ONNX: activations stay layers of their own unless "
                                             "--fold-unary; or any workload spec)");
  cmd->add_flag("--fold-unary", o->fold_unary, "fold ONNX activations into their producers");
  cmd->add_option("--mode", o->mode, "fused (layer stacks from --stacks) or lbl (layer by layer)")->capture_default_str();
  cmd->add_option("--stacks", o->stacks, "auto (Stream's weight-capacity rule), auto:F (the same rule at F times "
                                         "the cores' weight memory), first (only the first such stack fused, Stream "
                                         "classic's default) or Einsum index ranges \"0-10,11-21\"")
      ->capture_default_str();
  cmd->add_option("--granularity", o->granularity, "stream:N: one CT per output row in fused stacks, MAC and "
                                                   "single-input element-wise layers split into N inter-core groups")
      ->capture_default_str();
  cmd->add_option("--allocation", o->allocation, "an allocation file (TOML, docs/stream.md), greedy, ga "
                                                 "(Stream's NSGA-II over layer -> core allocations) or waco (Stream's "
                                                 "constraint optimisation of each stack's steady state, solved by CBC)");
  cmd->add_option("--generations", o->ga.generations, "--allocation ga: generations")->capture_default_str();
  cmd->add_option("--population", o->ga.population, "--allocation ga: individuals per generation")->capture_default_str();
  cmd->add_option("--max-parallelism", o->waco.max_parallelism, "waco: the largest CT split over cores along K "
                                                                "(0 = as many cores as can run the layer)")
      ->capture_default_str();
  cmd->add_option("--time-limit", o->waco.time_limit_s, "waco: CBC's time limit per stack, seconds")->capture_default_str();
  cmd->add_option("--max-nodes", o->waco.max_nodes,
                  "waco: CBC's branch-and-bound nodes per stack (a limit that stops at the same place on every "
                  "machine, unlike the time limit); 0 = no limit")
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "ga: the random seed; waco: CBC's random seed")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--tile-costs", o->tile_costs, "a tile-cost table (CSV, docs/stream.md) or a Stream dump folder "
                                                 "(its cost_lut.csv and cns.csv); without it, mapfuse's mapper "
                                                 "costs each unique (CT shape, core)");
  cmd->add_option("--write-tile-costs", o->write_tile_costs, "write the tile costs used as a table");
  cmd->add_option("--tile-cache", o->tile_cache, "a tile-cost cache file (docs/stream.md, \"Tile-cost cache\"): the mapper's "
                                                 "costs found there are not searched again; new ones are added to it");
  cmd->add_option("--mapper-gap", o->mapper_gap,
                  "the mapper's per-tile searches within this relative gap of their optimum (the least cycles "
                  "exactly, the energy within the gap; e.g. 1e-3), each on one thread; 0 = exact")
      ->capture_default_str();
  cmd->add_option("--mapper-work", o->mapper_work,
                  "stop each per-tile search after this much work (level choices enumerated, ~0.1 us each, e.g. "
                  "20000000) with the best mapping found, not proven optimal; each on one thread; 0 = no limit")
      ->capture_default_str();
  cmd->add_flag("--trace-mapper", o->trace_mapper, "print a line per mapper call of the tile costs to stderr (CT, core, rank "
                                                   "sizes, mappings evaluated, choices cut per level, best, seconds)");
  cmd->add_option("--semantics", o->semantics, "stream (Stream classic cb9dfc52, quirks included) or mapfuse")
      ->capture_default_str();
  cmd->add_option("--set", o->sets, "override one switch of the semantics: NAME=0|1 (dedup_only_equal_start, "
                                    "sync_cores_at_layer_start, constant_priority_overcount, input_headstart; with --workload also "
                                    "sinks_by_layer_edges)");
  cmd->add_option("--show", o->show, "per-CN differences to print (--replay-stream)")->capture_default_str();
  cmd->add_flag("--json", o->json, "print the result as JSON");
  cmd->add_option("--output", o->output, "also write the schedule to this HDF5 file (docs/results.md, \"Schedule files\"; "
                                         "`mapfuse report FILE --plots DIR` draws it)");
  return {cmd, [o]() {
            const std::vector<std::pair<const char*, const std::string*>> inputs = {
                {"--arch", &o->arch}, {"--workload", &o->workload}, {"--allocation", &o->allocation},
                {"--tile-costs", &o->tile_costs}};
            if (!o->replay.empty()) {
              for (const auto& [flag, v] : inputs)
                if (!v->empty()) throw InputError({}, flag, "not used with --replay-stream (the folder has it all)");
              return run_replay(o.get());
            }
            for (size_t i = 0; i < 3; ++i)
              if (inputs[i].second->empty())
                throw InputError({}, inputs[i].first, "required (or give --replay-stream DIR)");
            return run_pipeline(o.get());
          }};
}

}  // namespace mapfuse::cli
