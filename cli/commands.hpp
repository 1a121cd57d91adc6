#pragma once
// Each subcommand registers itself on the app and returns the action to run when it is chosen.
#include <CLI/CLI.hpp>

#include <functional>

namespace mapfuse::cli {

// The action returns the process exit status: 0 success, 1 a check or run failed. Bad input is
// reported by throwing InputError (status 2).
using Action = std::function<int()>;

struct Command {
  CLI::App* app;  // the subcommand, to ask whether it was chosen
  Action run;
};

Command add_arch_command(CLI::App& app);
Command add_workload_command(CLI::App& app);
Command add_eval_command(CLI::App& app);
Command add_map_command(CLI::App& app);
Command add_run_command(CLI::App& app);
Command add_merge_command(CLI::App& app);
Command add_report_command(CLI::App& app);
Command add_validate_command(CLI::App& app);
Command add_demo_command(CLI::App& app);
Command add_optimize_command(CLI::App& app);
Command add_ffm_command(CLI::App& app);
Command add_schedule_command(CLI::App& app);
Command add_partition_command(CLI::App& app);
Command add_get_train_command(CLI::App& app);
Command add_get_train_explainer_command(CLI::App& app);

}  // namespace mapfuse::cli
