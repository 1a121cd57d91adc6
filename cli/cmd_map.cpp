// `mapfuse map`: the optimal mapping of each layer (exhaustive, exact) and its cost.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <ctime>
#include <iostream>
#include <limits>

#include "cli/commands.hpp"
#include "engine/arch/arch_toml.hpp"
#include "engine/common/error.hpp"
#include "engine/search/exhaustive.hpp"
#include "engine/search/mapspace_toml.hpp"
#include "engine/workload/load.hpp"

namespace mapfuse::cli {

Command add_map_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("map", "Optimal mapping of each layer (exact: branch and bound, or the whole mapspace)");
  struct Options {
    std::string arch = "gemmini_default", workload, layer, objective = "edp", constraints;
    ZooParams zoo;
    int64_t max_mappings = 200'000'000;
    bool pareto = false, json = false, no_bound = false, depth_first = false, every_layer = false, energy_tiebreak = false,
         no_symmetry = false;
    double upper_bound = std::numeric_limits<double>::infinity();
    double gap = 0;
    int64_t max_work = 0;
  };
  auto o = std::make_shared<Options>();
  cmd->add_option("--arch", o->arch, "architecture preset or TOML file")->capture_default_str();
  cmd->add_option("--workload", o->workload, "zoo name or workload file")->required();
  cmd->add_option("--layer", o->layer, "only this Einsum (name or index); default: every MAC Einsum");
  cmd->add_option("--objective", o->objective, "energy, cycles or edp")->capture_default_str();
  cmd->add_option("--constraints", o->constraints,
                  "mapspace constraints TOML ([[constraint]] tables; e.g. presets/constraints/gemmini_dosa.toml)");
  cmd->add_option("--max-mappings", o->max_mappings, "refuse a mapspace larger than this")->capture_default_str();
  cmd->add_option("--batch", o->zoo.batch, "batch size for zoo networks")->check(CLI::PositiveNumber);
  cmd->add_option("--tokens", o->zoo.tokens, "sequence length for gpt3_6.7b")->check(CLI::PositiveNumber);
  cmd->add_flag("--pareto", o->pareto,
                "also print the energy/cycles Pareto front of each layer (branch and bound against the front found so far)");
  cmd->add_flag("--no-bound", o->no_bound, "evaluate the whole mapspace instead of branch and bound");
  cmd->add_flag("--no-symmetry", o->no_symmetry,
                "search every mapping and its mirror image (by default, where swapping rank pairs such as a square "
                "convolution's P/Q and R/S maps the problem onto itself, only one of the two; the same optimum)");
  cmd->add_flag("--depth-first", o->depth_first,
                "branch and bound: extend choices in enumeration order instead of best bound first (for comparison)");
  cmd->add_option("--upper-bound", o->upper_bound,
                  "branch and bound: an objective value some mapping is known to reach (cuts from the start)");
  cmd->add_flag("--energy-tiebreak", o->energy_tiebreak,
                "with --objective cycles: among the fastest mappings, the least energy (Stream's per-tile criterion)");
  cmd->add_option("--gap", o->gap,
                  "branch and bound within a relative optimality gap (e.g. 1e-3): at most (1 + gap) x the optimum "
                  "(with --energy-tiebreak: the least cycles exactly, the energy within the gap); one thread; 0 = exact")
      ->capture_default_str();
  cmd->add_option("--max-work", o->max_work,
                  "an anytime search: stop after this much work (level choices enumerated, ~0.1 us each) with the "
                  "best mapping found, then not proven optimal; one thread; 0 = no limit (exact)")
      ->capture_default_str();
  cmd->add_flag("--every-layer", o->every_layer,
                "search a layer again even when it poses an earlier layer's problem (same ranks, tensors, mapspace)");
  cmd->add_flag("--json", o->json, "print one JSON object: per layer the optimum and the search's counts");
  return {cmd, [o]() {
            const Core core = load_architecture(o->arch).cores.at(0);
            const Workload w = load_workload(o->workload, o->zoo);
            const Objective objective = objective_from_string(o->objective);
            if (o->energy_tiebreak && objective != Objective::Cycles)
              throw InputError({}, "--energy-tiebreak", "breaks ties on cycles; it needs --objective cycles, not '" +
                                                            o->objective + "'");
            const std::vector<ConstraintSpec> constraints =
                o->constraints.empty() ? std::vector<ConstraintSpec>{} : load_constraints(o->constraints);
            std::vector<int> layers;
            if (!o->layer.empty()) {
              int i = w.einsum_index(o->layer);
              if (i < 0 && std::all_of(o->layer.begin(), o->layer.end(), ::isdigit)) i = std::stoi(o->layer);
              if (i < 0 || i >= static_cast<int>(w.einsums.size()))
                throw InputError({}, "--layer", "no Einsum '" + o->layer + "' in workload '" + w.name + "'");
              layers.push_back(i);
            } else {
              for (size_t i = 0; i < w.einsums.size(); ++i)
                if (w.einsums[i].op == OpKind::Mac) layers.push_back(static_cast<int>(i));
            }
            int failed = 0;
            nlohmann::json out_layers = nlohmann::json::array();
            // Layers searched so far, so that a network's repeated layers (ResNet's blocks) are
            // searched once: the search is exact and deterministic, so a layer posing an earlier
            // layer's problem has its optimum.
            struct Solved {
              int einsum;
              Mapspace space;
              MapperResult result;
            };
            std::vector<Solved> solved;
            for (int i : layers) {
              const Einsum& e = w.einsums[i];
              const auto start = std::chrono::steady_clock::now();
              const std::clock_t cpu_start = std::clock();
              Mapspace space = make_mapspace(constraints, e, core);
              const Solved* same = nullptr;
              if (!o->every_layer)
                for (const Solved& s : solved)
                  if (same_mapping_problem(w.einsums[s.einsum], e) && s.space == space) same = &s;
              if (!same) {
                ExhaustiveOptions opt;
                opt.objective = objective;
                opt.max_mappings = o->max_mappings;
                opt.front = o->pareto || o->no_bound;
                opt.bound = !o->no_bound;
                opt.best_first = !o->depth_first;
                opt.symmetry = !o->no_symmetry;
                opt.upper_bound = o->upper_bound;
                opt.energy_tiebreak = o->energy_tiebreak;
                opt.gap = o->gap;
                opt.max_work = o->max_work;
                MapperResult found = exhaustive_search(e, core, space, opt);
                solved.push_back({i, std::move(space), std::move(found)});
              }
              const MapperResult& r = same ? same->result : solved.back().result;
              const std::string same_as = same ? w.einsums[same->einsum].name : std::string{};
              const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
              const double cpu = static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC;
              int64_t bound_pruned = 0;
              // The probes' SIMD calls are counted with the search's, so are their lanes.
              const double lanes_per_call =
                  r.lane_calls ? double(r.evaluated + r.probe_evaluated) / double(r.lane_calls) : 0.0;
              for (int64_t n : r.bound_pruned) bound_pruned += n;
              if (o->json) {
                nlohmann::json j{{"layer", e.name},
                                 {"objective", to_string(objective)},
                                 {"gap", o->gap},
                                 {"max_work", o->max_work},
                                 {"truncated", r.truncated},
                                 {"work", r.work},
                                 {"same_as", same_as},
                                 {"mapspace_at_least", r.mapspace_at_least},
                                 {"evaluated", r.evaluated},
                                 {"probe_evaluated", r.probe_evaluated},
                                 {"valid", r.valid},
                                 {"capacity_pruned", r.pruned},
                                 {"bound_pruned", r.bound_pruned},
                                 {"stale_dropped", r.stale_dropped},
                                 {"order_pruned", r.order_pruned},
                                 {"lanes_per_simd_call", lanes_per_call},
                                 {"seconds", secs},
                                 {"cpu_seconds", cpu}};
                if (r.best) {
                  j["energy_pj"] = r.cost.energy_pj;
                  j["cycles"] = r.cost.cycles;
                  j["edp"] = r.cost.edp();
                  j["mapping"] = to_text(*r.best, e, core);
                } else {
                  ++failed;
                }
                if (o->pareto) {
                  j["pareto"] = nlohmann::json::array();
                  for (const ParetoMapping& p : r.pareto)
                    j["pareto"].push_back(
                        {{"energy_pj", p.energy_pj}, {"cycles", p.cycles}, {"mapping", to_text(p.mapping, e, core)}});
                }
                out_layers.push_back(std::move(j));
                continue;
              }
              if (same)
                fmt::print("{}: the mapping problem of {} (searched once; its counts follow)\n", e.name, same_as);
              // A repeated layer's time is only its comparison with the earlier one: no rate.
              const std::string rate = same ? std::string() : fmt::format("{:.2f} M/s; ", r.evaluated / secs / 1e6);
              fmt::print("{}: {} mappings evaluated ({} valid; partial mappings cut: {} over capacity, {} by the bound, "
                         "{} beaten while queued, {} by their loop order; {:.1f} per SIMD call) in {:.2f} s ({}"
                         "{:.2f} CPU-s)\n",
                         e.name, r.evaluated, r.valid, r.pruned, bound_pruned, r.stale_dropped, r.order_pruned,
                         lanes_per_call, secs, rate, cpu);
              if (r.truncated)
                fmt::print("  stopped at the work limit ({} units): the best mapping found, not proven optimal\n", r.work);
              if (!r.best) {
                fmt::print("  no valid mapping\n");
                ++failed;
                continue;
              }
              fmt::print("  best ({})  energy {:.6g} pJ  cycles {:.6g}  EDP {:.6g}  utilization {:.1f}%\n",
                         to_string(objective), r.cost.energy_pj, r.cost.cycles, r.cost.edp(), 100 * r.cost.utilization);
              fmt::print("  mapping  {}\n", to_text(*r.best, e, core));
              for (int l = static_cast<int>(core.levels.size()) - 1; l >= 0; --l)
                fmt::print("    {:<14} energy {:>12.6g} pJ  cycles {:>10.6g}  holds {} words\n", core.levels[l].name,
                           r.cost.level_energy_pj[l], r.cost.level_cycles[l], r.cost.level_occupancy[l]);
              if (o->pareto)
                for (const ParetoMapping& p : r.pareto)
                  fmt::print("  pareto  energy {:.6g} pJ  cycles {:.6g}  {}\n", p.energy_pj, p.cycles,
                             to_text(p.mapping, e, core));
            }
            if (o->json) fmt::print("{}\n", nlohmann::json{{"layers", out_layers}}.dump(2));
            return failed ? 1 : 0;
          }};
}

}  // namespace mapfuse::cli
