#pragma once
// One schedule of a workload's computation tiles on a multi-core architecture, as
// `mapfuse schedule --arch --workload` and a study's "schedule" unit both run it: tiles and their
// graph, allocation, tile costs (a table, a Stream dump folder or mapfuse's own mapper), the COALA
// problem and its schedule (docs/stream.md, "Scheduling a workload").
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/arch/architecture.hpp"
#include "engine/cost/coala.hpp"
#include "engine/search/stream/ga_allocation.hpp"
#include "engine/search/stream/tile_costs.hpp"
#include "engine/search/stream/schedule_problem.hpp"
#include "engine/search/stream/waco.hpp"
#include "engine/workload/tile_graph.hpp"
#include "engine/workload/workload.hpp"

namespace mapfuse::cli {

struct ScheduleSpec {
  std::string arch, workload;           // preset or TOML; ONNX or any workload spec
  std::string mode = "fused";           // fused | lbl
  std::string stacks = "auto";          // auto | auto:F | first | "0-10,11-21" (StackSpec)
  std::string granularity = "stream:4";
  std::string allocation;               // an allocation file, greedy, ga or waco
  GaOptions ga;                         // --allocation ga
  WacoOptions waco;                     // --max-parallelism, --time-limit, --seed (allocation waco)
  std::string tile_costs;               // a table, a Stream dump folder, or "" = the mapper
  std::string write_tile_costs;         // "" = none
  std::string semantics = "stream";
  std::vector<std::string> sets;        // NAME=0|1 switches
  bool fold_unary = false;
  bool trace_mapper = false;             // a line per mapper call to stderr
  double mapper_gap = 0;                 // per-tile searches within this relative gap (0 = exact)
  int64_t mapper_work = 0;               // per-tile searches stop after this much work (0 = no limit)
};

struct ScheduleRun {
  Architecture arch;
  Workload workload;
  TileGraph graph;
  std::vector<int> core_of_tile;
  bool mapped = false;      // tile costs from map_tile_costs (then tile_cost_stats holds its figures)
  TileCostStats tile_cost_stats;  // of the final graph's costs (the GA's: its candidates')
  // Mapping problems found in the tile-cost cache and mapped, over every phase of the run (WACO's
  // candidate costs and its unrolled graph, or the GA's candidates, or the allocation's graph).
  int64_t tile_cache_hits = 0, tile_cache_misses = 0;
  int64_t tile_truncated = 0;  // mapper calls stopped by mapper_work
  std::optional<WacoResult> waco;  // allocation waco: its stacks and figures (its graph moved to `graph`)
  coala::Problem problem;
  coala::Schedule schedule;
  std::optional<GaResult> ga;  // --allocation ga: the search (its best allocation is core_of_tile)
  int64_t ga_rebuilds = 0;     // problems rebuilt during the search (AllocationEvaluator::rebuilds)
  int64_t ga_genes = 0;
  nlohmann::json seconds;   // load, tiles, allocation, tile_costs, problem, schedule
};

// The scheduler's switches for a semantics and NAME=0|1 overrides; with `problem`, also the
// problem builder's. InputError (key --semantics / --set) on unknown names.
coala::Options schedule_options(const std::string& semantics, const std::vector<std::string>& sets,
                                ScheduleProblemOptions* problem = nullptr);

// Runs the whole pipeline. InputError (keys named as the command's flags) on bad input. Mapper
// costs go through `cache` (docs/stream.md, "Tile-cost cache"): a study's, shared by the units of
// a process, or, when null, one of this run alone, which WACO's phases still share.
ScheduleRun run_schedule(const ScheduleSpec& spec, TileCostCache* cache = nullptr);

// WACO's figures for --json: steady states (the paper's Fig. 11), per stack the MILP's size,
// solve time, objective, bound and gap, and the chosen parallelism per layer.
nlohmann::json waco_json(const WacoResult& r, const Workload& w);

// The ten energy parts of a schedule by name (cn_onchip, cn_offchip, link_*, memory_*); they sum
// to its total.
std::vector<std::pair<std::string, double>> energy_parts(const coala::Energy& e);

}  // namespace mapfuse::cli
