#pragma once
// The append-only journal of a study: the durable record of every finished unit.
//
// It lives beside the study's HDF5 file (`<study>.h5.journal`, see journal_path). Line 1 is a
// header naming the study; every further line is one UnitResult in its JSON form (to_json). Each
// line is written with one write() including its '\n' and then fdatasync'ed, so a SIGKILL loses at
// most the line being written. A reader ignores an unterminated last line (and counts it); a
// reopened writer cuts it off before appending. The HDF5 file is always rebuilt from the journal.
// Format and resume semantics: docs/results.md.
#include <cstddef>
#include <set>
#include <string>
#include <vector>

#include "partitioners/slice.hpp"
#include "results/unit_result.hpp"

namespace mapfuse {

// The study id: stable hash (FNV-1a, 16 hex digits) of the study's TOML text.
std::string study_id_of(const std::string& toml_text);

// "<h5_path>.journal".
std::string journal_path(const std::string& h5_path);

struct JournalContents {
  std::string study_id;   // from the header ("" when the journal did not exist or was empty)
  std::string toml_text;  // from the header
  std::string start_time; // from the header: when the first run started ("" in older journals)
  StudySlice slice;       // from the header: the slice this journal's run computes (whole: count 0)
  // One result per finished unit, in the order they were first journaled; a unit journaled twice
  // keeps its last result.
  std::vector<UnitResult> results;
  std::set<std::string> finished;  // the ids of `results`
  std::size_t truncated_lines = 0;  // an unterminated last line, ignored (0 or 1)
  bool existed = false;             // a journal with a complete header was found
};

// Reads a journal. A missing or empty file (or one whose header line was never completed) gives
// empty contents. Throws InputError when the header names another study than expected_study_id
// (pass "" to accept any study), when the header is not a mapfuse journal header, or when a
// complete line is not a valid unit result (the journal was edited or corrupted: file and line).
JournalContents read_journal(const std::string& path, const std::string& expected_study_id);

// Appends to a journal. Opening reads what is already there (recovered()), refuses a journal of
// another study or of another slice of it (InputError), cuts off an unterminated last line, and
// writes the header (with the current time as the start time, and the slice) when the file is new
// or empty. Not thread-safe: one writer (rank 0's collector) per journal.
class JournalWriter {
 public:
  // sync = false skips fdatasync (tests, benchmarks); lines are still written whole.
  JournalWriter(const std::string& path, const std::string& toml_text, bool sync = true,
                const StudySlice& slice = {});
  ~JournalWriter();
  JournalWriter(const JournalWriter&) = delete;
  JournalWriter& operator=(const JournalWriter&) = delete;

  const std::string& path() const { return path_; }
  const std::string& study_id() const { return study_id_; }
  // When the first run of this journal started (ISO 8601 UTC): the header's time, kept across
  // resumes. For a journal written before headers had a time: when this writer opened it.
  const std::string& start_time() const { return start_time_; }
  // What the journal held when it was opened (the units a resumed run need not redo).
  const JournalContents& recovered() const { return recovered_; }

  // Writes one line and makes it durable (unless sync = false). Throws std::runtime_error on an
  // I/O error (disk full...), naming the file.
  void append(const UnitResult& r);
  // Group commit: all lines in one write() and one fdatasync (fdatasync costs ~0.1 ms on this
  // machine's ext4, more than a whole unit's master overhead). A kill loses at most these lines,
  // whole ones remain readable. For a collector that receives several results at once.
  void append(const std::vector<UnitResult>& rs);
  std::size_t appended() const { return appended_; }

 private:
  void write_line(const std::string& line);

  std::string path_;
  std::string study_id_;
  std::string start_time_;
  JournalContents recovered_;
  int fd_ = -1;
  bool sync_ = true;
  std::size_t appended_ = 0;
};

// Writes a complete journal (header with start_time and slice, then one line per result) to
// "<path>.tmp.<pid>", syncs it and renames it over `path`: for `mapfuse merge`, whose output must
// look like a finished run's. Throws std::runtime_error naming the path; leaves no temporary file.
void write_journal(const std::string& path, const std::string& toml_text, const std::string& start_time,
                   const StudySlice& slice, const std::vector<UnitResult>& results);

}  // namespace mapfuse
