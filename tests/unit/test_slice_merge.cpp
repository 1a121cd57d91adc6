// Slices of a study (partitioners/slice.hpp), the journal's start time and slice, and merging
// slices' files (results/merge.hpp).
#include <doctest/doctest.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <numeric>
#include <random>
#include <set>
#include <stdexcept>
#include <string>

#include "engine/common/error.hpp"
#include "partitioners/slice.hpp"
#include "results/hdf5_writer.hpp"
#include "results/journal.hpp"
#include "results/merge.hpp"

using namespace mapfuse;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "mapfuse-slice-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

std::vector<WorkUnit> make_units(int n) {
  std::vector<WorkUnit> units;
  for (int i = 0; i < n; ++i) {
    WorkUnit u;
    u.kind = "map_layer";
    u.label = "unit " + std::to_string(i);
    u.id = stable_id(u.label);
    u.cost_hint = 1.0 + (i % 5);  // costs 1..5
    units.push_back(u);
  }
  return units;
}

UnitResult result_of(const WorkUnit& u) {
  UnitResult r;
  r.unit_id = u.id;
  r.kind = u.kind;
  r.label = u.label;
  r.energy_pj = 100 + u.cost_hint;
  r.cycles = 7;
  r.edp = r.energy_pj * r.cycles;
  return r;
}

const char* kToml = "name = \"slices\"\n";

}  // namespace

TEST_CASE("slice: i/n parsing") {
  CHECK(parse_slice("0/1") == StudySlice{0, 1});
  CHECK(parse_slice("3/4") == StudySlice{3, 4});
  for (const char* bad : {"4/4", "-1/4", "1/0", "0/-2", "a/4", "1", "", "/", "1/2/3", " 1/2", "1/2x"})
    CHECK_THROWS_WITH_AS(parse_slice(bad), doctest::Contains("--slice"), InputError);
  CHECK(describe(StudySlice{}) == "the whole study");
  CHECK(describe(StudySlice{2, 5}) == "slice 2/5");
}

TEST_CASE("slice: a deterministic, disjoint, covering partition balanced by cost") {
  std::vector<WorkUnit> units = make_units(103);
  const double total = std::accumulate(units.begin(), units.end(), 0.0, [](double s, const WorkUnit& u) { return s + u.cost_hint; });
  std::vector<WorkUnit> shuffled = units;
  std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937(7));
  for (int n : {1, 2, 3, 7, 200}) {
    std::set<std::string> seen;
    double max_load = 0;
    for (int i = 0; i < n; ++i) {
      const auto a = units_of_slice(units, {i, n});
      const auto b = units_of_slice(shuffled, {i, n});  // the input order does not matter
      REQUIRE(a.size() == b.size());
      double load = 0;
      for (std::size_t k = 0; k < a.size(); ++k) {
        CHECK(a[k].id == b[k].id);
        CHECK(seen.insert(a[k].id).second);  // in no other slice
        load += a[k].cost_hint;
        if (k > 0) CHECK(a[k - 1].cost_hint >= a[k].cost_hint);  // dispatch order inside a slice
      }
      max_load = std::max(max_load, load);
    }
    CHECK(seen.size() == units.size());
    // Greedy by cost: no slice exceeds the average by more than the largest unit (5).
    CHECK(max_load <= total / n + 5.0);
  }
  // Equal (zero) hints still spread the units evenly.
  for (auto& u : units) u.cost_hint = 0;
  CHECK(units_of_slice(units, {0, 4}).size() == 26);
  CHECK(units_of_slice(units, {3, 4}).size() == 25);
}

TEST_CASE("journal: start time and slice kept across resumes") {
  TempDir dir;
  const std::string path = dir / "s.part1of3.h5.journal";
  std::string start;
  {
    JournalWriter j(path, kToml, false, {1, 3});
    start = j.start_time();
    CHECK(start.size() == 20);  // YYYY-MM-DDThh:mm:ssZ
  }
  const JournalContents c = read_journal(path, study_id_of(kToml));
  CHECK(c.start_time == start);
  CHECK(c.slice == StudySlice{1, 3});
  {
    JournalWriter j(path, kToml, false, {1, 3});  // resume
    CHECK(j.start_time() == start);
  }
  CHECK_THROWS_WITH_AS(JournalWriter(path, kToml, false, {1, 4}),
                       doctest::Contains("journal holds slice 1/3, this run is slice 1/4"), InputError);
  CHECK_THROWS_WITH_AS(JournalWriter(path, kToml, false), doctest::Contains("this run is the whole study"), InputError);
}

TEST_CASE("merge: parts of one study become the whole study's file") {
  TempDir dir;
  const std::vector<WorkUnit> units = make_units(10);
  std::vector<ExpectedUnit> expected;
  for (const auto& u : units) expected.push_back({u.id, u.label, ""});
  std::vector<std::string> paths;
  for (int i = 0; i < 3; ++i) {
    StudyMeta m;
    m.name = "slices";
    m.toml_text = kToml;
    m.study_id = study_id_of(kToml);
    m.start_time = i == 1 ? "2026-01-01T00:00:00Z" : "2026-01-02T00:00:00Z";
    m.end_time = "2026-01-03T00:00:00Z";
    m.ranks = 2;
    m.threads = i + 1;
    m.slice = {i, 3};
    std::vector<UnitResult> rs;
    for (const auto& u : units_of_slice(units, {i, 3})) rs.push_back(result_of(u));
    paths.push_back(dir / ("p" + std::to_string(i) + ".h5"));
    write_study_h5(paths.back(), m, rs);
  }
  const auto parts = read_study_parts(paths, kToml);
  const StudyFile merged = merge_study_parts(parts, expected);
  CHECK(merged.meta.slice.whole());
  CHECK(merged.meta.start_time == "2026-01-01T00:00:00Z");
  CHECK(merged.meta.ranks == 6);
  CHECK(merged.meta.threads == 3);
  REQUIRE(merged.results.size() == 10);
  CHECK(std::is_sorted(merged.results.begin(), merged.results.end(),
                       [](const UnitResult& a, const UnitResult& b) { return a.unit_id < b.unit_id; }));

  CHECK_THROWS_WITH_AS(read_study_parts(paths, "name = \"other\"\n"), doctest::Contains("different study"), InputError);
  CHECK_THROWS_WITH_AS(read_study_parts({paths[0], paths[0]}, kToml), doctest::Contains("each slice must be given once"),
                       InputError);
  const auto two = read_study_parts({paths[0], paths[2]}, kToml);
  const auto p1 = units_of_slice(units, {1, 3});
  try {
    merge_study_parts(two, expected);
    FAIL("no error for a missing part");
  } catch (const InputError& e) {
    const std::string what = e.what();
    CHECK(what.find(std::to_string(p1.size()) + " of 10 units of the study are in no part") != std::string::npos);
    for (const auto& u : p1) CHECK(what.find("\n  " + u.label) != std::string::npos);
  }
  std::vector<ExpectedUnit> fewer(expected.begin() + 1, expected.end());
  CHECK_THROWS_WITH_AS(merge_study_parts(parts, fewer), doctest::Contains("is not a unit of this study"), InputError);
}
