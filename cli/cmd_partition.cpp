// `mapfuse partition`: GET-fusion's fusion-group partition of a whole CNN (docs/get_search.md):
// RS/LS/NSGA-II with the random split or Algorithm 1 fed by an exact explainer, or the true
// optimum; prints DRAM, MBU and which operators were fused.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "cli/commands.hpp"
#include "engine/common/error.hpp"
#include "engine/search/get/exact.hpp"
#include "engine/search/get/network.hpp"
#include "engine/search/get/search.hpp"

namespace mapfuse::cli {
namespace {

// A path, or a network name from the GET data set ($MAPFUSE_SHARED_DATA/get/onnx/<name>.onnx).
std::string resolve_network(const std::string& w) {
  namespace fs = std::filesystem;
  if (fs::is_regular_file(w)) return w;
  std::vector<std::string> names;
  if (const char* shared = std::getenv("MAPFUSE_SHARED_DATA")) {
    const fs::path dir = fs::path(shared) / "get" / "onnx";
    if (fs::is_regular_file(dir / (w + ".onnx"))) return (dir / (w + ".onnx")).string();
    if (fs::is_directory(dir))
      for (const auto& e : fs::directory_iterator(dir))
        if (e.path().extension() == ".onnx") names.push_back(e.path().stem().string());
  }
  throw InputError({}, "--workload",
                   "'" + w + "' is neither an ONNX file nor a network of $MAPFUSE_SHARED_DATA/get/onnx" +
                       did_you_mean(w, names));
}

}  // namespace

Command add_partition_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("partition",
                                 "GET-fusion: partition a CNN into fusion groups that fit the buffer (LBDF or BRR), "
                                 "minimising DRAM traffic");
  struct Options {
    std::string workload, scheme = "lbdf", search = "ls", split = "random", line_buffer = "full-rows";
    double buffer_kb = 128;
    int64_t budget = 2000;
    uint64_t seed = 1;
    int population = 10, max_depth = 8, max_category3 = 16, bytes_per_element = 2;
    double occlusion_fraction = 0.2, time_limit = 60;
    bool json = false, assume_monotone = false;
  };
  auto o = std::make_shared<Options>();
  cmd->add_option("--workload", o->workload, "ONNX file, or a network name of shared/data/get/onnx")->required();
  cmd->add_option("--scheme", o->scheme, "lbdf or brr")->capture_default_str();
  cmd->add_option("--buffer-kb", o->buffer_kb, "on-chip buffer β in KB (1 KB = 1024 B)")->capture_default_str();
  cmd->add_option("--search", o->search, "rs, ls, nsga2 or exact (the true optimum)")->capture_default_str();
  cmd->add_option("--split", o->split,
                  "repair of invalid groups: random (baseline) or Algorithm 1 with the cut, occlusion or dp explainer")
      ->capture_default_str();
  cmd->add_option("--budget", o->budget, "partition plans generated (every one counts)")->capture_default_str();
  cmd->add_option("--seed", o->seed, "random seed")->capture_default_str();
  cmd->add_option("--population", o->population, "K of LS and NSGA-II")->capture_default_str();
  cmd->add_option("--max-depth", o->max_depth, "Algorithm 1 recursion depth before the random fallback")
      ->capture_default_str();
  cmd->add_option("--max-category3", o->max_category3, "Algorithm 1 category-3 candidates explored")
      ->capture_default_str();
  cmd->add_option("--occlusion-fraction", o->occlusion_fraction, "share of edges the occlusion explainer returns")
      ->capture_default_str();
  cmd->add_option("--bytes-per-element", o->bytes_per_element, "bytes per tensor element")->capture_default_str();
  cmd->add_option("--line-buffer", o->line_buffer, "LBDF line buffer: full-rows (K_h rows) or rows-plus-window")
      ->capture_default_str();
  cmd->add_option("--time-limit", o->time_limit, "exact: seconds before stopping with a bound and gap (0: none)")
      ->capture_default_str();
  cmd->add_flag("--assume-monotone", o->assume_monotone,
                "exact: prune groups once F_β reaches β as if F_β never fell when nodes are added (no proof)");
  cmd->add_flag("--json", o->json, "print the result as JSON");
  return {cmd, [o]() {
            const FusionScheme scheme = fusion_scheme_from_string(o->scheme);
            const bool exact = o->search == "exact";
            const get::SearchKind kind = exact ? get::SearchKind::Random : get::search_kind_from_string(o->search);
            const get::SplitKind split = get::split_kind_from_string(o->split);
            if (!(o->buffer_kb > 0)) throw InputError({}, "--buffer-kb", "the buffer size must be positive");
            if (o->budget < 1) throw InputError({}, "--budget", "the plan budget must be at least 1");
            if (o->population < 1) throw InputError({}, "--population", "the population must be at least 1");
            if (o->bytes_per_element < 1) throw InputError({}, "--bytes-per-element", "must be at least 1");
            GroupModelOptions mopt;
            mopt.bytes_per_element = o->bytes_per_element;
            if (o->line_buffer == "rows-plus-window")
              mopt.line_buffer = LineBufferForm::RowsPlusWindow;
            else if (o->line_buffer != "full-rows")
              throw InputError({}, "--line-buffer",
                               "unknown line buffer '" + o->line_buffer + "'; expected full-rows or rows-plus-window" +
                                   did_you_mean(o->line_buffer, {"full-rows", "rows-plus-window"}));
            const OpGraph graph = load_op_graph(resolve_network(o->workload));
            const auto beta = static_cast<int64_t>(o->buffer_kb * static_cast<double>(mopt.kb));
            const auto t0 = std::chrono::steady_clock::now();
            const get::NetworkProblem np = get::make_network_problem(graph, scheme, beta, mopt);
            const get::Problem& p = np.problem;

            get::Plan best;
            nlohmann::json j;
            int64_t plans = 0;
            std::string rectify_text = "n/a (random split)";
            if (exact) {
              get::Evaluator ev(p);
              get::ExactOptions eo;
              eo.time_limit_s = o->time_limit;
              eo.assume_monotone = o->assume_monotone;
              const get::ExactResult r = get::exact_optimum(p, ev, eo);
              if (r.plan.groups.empty())
                throw InputError({}, "--time-limit", "the exact search stopped before any valid plan was known");
              best = r.plan;
              j["optimal"] = r.optimal;
              j["lower_bound_mb"] = r.lower_bound / static_cast<double>(mopt.kb * mopt.kb);
              j["gap"] = r.gap;
              j["states"] = r.states;
              j["groups_enumerated"] = r.groups;
              j["assumed_monotone"] = r.assumed_monotone;
              j["interval_dp_mb"] = r.interval_dram >= 0 ? nlohmann::json(r.interval_dram / static_cast<double>(mopt.kb * mopt.kb)) : nlohmann::json();
              j["rectify_rate"] = nullptr;
            } else {
              get::SearchOptions so;
              so.budget = o->budget;
              so.seed = o->seed;
              so.population = o->population;
              so.split.max_depth = o->max_depth;
              so.split.max_category3 = o->max_category3;
              const auto explainer = get::make_explainer(split, o->occlusion_fraction);
              const get::SearchResult r = get::run_search(p, kind, explainer.get(), so);
              best = r.best;
              plans = r.plans;
              // null for the random baseline, and when no group needed repair (0 of 0).
              const bool rated = r.rectify_defined && r.rectify.distinct > 0;
              j["rectify_rate"] = rated ? nlohmann::json(r.rectify.rate()) : nlohmann::json();
              j["rectify_rate_calls"] = rated ? nlohmann::json(r.rectify.call_rate()) : nlohmann::json();
              j["invalid_groups"] = r.rectify.distinct;
              j["repair_calls"] = r.rectify.calls;
              j["fallbacks"] = r.rectify.fallbacks;
              j["model_calls"] = r.model_calls;
              nlohmann::json trace = nlohmann::json::array();
              for (const auto& t : r.trace) trace.push_back({t.plan, t.dram / static_cast<double>(mopt.kb * mopt.kb)});
              j["trace"] = trace;
              if (r.rectify_defined && r.rectify.distinct == 0)
                rectify_text = "n/a (no invalid group)";
              else if (r.rectify_defined)
                rectify_text = fmt::format("{:.1f} % of {} distinct invalid groups ({:.1f} % of {} repairs)",
                                           100 * r.rectify.rate(), r.rectify.distinct, 100 * r.rectify.call_rate(),
                                           r.rectify.calls);
            }
            const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            const double mb = static_cast<double>(mopt.kb * mopt.kb), kb = static_cast<double>(mopt.kb);
            if (o->json) {
              j["workload"] = graph.name;
              j["scheme"] = std::string(to_string(scheme));
              j["buffer_kb"] = o->buffer_kb;
              j["search"] = o->search;
              j["split"] = exact ? std::string("none") : std::string(get::to_string(split));
              j["seed"] = o->seed;
              j["budget"] = o->budget;
              j["dram_mb"] = best.dram / mb;
              j["mbu_kb"] = best.mbu / kb;
              j["plans"] = plans;
              j["nodes"] = graph.size();
              j["fuseable_nodes"] = p.fuseable_count;
              j["seconds"] = seconds;
              j["groups"] = nlohmann::json::array();
              for (const get::Group& g : best.groups) {
                nlohmann::json names = nlohmann::json::array();
                for (int32_t v : g) names.push_back(graph.nodes[v].name);
                j["groups"].push_back(names);
              }
              std::cout << j.dump(2) << "\n";
              return 0;
            }
            fmt::print("{}: {} operators, {} fuseable under {} at {} KB\n", graph.name, graph.size(), p.fuseable_count,
                       to_string(scheme), o->buffer_kb);
            if (exact)
              fmt::print("  exact: DRAM {:.3f} MB ({}; lower bound {:.3f} MB, gap {:.2f} %)\n", best.dram / mb,
                         j["optimal"].get<bool>() ? "optimal" : "stopped by the time limit",
                         j["lower_bound_mb"].get<double>(), 100 * j["gap"].get<double>());
            else
              fmt::print("  {} + {} split: DRAM {:.3f} MB after {} plans; rectify rate {}\n", o->search,
                         get::to_string(split), best.dram / mb, plans, rectify_text);
            fmt::print("  MBU {:.3f} KB, {} groups, {:.2f} s\n", best.mbu / kb, best.groups.size(), seconds);
            for (const get::Group& g : best.groups) {
              std::string names;
              for (int32_t v : g) names += (names.empty() ? "" : " ") + graph.nodes[v].name;
              fmt::print("  group: {}\n", names);
            }
            return 0;
          }};
}

}  // namespace mapfuse::cli
