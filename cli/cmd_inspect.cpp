// `mapfuse arch` and `mapfuse workload`: print what was loaded.
#include <filesystem>
#include <iostream>

#include "cli/commands.hpp"
#include "engine/arch/arch_toml.hpp"
#include "engine/arch/stream_yaml.hpp"
#include "engine/validation/timeloop_input.hpp"
#include "engine/workload/load.hpp"

namespace mapfuse::cli {

namespace {

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A preset, a TOML file, or a Timeloop run (its directory or parsed-processed-input.yaml), whose
// architecture is imported with its energy reference table.
Architecture load_any_architecture(const std::string& spec) {
  if ((ends_with(spec, ".yaml") || ends_with(spec, ".yml")) && is_stream_hardware_yaml(spec)) return load_architecture(spec);
  if (ends_with(spec, ".yaml") || ends_with(spec, ".yml") || std::filesystem::is_directory(spec)) {
    const TimeloopCaseFiles files = locate_timeloop_case(spec);
    TimeloopCase c = import_timeloop_input(files.input, files.ert, files.map);
    Architecture a;
    a.name = c.core.name;
    a.description = "imported from Timeloop input " + files.input;
    a.cores.push_back(std::move(c.core));
    return a;
  }
  return load_architecture(spec);
}

}  // namespace

Command add_arch_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "arch", "Print an architecture (preset name, TOML file, or Timeloop run directory / input YAML)");
  auto spec = std::make_shared<std::string>();
  cmd->add_option("arch", *spec, "preset name, TOML path or Timeloop input; `mapfuse arch --list` lists presets");
  auto list = std::make_shared<bool>(false);
  auto toml = std::make_shared<bool>(false);
  cmd->add_flag("--list", *list, "list the built-in presets");
  cmd->add_flag("--toml", *toml, "print the architecture as mapfuse TOML (e.g. to convert a Timeloop architecture)");
  return {cmd, [spec, list, toml]() {
    if (*list || spec->empty()) {
      for (const auto& n : arch_preset_names()) std::cout << n << '\n';
      return 0;
    }
    const Architecture a = load_any_architecture(*spec);
    std::cout << (*toml ? to_toml(a) : describe(a));
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
