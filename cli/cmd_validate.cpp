// `mapfuse validate`: the cost model against reference data no one here wrote.
#include <fmt/format.h>

#include "cli/commands.hpp"
#include "engine/validation/dosa_dataset.hpp"

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
  return {cmd, [=]() {
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
