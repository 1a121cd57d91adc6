// `mapfuse demo`: the embedded default job until the study runner lands (issue 3): a random-
// sampling mapper (Timeloop's baseline) on every MAC Einsum of ResNet-18, printing the best
// mapping's cost per layer and the network totals.
#include <fmt/format.h>

#include "cli/commands.hpp"
#include "engine/arch/arch_toml.hpp"
#include "engine/cost/model.hpp"
#include "engine/mapping/mapping.hpp"
#include "engine/search/random_search.hpp"
#include "engine/workload/load.hpp"

namespace mapfuse::cli {

Command add_demo_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("demo", "Run the embedded default job (per-layer costs of ResNet-18 on Gemmini)");
  auto arch_name = std::make_shared<std::string>("gemmini_default");
  auto workload = std::make_shared<std::string>("resnet18");
  auto budget = std::make_shared<int64_t>(20000);
  auto seed = std::make_shared<uint64_t>(1);
  cmd->add_option("--arch", *arch_name, "architecture preset or TOML file")->capture_default_str();
  cmd->add_option("--workload", *workload, "zoo name or workload file")->capture_default_str();
  cmd->add_option("--budget", *budget, "random mappings per layer")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--seed", *seed, "seed")->capture_default_str();
  return {cmd, [=]() {
            const Core core = load_architecture(*arch_name).cores.at(0);
            const Workload w = load_workload(*workload);
            fmt::print("{} on {}: random-sampling mapper, {} mappings per Einsum, objective EDP, seed {}\n",
                       w.name, core.name, *budget, *seed);
            fmt::print("{:<24} {:>14} {:>9} {:>14} {:>14} {:>10}\n", "einsum", "operations", "valid",
                       "energy_pj", "cycles", "util");
            double energy = 0, cycles = 0;
            int failed = 0;
            for (const Einsum& e : w.einsums) {
              if (e.op != OpKind::Mac) continue;
              const SearchResult s = random_search(e, core, *budget, *seed, Objective::Edp);
              if (!s.best) {
                fmt::print("{:<24} {:>14} {:>9} no valid mapping sampled\n", e.name, e.operations(), 0);
                ++failed;
                continue;
              }
              const CostResult& r = s.cost;
              fmt::print("{:<24} {:>14} {:>9} {:>14.6g} {:>14.6g} {:>9.1f}%\n", e.name, r.operations,
                         s.valid, r.energy_pj, r.cycles, 100 * r.utilization);
              energy += r.energy_pj * static_cast<double>(w.count(w.einsum_index(e.name)));
              cycles += r.cycles * static_cast<double>(w.count(w.einsum_index(e.name)));
            }
            fmt::print("{:<24} {:>14} {:>9} {:>14.6g} {:>14.6g}\n", "network (MAC Einsums)", "", "", energy, cycles);
            fmt::print("network EDP {:.6g} pJ*cycles\n", energy * cycles);
            return failed ? 1 : 0;
          }};
}

}  // namespace mapfuse::cli
