// `mapfuse merge study.toml PART...`: the partial files of a sliced study (`mapfuse run study.toml
// --slice i/n`, one per job-array task) become the study's one file, as a single run of the whole
// study writes it, and its journal. Refuses parts of another study, units in two parts, and an
// incomplete set of parts (listing the missing units); writes nothing then.
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <memory>

#include "cli/commands.hpp"
#include "cli/study_units.hpp"
#include "engine/common/error.hpp"
#include "partitioners/slice.hpp"
#include "partitioners/study.hpp"
#include "results/hdf5_writer.hpp"
#include "results/journal.hpp"
#include "results/merge.hpp"

namespace mapfuse::cli {

namespace {

bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec;
  return std::filesystem::weakly_canonical(a, ec) == std::filesystem::weakly_canonical(b, ec) && !ec;
}

}  // namespace

Command add_merge_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("merge", "Merge the partial files of a sliced study (run --slice i/n) into its study file");
  struct Options {
    std::string study, output;
    std::vector<std::string> parts;
  };
  auto o = std::make_shared<Options>();
  cmd->add_option("study", o->study, "study TOML (the same path the slices were run with)")->required();
  cmd->add_option("parts", o->parts, "the slices' HDF5 files (run --slice i/n --output PART)")->required();
  cmd->add_option("--output", o->output, "HDF5 file to write (default: out/<study name>.h5), with its journal");
  return {cmd, [o]() {
            const Study study = load_study(o->study);
            const std::string output = o->output.empty() ? "out/" + study.name + ".h5" : o->output;
            for (const std::string& p : o->parts)
              if (same_file(p, output))
                throw InputError({}, "--output", "'" + output + "' is one of the parts; choose another output path");
            const std::vector<StudyPart> parts = read_study_parts(o->parts, study.toml_text);

            // The units a single run of the study computes, each with its slice for messages
            // about missing units (when every part is a slice of the same n).
            std::vector<WorkUnit> units = partition_study(study, &study_layers);
            int count = parts.front().file.meta.slice.count;
            for (const auto& p : parts)
              if (p.file.meta.slice.count != count) count = 0;
            const std::vector<int> slice = count > 0 ? slice_assignment(units, count) : std::vector<int>(units.size(), -1);
            std::vector<ExpectedUnit> expected;
            for (std::size_t k = 0; k < units.size(); ++k)
              expected.push_back({units[k].id, units[k].label,
                                  slice[k] < 0 ? "" : describe(StudySlice{slice[k], count})});
            StudyFile merged = merge_study_parts(parts, expected);

            std::filesystem::path dir = std::filesystem::path(output).parent_path();
            std::error_code ec;
            if (!dir.empty()) std::filesystem::create_directories(dir, ec);
            if (ec || access(dir.empty() ? "." : dir.c_str(), W_OK) != 0)
              throw InputError({}, "--output", "cannot write to directory '" + dir.string() + "'");
            // Like `run`, never replace another study's results (or a slice's) at the output path.
            const JournalContents old = read_journal(journal_path(output), merged.meta.study_id);
            if (old.existed && !old.slice.whole())
              throw InputError({journal_path(output), 0, 0}, "",
                               "journal holds " + describe(old.slice) + " of the study; choose another output path");
            // The journal first: with it alone, `mapfuse run` would rebuild the same file.
            write_journal(journal_path(output), merged.meta.toml_text, merged.meta.start_time, {}, merged.results);
            write_study_h5(output, merged.meta, merged.results);
            std::size_t failed = 0;
            for (const auto& r : merged.results) failed += r.status == UnitResult::Status::Failed;
            fmt::print("{}: {} units from {} parts ({} failed) -> {}\n", study.name, merged.results.size(), parts.size(),
                       failed, output);
            return failed ? 1 : 0;
          }};
}

}  // namespace mapfuse::cli
