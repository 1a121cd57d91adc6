// The append-only journal: append, truncated last line, resume, foreign-study rejection.
#include <doctest/doctest.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include "engine/common/error.hpp"
#include "partitioners/work_unit.hpp"
#include "results/journal.hpp"

using namespace mapfuse;
namespace fs = std::filesystem;

namespace {

struct JournalDir {
  fs::path path;
  JournalDir() {
    std::string tmpl = (fs::temp_directory_path() / "mapfuse-journal-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path = tmpl;
  }
  ~JournalDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

const char* kStudy = "name = \"journal test\"\nnote = \"tab\\t and \\\"quotes\\\"\"\n";

UnitResult unit(int i, double energy = 0) {
  UnitResult r;
  r.unit_id = stable_id("journal unit " + std::to_string(i));
  r.kind = "map_layer";
  r.label = "layer " + std::to_string(i) + "\nsecond line";
  r.energy_pj = energy ? energy : 1000.0 + i;
  r.cycles = 10 + i;
  r.edp = r.energy_pj * r.cycles;
  r.trace = {{0.5, 7, 3.25}};
  return r;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("results: journal header and appended lines") {
  JournalDir dir;
  const std::string path = journal_path(dir / "study.h5");
  CHECK(path == dir / "study.h5.journal");
  {
    JournalWriter j(path, kStudy);  // with fdatasync, as in a real run
    CHECK_FALSE(j.recovered().existed);
    CHECK(j.study_id() == stable_id(kStudy));
    for (int i = 0; i < 3; ++i) j.append(unit(i));
    CHECK(j.appended() == 3);
  }
  const std::string text = slurp(path);
  CHECK(text.back() == '\n');
  CHECK(std::count(text.begin(), text.end(), '\n') == 4);  // header + 3 units, one line each
  CHECK(text.rfind("{\"mapfuse_journal\":1,", 0) == 0);
  const JournalContents c = read_journal(path, study_id_of(kStudy));
  CHECK(c.existed);
  CHECK(c.study_id == study_id_of(kStudy));
  CHECK(c.toml_text == kStudy);  // JSON-escaped in the header, verbatim after reading
  CHECK(c.truncated_lines == 0);
  REQUIRE(c.results.size() == 3);
  for (int i = 0; i < 3; ++i) {
    CHECK(to_json(c.results[i]) == to_json(unit(i)));
    CHECK(c.finished.count(unit(i).unit_id) == 1);
  }
  // A missing journal reads as empty.
  const JournalContents none = read_journal(dir / "absent.journal", study_id_of(kStudy));
  CHECK_FALSE(none.existed);
  CHECK(none.results.empty());
}

TEST_CASE("results: journal tolerates a truncated last line and resumes after it") {
  JournalDir dir;
  const std::string path = dir / "s.h5.journal";
  {
    JournalWriter j(path, kStudy, false);
    j.append(unit(0));
    j.append(unit(1));
  }
  // SIGKILL in the middle of a write: half a line, no newline.
  std::ofstream(path, std::ios::app) << to_json(unit(2)).substr(0, 25);
  const JournalContents c = read_journal(path, study_id_of(kStudy));
  CHECK(c.truncated_lines == 1);
  CHECK(c.results.size() == 2);
  CHECK(c.finished.count(unit(2).unit_id) == 0);
  {
    JournalWriter j(path, kStudy, false);  // resume: the half line is cut off before appending
    CHECK(j.recovered().truncated_lines == 1);
    CHECK(j.recovered().finished.size() == 2);
    j.append(std::vector<UnitResult>{unit(2), unit(1, 5.0)});  // group commit; the unit journaled twice keeps its last result
    CHECK(j.appended() == 2);
  }
  const JournalContents d = read_journal(path, study_id_of(kStudy));
  CHECK(d.truncated_lines == 0);
  REQUIRE(d.results.size() == 3);
  CHECK(d.results[0].unit_id == unit(0).unit_id);
  CHECK(d.results[1].energy_pj == 5.0);
  CHECK(d.results[2].unit_id == unit(2).unit_id);
}

TEST_CASE("results: journal whose header was never completed starts afresh") {
  JournalDir dir;
  const std::string path = dir / "s.h5.journal";
  std::ofstream(path) << "{\"mapfuse_jour";
  const JournalContents c = read_journal(path, study_id_of(kStudy));
  CHECK_FALSE(c.existed);
  CHECK(c.truncated_lines == 1);
  {
    JournalWriter j(path, kStudy, false);
    j.append(unit(0));
  }
  const JournalContents d = read_journal(path, study_id_of(kStudy));
  CHECK(d.existed);
  CHECK(d.results.size() == 1);
}

TEST_CASE("results: journal of a different study is refused") {
  JournalDir dir;
  const std::string path = dir / "s.h5.journal";
  {
    JournalWriter j(path, kStudy, false);
    j.append(unit(0));
  }
  const std::string before = slurp(path);
  const std::string other = std::string(kStudy) + "seed = 2\n";
  CHECK_THROWS_WITH_AS(JournalWriter(path, other, false), doctest::Contains("different study"), InputError);
  CHECK_THROWS_WITH_AS(read_journal(path, study_id_of(other)), doctest::Contains(path.c_str()), InputError);
  CHECK(slurp(path) == before);  // untouched
  CHECK(read_journal(path, "").results.size() == 1);  // "" accepts any study

  // Not a journal at all / a corrupted complete line: refused with file and line.
  std::ofstream(dir / "text.journal") << "hello\n";
  CHECK_THROWS_WITH_AS(read_journal(dir / "text.journal", ""), doctest::Contains("not a mapfuse journal"), InputError);
  std::ofstream(path, std::ios::app) << "{\"unit_id\": 3}\n" << to_json(unit(1)) << "\n";
  const std::string where = path + ":3:";
  CHECK_THROWS_WITH_AS(read_journal(path, study_id_of(kStudy)), doctest::Contains(where.c_str()), InputError);
}
