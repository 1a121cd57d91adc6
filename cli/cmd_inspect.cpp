// `mapfuse arch` and `mapfuse workload`: print what was loaded.
#include <iostream>

#include "cli/commands.hpp"
#include "engine/arch/arch_toml.hpp"
#include "engine/workload/load.hpp"

namespace mapfuse::cli {

Command add_arch_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("arch", "Print an architecture (preset name or TOML file)");
  auto spec = std::make_shared<std::string>();
  cmd->add_option("arch", *spec, "preset name or TOML path; `mapfuse arch --list` lists presets");
  auto list = std::make_shared<bool>(false);
  cmd->add_flag("--list", *list, "list the built-in presets");
  return {cmd, [spec, list]() {
    if (*list || spec->empty()) {
      for (const auto& n : arch_preset_names()) std::cout << n << '\n';
      return 0;
    }
    std::cout << describe(load_architecture(*spec));
    return 0;
  }};
}

Command add_workload_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "workload", "Print a workload (zoo name, .onnx, Timeloop .yaml or directory, workload .toml)");
  auto spec = std::make_shared<std::string>();
  auto params = std::make_shared<ZooParams>();
  auto list = std::make_shared<bool>(false);
  cmd->add_option("workload", *spec, "zoo name or path");
  cmd->add_option("--batch", params->batch, "batch size for zoo networks")->check(CLI::PositiveNumber);
  cmd->add_option("--tokens", params->tokens, "sequence length for gpt3_6.7b")->check(CLI::PositiveNumber);
  cmd->add_flag("--list", *list, "list the model zoo");
  return {cmd, [spec, params, list]() {
    if (*list || spec->empty()) {
      for (const auto& n : zoo_names()) std::cout << n << '\n';
      return 0;
    }
    std::cout << describe(load_workload(*spec, *params));
    return 0;
  }};
}

}  // namespace mapfuse::cli
