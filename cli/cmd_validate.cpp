// `mapfuse validate`: the cost model against reference data no one here wrote.
#include <fmt/format.h>

#include <cmath>

#include "cli/commands.hpp"
#include "engine/validation/dosa_dataset.hpp"
#include "engine/validation/timeloop_input.hpp"

namespace mapfuse::cli {

Command add_validate_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("validate", "Validate the cost model against reference data");
  cmd->require_subcommand(1);
  auto* dosa = cmd->add_subcommand("dosa", "DOSA's Timeloop dataset for Gemmini (72,700 rows)");
  auto dataset = std::make_shared<std::string>();
  auto rows = std::make_shared<size_t>(0);
  auto seed = std::make_shared<uint64_t>(1);
  dosa->add_option("dataset", *dataset, "dataset.csv or dataset.csv.tar.gz")->required();
  dosa->add_option("--rows", *rows, "evaluate N rows sampled with --seed (default: all)");
  dosa->add_option("--seed", *seed, "sampling seed")->capture_default_str();
  auto* tl = cmd->add_subcommand(
      "timeloop", "Timeloop reference runs (a run directory, its parsed-processed-input.yaml, or a tree of runs)");
  auto tl_path = std::make_shared<std::string>();
  tl->add_option("path", *tl_path, "run directory, input YAML, or a directory searched for runs")->required();
  auto run_timeloop = [tl_path]() {
    std::vector<std::string> cases = find_timeloop_cases(*tl_path);
    if (cases.empty()) cases.push_back(*tl_path);  // a single run: errors name what is missing
    fmt::print("{:<48} {:>10} {:>10} {:>16} {:>16} {:>9} {:>7}\n", "run", "cycles", "model", "energy_pj",
               "model_pj", "error", "counts");
    int bad = 0;
    double worst = 0;
    for (const auto& c : cases) {
      const TimeloopValidation v = validate_timeloop_case(c);
      size_t exact = 0;
      for (const auto& k : v.counts) exact += k.match();
      const bool ok = v.valid && v.model_cycles == v.ref_cycles && std::fabs(v.energy_error_pct()) < 1.0;
      bad += !ok;
      worst = std::max(worst, std::fabs(v.energy_error_pct()));
      fmt::print("{:<48} {:>10} {:>10} {:>16.2f} {:>16.2f} {:>8.4f}% {:>3}/{:<3}{}\n", v.name, v.ref_cycles,
                 v.model_cycles, v.ref_energy_pj, v.model_energy_pj, v.energy_error_pct(), exact,
                 v.counts.size(), ok ? "" : "  FAIL");
    }
    fmt::print("runs={} failed={} worst dynamic-energy error={:.4f}%\n", cases.size(), bad, worst);
    return bad ? 1 : 0;
  };
  return {cmd, [=]() {
            if (tl->parsed()) return run_timeloop();
            const DosaDataset d = load_dosa_dataset(*dataset);
            std::vector<size_t> sample;
            if (*rows > 0) sample = sample_rows(d.rows.size(), *rows, *seed);
            const DosaValidation v = validate_dosa(d, sample);
            fmt::print("{}: {} rows, {} layers, {} hardware points\n", d.source, d.rows.size(),
                       d.layers.size(), d.cores.size());
            if (v.failed) fmt::print("rows not evaluated (invalid or unparsable mapping): {}\n", v.failed);
            fmt::print("worst energy rows (0-based data rows):");
            for (size_t r : v.worst_energy_rows) fmt::print(" {}", d.rows[r].csv_row);
            fmt::print("\n");
            fmt::print("energy median={:.4f}% p99={:.4f}% max={:.4f}% cycles median={:.4f}% p99={:.4f}% "
                       "max={:.4f}% rows={}\n",
                       v.energy.median, v.energy.p99, v.energy.max, v.cycles.median, v.cycles.p99,
                       v.cycles.max, v.energy.n);
            return v.failed ? 1 : 0;
          }};
}

}  // namespace mapfuse::cli
