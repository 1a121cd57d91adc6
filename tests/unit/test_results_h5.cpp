// The study's HDF5 file: round trip, order independence, atomic writes, h5dump and h5py.
#include <doctest/doctest.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/common/error.hpp"
#include "partitioners/work_unit.hpp"
#include "results/hdf5_writer.hpp"
#include "results/journal.hpp"

using namespace mapfuse;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "mapfuse-results-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

const char* kToml = "name = \"tiny\"\n[[workloads]]\nname = \"resnet18\" # \"quoted\" \\ back\n";

UnitResult sample_result(int i) {
  UnitResult r;
  r.unit_id = stable_id("unit " + std::to_string(i));
  r.kind = i % 3 == 2 ? "optimize" : "map_layer";
  r.label = "resnet18/conv" + std::to_string(i) + " @ pe16 \"q\" µ";
  r.rank = 1 + i % 2;
  r.wall_seconds = 0.125 * (i + 1);
  r.producer = mapfuse_version_string();  // a study file's results carry its producer
  if (i % 4 == 3) {
    r.status = UnitResult::Status::Failed;
    r.message = "no valid mapping for layer " + std::to_string(i);
    return r;
  }
  r.energy_pj = 1.5e9 + i * 1e7 + 0.1;
  r.cycles = 12345 + i;
  r.edp = r.energy_pj * r.cycles;
  r.level_names = {"DRAM", "Scratchpad", "Accumulator", "Registers"};
  r.level_names.resize(1 + i % 4);
  for (std::size_t l = 0; l < r.level_names.size(); ++l) {
    r.level_energy_pj.push_back(1e8 / (l + 1) + i);
    r.level_cycles.push_back(100.0 * (l + 1) + i);
  }
  r.best_mapping = "DRAM[A,B,Z] M=" + std::to_string(i + 1) + " | Scratchpad[B,Z] K=2@x";
  for (int t = 0; t < i % 5; ++t) r.trace.push_back({0.01 * t, 100 * (t + 1) + i, 10.0 - t});
  for (int p = 0; p < i % 3; ++p) r.pareto.push_back({1.0 + p, 2.0 - p * 0.5, "m" + std::to_string(i) + "_" + std::to_string(p)});
  return r;
}

std::vector<UnitResult> sample_results(int n) {
  std::vector<UnitResult> v;
  for (int i = 0; i < n; ++i) v.push_back(sample_result(i));
  return v;
}

StudyMeta sample_meta() {
  StudyMeta m;
  m.name = "tiny";
  m.toml_text = kToml;
  m.study_id = study_id_of(m.toml_text);
  m.start_time = "2026-11-22T05:00:00Z";
  m.end_time = "2026-11-22T05:01:30Z";
  m.ranks = 4;
  m.threads = 2;
  return m;
}

void check_meta(const StudyMeta& a, const StudyMeta& b) {
  CHECK(a.name == b.name);
  CHECK(a.study_id == b.study_id);
  CHECK(a.toml_text == b.toml_text);
  CHECK(a.mapfuse_version == b.mapfuse_version);
  CHECK(a.start_time == b.start_time);
  CHECK(a.end_time == b.end_time);
  CHECK(a.ranks == b.ranks);
  CHECK(a.threads == b.threads);
}

std::vector<std::string> as_json(const std::vector<UnitResult>& v) {
  std::vector<std::string> out;
  for (const auto& r : v) out.push_back(to_json(r));
  return out;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("results: study file round trip") {
  TempDir dir;
  const std::string path = dir / "study.h5";
  auto results = sample_results(9);
  const StudyMeta meta = sample_meta();
  write_study_h5(path, meta, results);
  const StudyFile f = read_study_h5(path);
  check_meta(f.meta, meta);
  CHECK(f.meta.mapfuse_version == mapfuse_version_string());
  CHECK_FALSE(f.meta.mapfuse_version.empty());
  std::sort(results.begin(), results.end(), [](const auto& a, const auto& b) { return a.unit_id < b.unit_id; });
  REQUIRE(f.results.size() == results.size());
  CHECK(as_json(f.results) == as_json(results));  // every field, bit for bit (doubles print round-trip)
  // Only the final file is left behind.
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir.path)) names.push_back(e.path().filename().string());
  CHECK(names == std::vector<std::string>{"study.h5"});
}

