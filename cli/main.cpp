// mapfuse command-line entry point: subcommands over the engine.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <iostream>

#include "engine/arch/arch_toml.hpp"
#include "engine/common/error.hpp"
#include "engine/validation/dosa_dataset.hpp"

using namespace mapfuse;

int main(int argc, char** argv) {
  CLI::App app{"mapfuse: mapping and fusion design-space exploration for tensor accelerators"};
  app.set_version_flag("--version", std::string("mapfuse ") + MAPFUSE_VERSION);
  app.require_subcommand(1);

  auto* arch_cmd = app.add_subcommand("arch", "Print an architecture (preset name or TOML file)");
  std::string arch_spec;
  arch_cmd->add_option("arch", arch_spec, "preset name or TOML path")->required();

  auto* validate = app.add_subcommand("validate", "Validate the cost model against reference data");
  validate->require_subcommand(1);
  auto* vdosa = validate->add_subcommand("dosa", "DOSA's Timeloop dataset for Gemmini");
  std::string dataset;
  size_t n_rows = 0;
  uint64_t seed = 1;
  vdosa->add_option("dataset", dataset, "dataset.csv or dataset.csv.tar.gz")->required();
  vdosa->add_option("--rows", n_rows, "evaluate N rows sampled with --seed (default: all)");
  vdosa->add_option("--seed", seed, "sampling seed");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  try {
    if (*arch_cmd) {
      std::cout << describe(load_architecture(arch_spec));
    } else if (*vdosa) {
      DosaDataset d = load_dosa_dataset(dataset);
      std::vector<size_t> rows;
      if (n_rows > 0) rows = sample_rows(d.rows.size(), n_rows, seed);
      DosaValidation v = validate_dosa(d, rows);
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
    }
  } catch (const InputError& e) {
    fmt::print(stderr, "mapfuse: error: {}\n", e.what());
    return 2;
  }
  return 0;
}
