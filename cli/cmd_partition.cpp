// `mapfuse partition`: GET-fusion's fusion-group partition of a whole CNN (docs/get_search.md):
// RS/LS/NSGA-II with the random split or Algorithm 1 fed by an exact explainer, or the true
// optimum; prints DRAM, MBU and which operators were fused.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <iostream>

#include "cli/commands.hpp"
#include "cli/study_units.hpp"
#include "engine/common/error.hpp"
#include "engine/arch/arch_toml.hpp"
#include "engine/search/fadiff/cross.hpp"
#include "engine/search/fadiff/optimize.hpp"
#include "engine/search/get/partition.hpp"
#include "engine/workload/load.hpp"

namespace mapfuse::cli {

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
    int64_t kb_bytes = 1024;
    double occlusion_fraction = 0.2, time_limit = 60;
    bool json = false, assume_monotone = false;
    std::string price_on, gnn_model, pg_model, rg_model;
    int64_t fadiff_evaluations = 3000;
    double fadiff_time = 600;
  };
  auto o = std::make_shared<Options>();
  cmd->add_option("--workload", o->workload, "ONNX file, or a network name of shared/data/get/onnx")->required();
  cmd->add_option("--scheme", o->scheme, "lbdf or brr")->capture_default_str();
  cmd->add_option("--buffer-kb", o->buffer_kb, "on-chip buffer β in KB (--kb-bytes bytes each)")->capture_default_str();
  cmd->add_option("--search", o->search,
                  "rs, ls, nsga2, exact (the true optimum) or sample (share of valid groups among --budget random "
                  "plans' groups, [P] Fig. 3)")
      ->capture_default_str();
  cmd->add_option("--split", o->split,
                  "repair of invalid groups: random (baseline) or Algorithm 1 with the cut, occlusion or dp explainer, "
                  "or gnne, pg, rg (GNNExplainer, PGExplainer, RG-Explainer on the trained GNN classifier)")
      ->capture_default_str();
  cmd->add_option("--gnn-model", o->gnn_model,
                  "--split gnne|pg|rg: a GNN classifier model file (mapfuse get-train); default: the one built in "
                  "for the scheme");
  cmd->add_option("--pg-model", o->pg_model,
                  "--split pg: a PGExplainer model file (mapfuse get-train-explainer); default: the one built in");
  cmd->add_option("--rg-model", o->rg_model,
                  "--split rg: an RG-Explainer model file (mapfuse get-train-explainer); default: the one built in");
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
  cmd->add_option("--kb-bytes", o->kb_bytes, "bytes per KB: 1024 or 1000 (MB = KB * KB; buffer sizes and reported KB/MB)")
      ->capture_default_str();
  cmd->add_option("--line-buffer", o->line_buffer, "LBDF line buffer: full-rows (K_h rows) or rows-plus-window")
      ->capture_default_str();
  cmd->add_option("--time-limit", o->time_limit, "exact: seconds before stopping with a bound and gap (0: none)")
      ->capture_default_str();
  cmd->add_flag("--assume-monotone", o->assume_monotone,
                "exact: prune groups once F_β reaches β as if F_β never fell when nodes are added (no proof)");
  cmd->add_option("--price-on", o->price_on,
                  "also price the best plan's groups with FADiff's exact network evaluator on this architecture "
                  "(preset or TOML), on FADiff's own mapping, beside FADiff's fusion and no fusion")
      ->check([](const std::string& a) { return a.empty() ? std::string("empty architecture") : std::string(); });
  cmd->add_option("--fadiff-evaluations", o->fadiff_evaluations,
                  "--price-on: evaluation budget of the FADiff run that supplies the mapping (it ends the run: "
                  "reproducible)")
      ->capture_default_str();
  cmd->add_option("--fadiff-time", o->fadiff_time, "--price-on: wall-time cap of that run in seconds")
      ->capture_default_str();
  cmd->add_flag("--json", o->json, "print the result as JSON");
  return {cmd, [o]() {
            get::PartitionSpec spec;
            spec.scheme = fusion_scheme_from_string(o->scheme);
            spec.mode = get::partition_mode_from_string(o->search);
            spec.split = get::split_kind_from_string(o->split);
            spec.buffer_kb = o->buffer_kb;
            spec.budget = o->budget;
            spec.seed = o->seed;
            spec.population = o->population;
            spec.max_depth = o->max_depth;
            spec.max_category3 = o->max_category3;
            spec.occlusion_fraction = o->occlusion_fraction;
            spec.time_limit_s = o->time_limit;
            spec.assume_monotone = o->assume_monotone;
            spec.gnn_model = o->gnn_model;
            spec.pg_model = o->pg_model;
            spec.rg_model = o->rg_model;
            spec.model.bytes_per_element = o->bytes_per_element;
            spec.model.kb = o->kb_bytes;
            spec.model.line_buffer = line_buffer_form_from_string(o->line_buffer);
            get::check_partition_spec(spec);
            const bool price = !o->price_on.empty();
            if (price && spec.mode == get::PartitionMode::Sample)
              throw InputError({}, "--price-on", "needs a best plan; --search sample has none");
            if (price && (o->fadiff_evaluations <= 0 || !(o->fadiff_time > 0)))
              throw InputError({}, "--fadiff-evaluations", "expected an evaluation budget > 0 and --fadiff-time > 0");
            const std::string path = get_network_spec(o->workload);  // an ONNX path or a zoo CNN's name
            const OpGraph graph = load_get_network(path);
            const get::PartitionOutcome r = get::partition_network(graph, spec);
            nlohmann::json priced;
            std::string priced_text;
            if (price) {
              // The mapping is FADiff's own, so the rows differ only in what is fused.
              const Core core = load_architecture(o->price_on).cores.at(0);
              const Workload w = load_workload(path);
              OptimizeOptions opt;
              opt.max_evaluations = o->fadiff_evaluations;
              opt.time_budget_s = o->fadiff_time;
              opt.seed = o->seed;
              const OptimizeResult fr = optimize_network(w, core, Method::FADiff, opt);
              if (!fr.found) throw InputError({}, "--price-on", "FADiff found no valid mapping on " + core.name);
              const SearchSpace space(w, core);
              std::vector<get::Group> singletons(graph.size());
              for (int v = 0; v < graph.size(); ++v) singletons[v] = {v};
              const std::vector<uint8_t> none(space.n_edges(), 0);
              const std::pair<const char*, FusionPrice> rows[] = {
                  {"get", price_fusion(space, fr.factors, fused_edges_of_groups(space.net(), graph, r.best.groups))},
                  {"fadiff", price_fusion(space, fr.factors, fr.fused)},
                  {"unfused", price_fusion(space, fr.factors, none)},
                  {"get_singletons",
                   price_fusion(space, fr.factors, fused_edges_of_groups(space.net(), graph, singletons))}};
              priced["arch"] = core.name;
              priced["layers"] = space.n_layers();
              priced["edges"] = space.n_edges();
              priced["fadiff_evaluations"] = fr.evaluations;
              priced["fadiff_stopped_by"] = fr.stopped_by;
              priced["fadiff_edp"] = fr.edp;
              priced_text = fmt::format(
                  "  priced on {} by FADiff's exact network evaluator, FADiff's mapping ({} evaluations, stopped by "
                  "{}); {} MAC layers, {} fusable edges\n  {:<15} {:>13} {:>13} {:>13} {:>13} {:>6} {:>7} {:>7}\n",
                  core.name, fr.evaluations, fr.stopped_by, space.n_layers(), space.n_edges(), "fusion", "energy pJ",
                  "cycles", "EDP", "DRAM words", "fused", "groups", "splits");
              for (const auto& [name, p] : rows) {
                priced[name] = {{"energy_pj", p.energy_pj}, {"cycles", p.cycles},           {"edp", p.edp},
                                {"dram_words", p.dram_words}, {"fused_edges", p.fused_edges}, {"groups", p.groups.size()},
                                {"group_splits", p.group_splits}};
                priced_text += fmt::format("  {:<15} {:>13.6g} {:>13.6g} {:>13.6g} {:>13.6g} {:>6} {:>7} {:>7}\n", name,
                                           p.energy_pj, p.cycles, p.edp, p.dram_words, p.fused_edges, p.groups.size(),
                                           p.group_splits);
              }
            }
            const GroupModelOptions& mopt = spec.model;
            const bool exact = spec.mode == get::PartitionMode::Exact, sample = spec.mode == get::PartitionMode::Sample;
            const get::Plan& best = r.best;
            const int64_t plans = r.plans;
            const double seconds = r.seconds;
            nlohmann::json j;
            std::string rectify_text = "n/a (random split)";
            if (exact) {
              j["optimal"] = r.exact.optimal;
              j["lower_bound_mb"] = r.exact.lower_bound / static_cast<double>(mopt.kb * mopt.kb);
              j["gap"] = r.exact.gap;
              j["states"] = r.exact.states;
              j["groups_enumerated"] = r.exact.groups;
              j["assumed_monotone"] = r.exact.assumed_monotone;
              j["interval_dp_mb"] = r.exact.interval_dram >= 0
                                        ? nlohmann::json(r.exact.interval_dram / static_cast<double>(mopt.kb * mopt.kb))
                                        : nlohmann::json();
              j["rectify_rate"] = nullptr;
            } else if (sample) {
              j["sampled_groups"] = r.sample.groups;
              j["valid_groups"] = r.sample.valid;
              j["valid_share"] = r.sample.share();
              j["rectify_rate"] = nullptr;
            } else {
              const bool rated = r.rectify_rated();
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
            const double mb = static_cast<double>(mopt.kb * mopt.kb), kb = static_cast<double>(mopt.kb);
            if (o->json) {
              j["workload"] = graph.name;
              j["scheme"] = std::string(to_string(spec.scheme));
              j["buffer_kb"] = o->buffer_kb;
              j["search"] = o->search;
              j["split"] = exact || sample ? std::string("none") : std::string(get::to_string(spec.split));
              j["seed"] = o->seed;
              j["budget"] = o->budget;
              j["dram_mb"] = best.dram / mb;
              j["mbu_kb"] = best.mbu / kb;
              j["plans"] = plans;
              j["nodes"] = graph.size();
              j["fuseable_nodes"] = r.fuseable;
              j["seconds"] = seconds;
              j["groups"] = nlohmann::json::array();
              for (const get::Group& g : best.groups) {
                nlohmann::json names = nlohmann::json::array();
                for (int32_t v : g) names.push_back(graph.nodes[v].name);
                j["groups"].push_back(names);
              }
              if (price) j["priced"] = priced;
              std::cout << j.dump(2) << "\n";
              return 0;
            }
            fmt::print("{}: {} operators, {} fuseable under {} at {} KB\n", graph.name, graph.size(), r.fuseable,
                       to_string(spec.scheme), o->buffer_kb);
            if (sample) {
              fmt::print("  sample: {} of {} groups of >= 2 operators valid ({:.1f} %) in {} random plans, {:.2f} s\n",
                         r.sample.valid, r.sample.groups, 100 * r.sample.share(), plans, seconds);
              return 0;
            }
            if (exact)
              fmt::print("  exact: DRAM {:.3f} MB ({}; lower bound {:.3f} MB, gap {:.2f} %)\n", best.dram / mb,
                         j["optimal"].get<bool>() ? "optimal" : "stopped by the time limit",
                         j["lower_bound_mb"].get<double>(), 100 * j["gap"].get<double>());
            else
              fmt::print("  {} + {} split: DRAM {:.3f} MB after {} plans; rectify rate {}\n", o->search,
                         get::to_string(spec.split), best.dram / mb, plans, rectify_text);
            fmt::print("  MBU {:.3f} KB, {} groups, {:.2f} s\n", best.mbu / kb, best.groups.size(), seconds);
            for (const get::Group& g : best.groups) {
              std::string names;
              for (int32_t v : g) names += (names.empty() ? "" : " ") + graph.nodes[v].name;
              fmt::print("  group: {}\n", names);
            }
            fmt::print("{}", priced_text);
            return 0;
          }};
}

}  // namespace mapfuse::cli