TEST_CASE("results: empty study round trip") {
  TempDir dir;
  const std::string path = dir / "empty.h5";
  write_study_h5(path, sample_meta(), {});
  const StudyFile f = read_study_h5(path);
  check_meta(f.meta, sample_meta());
  CHECK(f.results.empty());
}

TEST_CASE("results: study file contents do not depend on the order results arrive in") {
  TempDir dir;
  auto a = sample_results(12);
  auto b = a;
  std::mt19937 rng(7);
  std::shuffle(b.begin(), b.end(), rng);
  std::reverse(a.begin(), a.end());
  REQUIRE(as_json(a) != as_json(b));
  write_study_h5(dir / "a.h5", sample_meta(), a);
  write_study_h5(dir / "b.h5", sample_meta(), b);
  const StudyFile fa = read_study_h5(dir / "a.h5");
  const StudyFile fb = read_study_h5(dir / "b.h5");
  check_meta(fa.meta, fb.meta);
  CHECK(as_json(fa.results) == as_json(fb.results));
  CHECK(std::is_sorted(fa.results.begin(), fa.results.end(),
                       [](const auto& x, const auto& y) { return x.unit_id < y.unit_id; }));
  // No timestamps inside objects either: the files themselves are identical.
  CHECK(slurp(dir / "a.h5") == slurp(dir / "b.h5"));
}

TEST_CASE("results: a study file rebuilt from a resumed journal equals an uninterrupted run's") {
  TempDir dir;
  const auto all = sample_results(10);
  {  // uninterrupted
    JournalWriter j(dir / "full.h5.journal", kToml, false);
    for (const auto& r : all) j.append(r);
  }
  {  // interrupted after 4 units, mid-line, then resumed: the rest arrive in another order
    {
      JournalWriter j(dir / "resumed.h5.journal", kToml, false);
      for (int i = 0; i < 4; ++i) j.append(all[i]);
    }
    std::ofstream(dir / "resumed.h5.journal", std::ios::app) << to_json(all[4]).substr(0, 40);
    JournalWriter j(dir / "resumed.h5.journal", kToml, false);
    CHECK(j.recovered().finished.size() == 4);
    CHECK(j.recovered().truncated_lines == 1);
    for (int i = 9; i >= 0; --i)
      if (!j.recovered().finished.count(all[i].unit_id)) j.append(all[i]);
  }
  const auto full = read_journal(dir / "full.h5.journal", study_id_of(kToml));
  const auto resumed = read_journal(dir / "resumed.h5.journal", study_id_of(kToml));
  CHECK(resumed.truncated_lines == 0);
  write_study_h5(dir / "full.h5", sample_meta(), full.results);
  write_study_h5(dir / "resumed.h5", sample_meta(), resumed.results);
  CHECK(as_json(read_study_h5(dir / "full.h5").results) == as_json(read_study_h5(dir / "resumed.h5").results));
  CHECK(slurp(dir / "full.h5") == slurp(dir / "resumed.h5"));
}

TEST_CASE("results: study file errors") {
  TempDir dir;
  // Duplicate unit ids are a caller bug.
  auto dup = sample_results(3);
  dup.push_back(dup[1]);
  CHECK_THROWS_AS(write_study_h5(dir / "dup.h5", sample_meta(), dup), std::invalid_argument);
  CHECK_FALSE(fs::exists(dir / "dup.h5"));
  // Unwritable path: an error naming it, no temporary file left.
  CHECK_THROWS_WITH_AS(write_study_h5(dir / "missing/dir/x.h5", sample_meta(), sample_results(2)),
                       doctest::Contains("missing/dir/x.h5"), std::runtime_error);
  // A failed rewrite leaves the previous complete file untouched.
  write_study_h5(dir / "keep.h5", sample_meta(), sample_results(2));
  const std::string before = slurp(dir / "keep.h5");
  auto bad = sample_results(3);
  bad[2].level_cycles.pop_back();  // inconsistent breakdown
  CHECK_THROWS_AS(write_study_h5(dir / "keep.h5", sample_meta(), bad), std::invalid_argument);
  CHECK(slurp(dir / "keep.h5") == before);
  std::size_t files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path)) ++files;
  CHECK(files == 1);
  // Reading something that is not a study file.
  CHECK_THROWS_WITH_AS(read_study_h5(dir / "nope.h5"), doctest::Contains("nope.h5"), InputError);
  std::ofstream(dir / "text.h5") << "not hdf5\n";
  CHECK_THROWS_WITH_AS(read_study_h5(dir / "text.h5"), doctest::Contains("not an HDF5 file"), InputError);
}

