// mapfuse command-line entry point: subcommands over the engine.
#include <fmt/format.h>

#include <cstdio>
#include <vector>

#include "cli/commands.hpp"
#include "engine/common/error.hpp"

int main(int argc, char** argv) {
  using namespace mapfuse;
  CLI::App app{"mapfuse: mapping and fusion design-space exploration for tensor accelerators"};
  app.set_version_flag("--version", std::string("mapfuse ") + MAPFUSE_VERSION);
  app.require_subcommand(1);
  const std::vector<cli::Command> commands = {
      cli::add_arch_command(app),     cli::add_workload_command(app), cli::add_eval_command(app),
      cli::add_map_command(app),      cli::add_run_command(app),      cli::add_report_command(app),
      cli::add_validate_command(app), cli::add_demo_command(app),
      cli::add_merge_command(app),    cli::add_optimize_command(app),
      cli::add_ffm_command(app),      cli::add_schedule_command(app),
      cli::add_partition_command(app), cli::add_get_train_command(app), cli::add_get_train_explainer_command(app),
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  try {
    for (const auto& c : commands)
      if (c.app->parsed()) return c.run();
  } catch (const InputError& e) {
    fmt::print(stderr, "mapfuse: error: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "mapfuse: internal error: {}\n", e.what());
    return 1;
  }
  return 0;
}
