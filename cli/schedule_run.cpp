// `mapfuse schedule --arch --workload` and the study's "schedule" unit: one pipeline.
#include "cli/schedule_run.hpp"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <mutex>

#include <fmt/format.h>

#include "engine/arch/arch_toml.hpp"
#include "engine/common/error.hpp"
#include "engine/cost/tile_cost_csv.hpp"
#include "engine/search/stream/allocation.hpp"
#include "engine/workload/load.hpp"
#include "engine/workload/onnx_import.hpp"

namespace mapfuse::cli {
namespace {

// The weight memory of the cores that run MAC layers (Stream's stack rule): the smallest, over
// those cores, outermost on-chip level that may keep weights.
int64_t weight_capacity_bits(const Architecture& a) {
  int64_t cap = -1;
  for (const Core& c : a.cores) {
    if (!c.can_run(OpKind::Mac)) continue;
    for (int l = int(c.levels.size()) - 2; l >= 0; --l)
      if (c.levels[size_t(l)].may_keep & role_bit(TensorRole::Weight)) {
        const Level& lv = c.levels[size_t(l)];
        const int64_t bits = lv.entries * lv.word_bits * lv.instances;
        if (cap < 0 || bits < cap) cap = bits;
        break;
      }
  }
  return cap < 0 ? 0 : cap;
}

}  // namespace

// The scheduler's switches and, for a workload run, the builder's (`problem`; null for a replay,
// whose folder fixes the problem).
coala::Options schedule_options(const std::string& semantics, const std::vector<std::string>& sets,
                                ScheduleProblemOptions* problem) {
  coala::Semantics s;
  if (semantics == "stream") {
    s = coala::Semantics::Stream;
  } else if (semantics == "mapfuse") {
    s = coala::Semantics::Mapfuse;
  } else {
    throw InputError({}, "--semantics",
                     "unknown semantics '" + semantics + "'; expected stream or mapfuse" +
                         did_you_mean(semantics, {"stream", "mapfuse"}));
  }
  coala::Options o = coala::Options::for_semantics(s);
  std::vector<std::pair<std::string, bool*>> switches = {
      {"dedup_only_equal_start", &o.dedup_only_equal_start},
      {"sync_cores_at_layer_start", &o.sync_cores_at_layer_start},
      {"constant_priority_overcount", &o.constant_priority_overcount},
      {"input_headstart", &o.input_headstart}};
  if (problem) {
    *problem = ScheduleProblemOptions::for_semantics(s);
    switches.emplace_back("sinks_by_layer_edges", &problem->sinks_by_layer_edges);
  }
  for (const auto& kv : sets) {
    const auto eq = kv.find('=');
    const std::string k = kv.substr(0, eq), v = eq == std::string::npos ? "" : kv.substr(eq + 1);
    std::vector<std::string> names;
    bool* target = nullptr;
    for (const auto& [name, p] : switches) {
      names.push_back(name);
      if (name == k) target = p;
    }
    if (!target) throw InputError({}, "--set", "unknown switch '" + k + "'" + did_you_mean(k, names));
    if (v != "0" && v != "1") throw InputError({}, "--set " + k, "expected " + k + "=0 or " + k + "=1");
    *target = v == "1";
  }
  return o;
}

ScheduleRun run_schedule(const ScheduleSpec& spec, TileCostCache* cache) {
  const ScheduleSpec* o = &spec;
  TileCostCache own_cache;
  if (!cache) cache = &own_cache;
  ScheduleRun run;
  nlohmann::json& seconds = run.seconds;
  using clock = std::chrono::steady_clock;
  auto since = [](clock::time_point t) { return std::chrono::duration<double>(clock::now() - t).count(); };
  ScheduleProblemOptions popt;
  const coala::Options opt = schedule_options(o->semantics, o->sets, &popt);
  if (o->mode != "fused" && o->mode != "lbl")
    throw InputError({}, "--mode", "expected fused or lbl, got '" + o->mode + "'" + did_you_mean(o->mode, {"fused", "lbl"}));
  int64_t inter_parts = 4;
  if (o->granularity.rfind("stream", 0) == 0) {
    const std::string rest = o->granularity.substr(6);
    if (!rest.empty()) {
      try {
        size_t used = 0;
        if (rest[0] != ':') throw std::invalid_argument(rest);
        inter_parts = std::stoll(rest.substr(1), &used);
        if (used != rest.size() - 1 || inter_parts < 1) throw std::invalid_argument(rest);
      } catch (const std::exception&) {
        throw InputError({}, "--granularity", "expected stream or stream:N with N >= 1, got '" + o->granularity + "'");
      }
    }
  } else {
    throw InputError({}, "--granularity", "expected stream or stream:N, got '" + o->granularity + "'");
  }

  auto t = clock::now();
  run.arch = load_architecture(o->arch);
  const Architecture& arch = run.arch;
  Workload& w = run.workload;
  if (std::filesystem::path(o->workload).extension() == ".onnx") {
    OnnxOptions oo;
    oo.fold_unary = o->fold_unary;
    w = import_onnx(o->workload, oo);
  } else {
    w = load_workload(o->workload);
  }
  seconds["load"] = since(t);

  t = clock::now();
  TilingOptions tiling;
  tiling.layers = stream_tiling(w, inter_parts);
  if (o->mode == "lbl") {
    tiling.stacks = layer_stacks_lbl(w);
  } else {
    tiling.stacks = layer_stacks(w, parse_stack_spec(o->stacks, "--stacks"), weight_capacity_bits(arch));
  }
  run.graph = build_tile_graph(w, tiling);
  const TileGraph& g = run.graph;
  seconds["tiles"] = since(t);

  if (!(o->mapper_gap >= 0) || !std::isfinite(o->mapper_gap))
    throw InputError({}, "--mapper-gap", fmt::format("expected a relative gap >= 0 (0 = exact), not {}", o->mapper_gap));
  if (o->mapper_work < 0)
    throw InputError({}, "--mapper-work", fmt::format("expected a work limit >= 0 (0 = none), not {}", o->mapper_work));
  // Without a table, each unique (CT shape, core) is mapped by mapfuse's own mapper (Stream's criterion).
  run.mapped = o->tile_costs.empty();
  auto costs_of = [&](const TileSet& ts, std::span<const int> on, TileCostStats* stats,
                      std::span<const int64_t> held = {}) {
    if (run.mapped) {
      TileCostStats st;
      TileCostOptions topt;
      topt.mapper_gap = o->mapper_gap;
      topt.mapper_work = o->mapper_work;
      if (o->trace_mapper)
        topt.trace = [](const std::string& line) {
          static std::mutex m;  // the mapper's threads report one line at a time
          std::lock_guard<std::mutex> lock(m);
          fmt::print(stderr, "mapper: {}\n", line);
        };
      std::vector<TileCost> c = map_tile_costs(w, ts, arch, on, topt, &st, cache, held);
      run.tile_cache_hits += st.cache_hits;
      run.tile_cache_misses += st.cache_misses;
      run.tile_truncated += st.truncated;
      if (stats) *stats = st;
      return c;
    }
    return std::filesystem::is_directory(o->tile_costs)
               ? tile_costs_from_table(stream_cost_lut_table(o->tile_costs, w, arch), w, ts, arch, on)
               : read_tile_costs(o->tile_costs, w, ts, arch, on);
  };
  std::vector<TileCost> costs;
  if (o->allocation == "ga") {
    // Every (CT, capable core) costed once, then the search (docs/stream.md, "Genetic allocator").
    check_ga_options(o->ga);
    t = clock::now();
    const std::vector<std::vector<int>> layer_cores = capable_cores(w, arch);
    const CandidateTiles cand = candidate_tiles(g.tiles, layer_cores);
    AllocationEvaluator ev(w, g, arch, layer_cores, costs_of(cand.tiles, cand.cores, &run.tile_cost_stats), popt, opt);
    seconds["tile_costs"] = since(t);
    t = clock::now();
    run.ga = ga_allocate(ev, o->ga);
    run.ga_rebuilds = ev.rebuilds();
    run.ga_genes = int64_t(ev.genes().size());
    run.core_of_tile = ev.core_of_tile(run.ga->best.genome);
    for (size_t i = 0; i < run.core_of_tile.size(); ++i) costs.push_back(ev.cost(int(i), run.core_of_tile[i]));
    seconds["allocation"] = since(t);
  } else {
    t = clock::now();
    if (o->allocation == "waco") {
      if (!(o->waco.time_limit_s > 0)) throw InputError({}, "--time-limit", "expected a positive number of seconds");
      if (o->waco.max_parallelism < 0) throw InputError({}, "--max-parallelism", "expected 0 (as many cores as can run a layer) or more");
      if (o->waco.max_nodes < 0) throw InputError({}, "--max-nodes", "expected 0 (no limit) or a positive node count");
      // WACO chooses each layer's K split, so it builds the graph it allocates (the granularity's N is not used).
      run.waco = waco_allocate(w, tiling.stacks, arch,
                               [&](const TileSet& ts, std::span<const int> on) { return costs_of(ts, on, nullptr); }, o->waco);
      run.graph = std::move(run.waco->graph);
      run.core_of_tile = run.waco->core_of_tile;
    } else {
      run.core_of_tile = o->allocation == "greedy" ? allocate_greedy(w, g.tiles, arch)
                                                   : allocate_tiles(load_allocation(o->allocation), w, g.tiles, arch);
    }
    seconds["allocation"] = since(t);
    t = clock::now();
    // The schedule's own CTs: an operand whose producers' outputs do not fit the core streams
    // from DRAM (held_input_bits). WACO's steady-state estimates above use the boxes alone.
    costs = costs_of(g.tiles, run.core_of_tile, &run.tile_cost_stats, held_input_bits(g));
    seconds["tile_costs"] = since(t);
  }
  const std::vector<int>& cores = run.core_of_tile;
  if (!o->write_tile_costs.empty()) write_tile_costs(o->write_tile_costs, w, g.tiles, arch, cores, costs);

  t = clock::now();
  run.problem = build_schedule_problem(w, g, arch, cores, costs, popt);
  seconds["problem"] = since(t);
  t = clock::now();
  run.schedule = coala::schedule(run.problem, opt);
  seconds["schedule"] = since(t);
  return run;
}

nlohmann::json waco_json(const WacoResult& r, const Workload& w) {
  nlohmann::json j;
  j["steady_state"] = {{"tiles", r.summary.tiles},           {"steady_tiles", r.summary.steady_tiles},
                       {"tile_share", r.summary.tile_share()}, {"macs", r.summary.macs},
                       {"steady_macs", r.summary.steady_macs}, {"mac_share", r.summary.mac_share()}};
  j["cost_seconds"] = r.cost_seconds;
  j["solve_seconds"] = r.solve_seconds;
  j["stacks"] = nlohmann::json::array();
  for (const WacoStack& s : r.stacks) {
    const WacoSolution& x = s.solution;
    nlohmann::json layers;
    for (size_t k = 0; k < s.layers.size(); ++k)
      layers[w.einsums[size_t(s.layers[k])].name] = s.instance.choices[k][size_t(x.choice[k])];
    j["stacks"].push_back({{"steady_tiles", s.steady.tiles.size()}, {"iterations", s.steady.iterations},
                           {"stack_tiles", s.steady.stack_tiles},   {"per_layer", s.per_layer}, {"rows", x.rows},
                           {"columns", x.columns},                  {"integers", x.integers},
                           {"nonzeros", x.nonzeros},                {"nodes", x.nodes},
                           {"seconds", x.seconds},                  {"optimal", x.optimal}, {"fallback", x.fallback},
                           {"objective_cc", x.objective},           {"bound_cc", x.bound},
                           {"start_cc", x.start},                   {"time_limited", x.time_limited},
                           {"node_limited", x.node_limited},        {"rejected", x.rejected},
                           {"gap", x.gap},                          {"parallelism", layers}});
  }
  return j;
}

std::vector<std::pair<std::string, double>> energy_parts(const coala::Energy& e) {
  return {{"cn_onchip", e.cn_onchip},         {"cn_offchip", e.cn_offchip},         {"link_offchip", e.link[0]},
          {"link_core_to_core", e.link[1]},   {"link_eviction", e.link[2]},         {"link_sink", e.link[3]},
          {"memory_offchip", e.memory[0]},    {"memory_core_to_core", e.memory[1]}, {"memory_eviction", e.memory[2]},
          {"memory_sink", e.memory[3]}};
}

}  // namespace mapfuse::cli