TEST_CASE("results: study file opens with h5dump and with h5py") {
  TempDir dir;
  const std::string path = dir / "study.h5";
  write_study_h5(path, sample_meta(), sample_results(6));
  const std::string dump = dir / "dump.txt";
  REQUIRE(std::system(("h5dump -H '" + path + "' > '" + dump + "' 2>&1").c_str()) == 0);
  const std::string header = slurp(dump);
  for (const char* s : {"GROUP \"study\"", "ATTRIBUTE \"study_id\"", "DATASET \"units\"", "DATASET \"levels\"",
                        "DATASET \"trace\"", "DATASET \"pareto\"", "\"energy_pj\"", "H5T_ENUM"})
    CHECK_MESSAGE(header.find(s) != std::string::npos, std::string(s));

  const std::string script = dir / "read.py";
  std::ofstream(script) << R"PY(import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    s = f["study"].attrs
    u = f["units"][()]
    dec = lambda b: b.decode() if isinstance(b, bytes) else b
    print("study", dec(s["name"]), dec(s["study_id"]), int(s["ranks"]), int(s["threads"]))
    print("toml_ok", dec(s["toml"]) == open(sys.argv[2]).read())
    print("units", len(u), "failed", int((u["status"] == 1).sum()))
    print("first", dec(u["id"][0]), dec(u["kind"][0]), "%.1f" % u["energy_pj"][0], "%.0f" % u["cycles"][0])
    r = u[1]
    lv = f["levels"][r["level_offset"]:r["level_offset"] + r["level_count"]]
    tr = f["trace"][r["trace_offset"]:r["trace_offset"] + r["trace_count"]]
    print("unit1", dec(r["label"]), [dec(x) for x in lv["name"]], tr.shape)
    print("trace_cols", dec(f["trace"].attrs["columns"]), f["trace"].shape[1])
)PY";
  std::ofstream(dir / "study.toml") << kToml;
  const std::string out = dir / "py.txt";
  REQUIRE(std::system(("/usr/bin/python3 '" + script + "' '" + path + "' '" + (dir / "study.toml") + "' > '" + out +
                       "' 2>&1")
                          .c_str()) == 0);
  const std::string py = slurp(out);
  INFO(py);
  const StudyFile f = read_study_h5(path);
  const UnitResult& u0 = f.results[0];
  const UnitResult& u1 = f.results[1];
  char e0[64];
  std::snprintf(e0, sizeof e0, "%.1f %.0f", u0.energy_pj, u0.cycles);
  CHECK(py.find("study tiny " + study_id_of(kToml) + " 4 2") != std::string::npos);
  CHECK(py.find("toml_ok True") != std::string::npos);
  CHECK(py.find("units 6 failed 1") != std::string::npos);
  CHECK(py.find("first " + u0.unit_id + " " + u0.kind + " " + e0) != std::string::npos);
  std::string names;
  for (const auto& n : u1.level_names) names += (names.empty() ? "'" : ", '") + n + "'";
  CHECK(py.find("unit1 " + u1.label + " [" + names + "] (" + std::to_string(u1.trace.size()) + ", 3)") !=
        std::string::npos);
  CHECK(py.find("trace_cols seconds,evaluations,best 3") != std::string::npos);
}

TEST_CASE("results: non-finite metrics survive the journal and the study file") {
  TempDir dir;
  UnitResult r = sample_result(1);
  r.energy_pj = std::numeric_limits<double>::infinity();
  r.edp = std::numeric_limits<double>::quiet_NaN();
  r.level_cycles[0] = -std::numeric_limits<double>::infinity();
  r.trace = {{0.5, 3, std::numeric_limits<double>::infinity()}};
  {
    JournalWriter j(dir / "s.h5.journal", kToml, false);
    j.append(r);
  }
  const auto c = read_journal(dir / "s.h5.journal", study_id_of(kToml));
  REQUIRE(c.results.size() == 1);
  CHECK(to_json(c.results[0]) == to_json(r));
  write_study_h5(dir / "s.h5", sample_meta(), c.results);
  const StudyFile f = read_study_h5(dir / "s.h5");
  REQUIRE(f.results.size() == 1);
  CHECK(std::isinf(f.results[0].energy_pj));
  CHECK(std::isnan(f.results[0].edp));
  CHECK(to_json(f.results[0]) == to_json(r));
}
