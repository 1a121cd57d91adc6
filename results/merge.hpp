#pragma once
// Merging the partial files of a sliced study (`mapfuse run STUDY --slice i/n`, one per job-array
// task) into the one study file that a single run of the whole study writes (`mapfuse merge`).
#include <string>
#include <vector>

#include "results/hdf5_writer.hpp"

namespace mapfuse {

// A unit the study must have a result for, as the partitioner cut it.
struct ExpectedUnit {
  std::string id;
  std::string label;
  std::string where;  // for messages, e.g. "slice 1/4" (may be empty)
};

struct StudyPart {
  std::string path;
  StudyFile file;
};

// Reads the parts (read_study_h5) and checks that each belongs to the study whose TOML text is
// `toml_text` (study id and TOML text) and that no two parts are the same slice. InputError
// naming the part otherwise.
std::vector<StudyPart> read_study_parts(const std::vector<std::string>& paths, const std::string& toml_text);

// The whole study's file from its parts: checks that every unit of the parts is one of
// `expected`, that no unit is in two parts, and that every expected unit is in some part
// (InputError listing the missing units by label otherwise). Metadata: the study's name, id and
// TOML; start_time = the earliest part's, end_time = now, ranks = the parts' ranks summed,
// threads = the largest of the parts'; not a slice. Results sorted by unit id.
StudyFile merge_study_parts(const std::vector<StudyPart>& parts, const std::vector<ExpectedUnit>& expected);

}  // namespace mapfuse
