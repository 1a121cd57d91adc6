// `mapfuse optimize`: joint mapping and fusion of a whole network by FADiff or one of its
// baselines (engine/search/fadiff/optimize.hpp), the command-line twin of a study's
// optimize_network unit.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <iostream>

#include "cli/commands.hpp"
#include "engine/arch/arch_toml.hpp"
#include "engine/common/error.hpp"
#include "engine/search/fadiff/optimize.hpp"
#include "engine/workload/load.hpp"

namespace mapfuse::cli {

Command add_optimize_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "optimize", "Joint mapping and fusion of a network: FADiff or its DOSA-style, GA and BO baselines (exact EDP)");
  struct Options {
    std::string arch = "fadiff_large", workload, method = "fadiff";
    ZooParams zoo;
    double time_budget_s = 10;
    int64_t max_evaluations = 0;
    uint64_t seed = 1;
    bool json = false, mappings = false;
  };
  auto o = std::make_shared<Options>();
  cmd->add_option("--arch", o->arch, "architecture preset or TOML file")->capture_default_str();
  cmd->add_option("--workload", o->workload, "zoo name or workload file")->required();
  cmd->add_option("--method", o->method, "fadiff, dosa, ga or bo")->capture_default_str();
  cmd->add_option("--time-budget", o->time_budget_s, "seconds of wall time (> 0)")->capture_default_str();
  cmd->add_option("--max-evaluations", o->max_evaluations,
                  "evaluation budget (0 = none); a run it ends is reproducible to the bit")
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "random seed")->capture_default_str();
  cmd->add_option("--batch", o->zoo.batch, "batch size for zoo networks")->check(CLI::PositiveNumber);
  cmd->add_option("--tokens", o->zoo.tokens, "sequence length for gpt3_6.7b")->check(CLI::PositiveNumber);
  cmd->add_flag("--mappings", o->mappings, "also print every layer's mapping");
  cmd->add_flag("--json", o->json, "print the result as JSON");
  return {cmd, [o]() {
            const Method method = parse_method(o->method);  // before loading anything: fail fast
            const Core core = load_architecture(o->arch).cores.at(0);
            const Workload w = load_workload(o->workload, o->zoo);
            OptimizeOptions opt;
            opt.time_budget_s = o->time_budget_s;
            opt.max_evaluations = o->max_evaluations;
            opt.seed = o->seed;
            const OptimizeResult r = optimize_network(w, core, method, opt);
            auto layer_text = [&](size_t i) {
              const int e = w.einsum_index(r.layers[i]);
              return e >= 0 ? to_text(r.mappings[i], w.einsums[e], core) : std::string("?");
            };
            if (o->json) {
              nlohmann::json j;
              j["workload"] = w.name;
              j["arch"] = core.name;
              j["method"] = std::string(to_string(method));
              j["seed"] = o->seed;
              j["found"] = r.found;
              j["energy_pj"] = r.energy_pj;
              j["cycles"] = r.cycles;
              j["edp"] = r.edp;
              j["dram_words_saved"] = r.dram_words_saved;
              j["evaluations"] = r.evaluations;
              j["gradient_steps"] = r.gradient_steps;
              j["exact_evaluations"] = r.exact_evaluations;
              j["starts"] = r.starts;
              j["seconds"] = r.seconds;
              j["stopped_by"] = r.stopped_by;
              j["capacity_repairs"] = r.capacity_repairs;
              j["group_splits"] = r.group_splits;
              for (const auto& g : r.groups) {
                nlohmann::json names = nlohmann::json::array();
                for (int v : g) names.push_back(r.layers[v]);
                j["groups"].push_back(names);
              }
              for (size_t i = 0; i < r.layers.size() && r.found; ++i)
                j["mappings"][r.layers[i]] = layer_text(i);
              for (const TracePoint& t : r.trace)
                j["trace"].push_back({{"seconds", t.seconds}, {"evaluations", t.evaluations}, {"best_edp", t.best_edp}});
              std::cout << j.dump(2) << "\n";
              return r.found ? 0 : 1;
            }
            fmt::print("{} on {} by {} (seed {}): {} in {:.2f} s ({} evaluations: {} gradient steps, {} exact; {} starts; "
                       "stopped by {})\n",
                       w.name, core.name, to_string(method), o->seed, r.found ? "found" : "nothing valid found", r.seconds,
                       r.evaluations, r.gradient_steps, r.exact_evaluations, r.starts, r.stopped_by);
            if (!r.found) return 1;
            fmt::print("  exact model: energy {:.6g} pJ  cycles {:.6g}  EDP {:.6g}\n", r.energy_pj, r.cycles, r.edp);
            size_t fused_groups = 0;
            for (const auto& g : r.groups) fused_groups += g.size() > 1;
            fmt::print("  {} layers in {} groups ({} fused); DRAM words saved by fusion {:.6g}; repairs: {} capacity, "
                       "{} group splits\n",
                       r.layers.size(), r.groups.size(), fused_groups, r.dram_words_saved, r.capacity_repairs,
                       r.group_splits);
            for (const auto& g : r.groups) {
              if (g.size() < 2) continue;
              std::string names;
              for (int v : g) names += (names.empty() ? "" : " -> ") + r.layers[v];
              fmt::print("  fused: {}\n", names);
            }
            if (o->mappings)
              for (size_t i = 0; i < r.layers.size(); ++i) fmt::print("  {}: {}\n", r.layers[i], layer_text(i));
            return 0;
          }};
}

}  // namespace mapfuse::cli
