// `mapfuse ffm`: the optimal fused mapping of a workload on one core by the Fast and Fusiest
// Mapper (engine/search/ffm, docs/ffm.md): the optimum for one objective, the energy-latency
// front, the LoopTree, and where the time and memory went.
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <sys/resource.h>

#include <iostream>

#include "cli/commands.hpp"
#include "cli/study_units.hpp"
#include "engine/arch/arch_toml.hpp"
#include "engine/common/error.hpp"
#include "engine/search/ffm/ffm.hpp"
#include "engine/search/mapspace_toml.hpp"
#include "engine/workload/load.hpp"

namespace mapfuse::cli {
namespace {

Objective parse_ffm_objective(const std::string& s) {
  if (s == "latency") return Objective::Cycles;
  if (s == "energy" || s == "cycles" || s == "edp") return objective_from_string(s);
  throw InputError({}, "--objective",
                   "unknown objective '" + s + "'; expected energy, latency (cycles) or edp" +
                       did_you_mean(s, {"energy", "latency", "cycles", "edp"}));
}

double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // Linux: KiB
}

}  // namespace

Command add_ffm_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("ffm", "Optimal fused mapping of a workload (FFM: pmappings, compatibility, "
                                        "Pareto pruning, joining; exact)");
  struct Options {
    std::string arch = "tpuv4i", workload, objective = "edp", constraints;
    ZooParams zoo;
    bool no_fusion = false, json = false, front = false, no_partial = false, all_orders = false, no_resident = false;
    std::vector<std::string> must_fuse, must_not_fuse;
    int64_t max_memory_mib = 0;
    double epsilon = 0;
    int nested_loops = 0;
  };
  auto o = std::make_shared<Options>();
  cmd->add_option("--arch", o->arch, "architecture preset or TOML file")->capture_default_str();
  cmd->add_option("--workload", o->workload, "zoo name or workload file")->required();
  cmd->add_option("--objective", o->objective, "energy, latency or edp")->capture_default_str();
  cmd->add_option("--batch", o->zoo.batch, "batch size for zoo networks")->check(CLI::PositiveNumber);
  cmd->add_option("--tokens", o->zoo.tokens, "sequence length for gpt3_6.7b")->check(CLI::PositiveNumber);
  cmd->add_flag("--no-fusion", o->no_fusion, "every Einsum alone (all tensors through the outermost level)");
  cmd->add_option("--must-fuse", o->must_fuse, "tensors that must stay on chip (fixed fusion decisions); 'others': every intermediate not in --must-not-fuse");
  cmd->add_option("--must-not-fuse", o->must_not_fuse, "tensors that must go through the outermost level");
  cmd->add_option("--max-memory-mib", o->max_memory_mib,
                  "stop with an error before FFM's records exceed this many MiB (0 = no limit)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--epsilon", o->epsilon,
                  "epsilon pruning with two joins (dirty on a (1+epsilon) log grid, then exact); 0 = one exact join")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--no-partial-pruning", o->no_partial,
                "enumerate every tile choice without comparing partial ones first (exact either way; for measuring)");
  cmd->add_flag("--all-orders", o->all_orders,
                "join in every order of the Einsums that respects their data dependences (which Einsums can be "
                "fused depends on it) and keep the best of all");
  cmd->add_option("--nested-loops", o->nested_loops,
                  "nested fusion: up to this many loops per Einsum that a run of consecutive Einsums inside a "
                  "fusion group shares below the group's loops (0 = every loop covers the whole group)")
      ->check(CLI::Range(0, 4));
  cmd->add_flag("--no-resident", o->no_resident,
                "no storage above the split: weights are fetched in every iteration of their group's shared loops "
                "instead of being kept resident at the backing level");
  cmd->add_option("--constraints", o->constraints,
                  "mapspace constraints TOML ([[constraint]] tables, as for `map`) on every Einsum's tile mappings");
  cmd->add_flag("--front", o->front, "print every point of the energy-latency front");
  cmd->add_flag("--json", o->json, "print the result as JSON");
  return {cmd, [o]() {
            const Objective objective = parse_ffm_objective(o->objective);
            const Core core = load_architecture(o->arch).cores.at(0);
            const Workload w = load_workload(o->workload, o->zoo);
            check_ffm_input(w, core, !o->no_fusion);
            ffm::FfmOptions opt;
            opt.pmappings.allow_fusion = !o->no_fusion;
            opt.pmappings.prune_partial = !o->no_partial;
            opt.must_not_fuse = ffm_tensor_indices(w, o->must_not_fuse, "--must-not-fuse");
            opt.must_fuse = o->must_fuse == std::vector<std::string>{"others"}
                                ? other_intermediates(w, opt.must_not_fuse)
                                : ffm_tensor_indices(w, o->must_fuse, "--must-fuse");
            opt.max_memory_mib = o->max_memory_mib;
            opt.epsilon = o->epsilon;
            opt.all_orders = o->all_orders;
            opt.pmappings.nested_loops = o->nested_loops;
            opt.pmappings.resident = !o->no_resident;
            if (!o->constraints.empty()) opt.pmappings.constraints = load_constraints(o->constraints);
            const ffm::FfmResult r = ffm::ffm_search(w, core, opt);
            const ffm::FfmSolution* best = r.best(objective);
            int64_t evaluated = 0, kept = 0;
            for (const auto& p : r.pmappings) evaluated += p.evaluated, kept += p.kept;
            int64_t combinations = 0;
            for (const auto& s : r.steps) combinations += s.combinations;
            if (o->json) {
              nlohmann::json j;
              j["workload"] = w.name;
              j["arch"] = core.name;
              j["objective"] = std::string(to_string(objective));
              j["found"] = best != nullptr;
              j["orders_joined"] = r.orders;
              if (best) {
                j["energy_pj"] = best->energy_pj;
                j["cycles"] = best->cycles;
                j["edp"] = best->edp();
                j["looptree"] = to_text(best->tree, w, core);
                j["groups"] = nlohmann::json::array();
                for (const FusionGroup& g : best->tree.groups) {
                  nlohmann::json names = nlohmann::json::array();
                  for (int e : g.einsums) names.push_back(w.einsums[e].name);
                  j["groups"].push_back(names);
                }
              }
              for (const auto& s : r.pareto) j["front"].push_back({{"energy_pj", s.energy_pj}, {"cycles", s.cycles}});
              j["einsums"] = nlohmann::json::array();  // where generation goes, per Einsum
              for (const auto& p : r.pmappings)
                j["einsums"].push_back({{"name", w.einsums[p.einsum].name}, {"contexts", p.contexts.size()},
                                        {"evaluated", p.evaluated}, {"kept", p.kept},
                                        {"partial_compared", p.partial_evaluated}, {"partial_dropped", p.partial_dropped},
                                        {"bound_skipped", p.bound_skipped},
                                        {"fanout_skipped", p.fanout_skipped}, {"cpu_seconds", p.cpu_seconds},
                                        {"contexts_reused", p.contexts_reused},
                                        {"reused_from", p.reused_from >= 0 ? nlohmann::json(w.einsums[p.reused_from].name) : nlohmann::json()}});
              j["pmappings_evaluated"] = evaluated;
              j["pmappings_kept"] = kept;
              j["contexts"] = r.contexts;
              j["contexts_matched"] = r.contexts_matched;
              j["join_combinations"] = combinations;
              j["generation_seconds"] = r.generation_seconds;
              j["generation_cpu_seconds"] = r.generation_cpu_seconds;
              j["join_seconds"] = r.join_seconds;
              j["join_cpu_seconds"] = r.join_cpu_seconds;
              j["peak_records_mib"] = static_cast<double>(r.peak_records_bytes) / (1 << 20);
              j["peak_rss_mib"] = peak_rss_mib();
              std::cout << j.dump(2) << "\n";
              return best ? 0 : 1;
            }
            fmt::print("{} on {}: {} Einsums, {} of {} contexts matchable, {} tile mappings evaluated, {} pmappings kept\n",
                       w.name, core.name, w.einsums.size(), r.contexts_matched, r.contexts, evaluated, kept);
            fmt::print("  generation {:.2f} s ({:.2f} CPU-s), join {:.2f} s ({:.2f} CPU-s, {} combinations{}), "
                       "records {:.1f} MiB, peak RSS {:.0f} MiB\n",
                       r.generation_seconds, r.generation_cpu_seconds, r.join_seconds, r.join_cpu_seconds, combinations,
                       r.orders > 1 ? fmt::format(" in the first of {} Einsum orders", r.orders) : std::string(),
                       static_cast<double>(r.peak_records_bytes) / (1 << 20), peak_rss_mib());
            if (!best) {
              fmt::print("  no fused mapping fits core '{}'\n", core.name);
              if (const std::string why = ffm::empty_join_reason(w, r); !why.empty()) fmt::print("  {}\n", why);
              return 1;
            }
            size_t fused = 0;
            for (const FusionGroup& g : best->tree.groups) fused += g.einsums.size() > 1;
            fmt::print("  optimum ({}): energy {:.6g} pJ  cycles {:.6g}  EDP {:.6g}; {} groups ({} fused); front of {} points\n",
                       to_string(objective), best->energy_pj, best->cycles, best->edp(), best->tree.groups.size(), fused,
                       r.pareto.size());
            if (fused == 0) {
              // Why nothing fused, when the architecture is the reason: an intermediate stays on chip
              // only at a level that may hold the producer's output and the consumer's input.
              bool holds_both = false;
              for (size_t l = 0; l + 1 < core.levels.size(); ++l)
                holds_both = holds_both || ((core.levels[l].may_keep & role_bit(TensorRole::Output)) &&
                                            (core.levels[l].may_keep & role_bit(TensorRole::Input)));
              if (!holds_both)
                fmt::print("  no fusion is possible on '{}': no level below the outermost may keep both an Einsum's "
                           "output and an input, so no intermediate can stay on chip\n",
                           core.name);
            }
            std::string tree = to_text(best->tree, w, core);
            fmt::print("{}", tree);
            if (o->front)
              for (const auto& s : r.pareto)
                fmt::print("  front: energy {:.6g} pJ  cycles {:.6g}  EDP {:.6g}\n", s.energy_pj, s.cycles, s.edp());
            return 0;
          }};
}

}  // namespace mapfuse::cli
