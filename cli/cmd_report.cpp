// `mapfuse report study.h5`: summary tables (Markdown, or CSV) and PNG plots.
#include <fmt/format.h>

#include <filesystem>
#include <iostream>

#include "cli/commands.hpp"
#include "cli/study_units.hpp"
#include "engine/common/error.hpp"
#include "partitioners/study.hpp"
#include "results/report.hpp"

namespace mapfuse::cli {

// The sweep points of the study that wrote the file, from its TOML (kept in the file). Only the
// text is read: the architecture and constraint files need not exist any more.
static std::vector<SweepPointInfo> sweep_points(const StudyFile& s, const std::string& path) {
  std::vector<SweepPointInfo> out;
  Study study;
  try {
    study = parse_study(s.meta.toml_text, path + ":/study/toml", /*load_architectures=*/false);
  } catch (const InputError&) {
    return out;  // a study file written before sweeps existed, or by a newer version: no sweep tables
  }
  for (const StudyArchitecture& a : study.architectures)
    if (!a.sweep.empty())
      for (const ArchitecturePoint& p : a.points) out.push_back({p.name, a.name, p.params});
  return out;
}

// The layers of each workload of the study in network order (for tables and plots). A workload
// that no longer loads (a file moved away) is left out: its layers then keep their label order.
static LayerOrder layer_order(const StudyFile& s, const std::string& path) {
  LayerOrder out;
  try {
    const Study study = parse_study(s.meta.toml_text, path + ":/study/toml", /*load_architectures=*/false);
    for (const StudyWorkload& w : study.workloads) {
      std::vector<std::string> names;
      for (const StudyLayer& l : study_layers(w)) names.push_back(l.name);
      out.emplace_back(w.spec, std::move(names));
    }
  } catch (const std::exception&) {
  }
  return out;
}

Command add_report_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("report", "Summary tables and plots of a study file or of a schedule file");
  auto path = std::make_shared<std::string>();
  auto csv = std::make_shared<bool>(false);
  auto plots = std::make_shared<std::string>();
  auto no_plots = std::make_shared<bool>(false);
  auto units = std::make_shared<bool>(false);
  cmd->add_option("study", *path, "study HDF5 file written by `mapfuse run` (or a schedule file of `mapfuse schedule --output`)")->required();
  cmd->add_flag("--csv", *csv, "print every unit as CSV, its parameters as columns, instead of the Markdown summary");
  cmd->add_flag("--units", *units, "also list every unit in the Markdown summary");
  cmd->add_option("--plots", *plots, "directory for the PNG plots (default: <study>_plots)");
  cmd->add_flag("--no-plots", *no_plots, "tables only");
  return {cmd, [=]() {
            if (is_schedule_h5(*path)) {  // `mapfuse schedule --output`: totals, Gantt chart and memory plot
              std::cout << schedule_report_markdown(read_schedule_h5(*path));
              if (!*no_plots) {
                const std::string dir = plots->empty() ? (std::filesystem::path(*path).replace_extension("").string() + "_plots") : *plots;
                for (const std::string& f : write_plots(*path, dir)) fmt::print(stderr, "wrote {}\n", f);
              }
              return 0;
            }
            const StudyFile s = read_study_h5(*path);
            const std::vector<SweepPointInfo> sweep = sweep_points(s, *path);
            ReportOptions options;
            options.units = *units;
            options.layer_order = layer_order(s, *path);
            options.csv_hint = fmt::format("Every unit, with its parameters as columns (workload, einsum, arch, method, seed, "
                                           "objective, sweep parameters): `mapfuse report {} --csv` (or --units here); "
                                           "pandas: docs/results.md.", *path);
            std::cout << (*csv ? report_csv(s) : report_markdown(s, sweep, options));
            if (!*csv) {
              const std::vector<ScheduleRecord> schedules = read_schedules_group(*path);
              if (!schedules.empty()) std::cout << schedule_report_markdown(schedules);
            }
            if (!*no_plots) {
              const std::string dir = plots->empty() ? (std::filesystem::path(*path).replace_extension("").string() + "_plots") : *plots;
              for (const std::string& f : write_plots(*path, dir, sweep_csv(s, sweep), options.layer_order))
                fmt::print(stderr, "wrote {}\n", f);
            }
            return 0;
          }};
}

}  // namespace mapfuse::cli
