// The cost model against Timeloop's own fixed-mapping reference outputs
// (Accelergy-Project/timeloop-accelergy-exercises @ 800c916, copied to shared/data/ffm/):
// cycles exact, dynamic energy (leakage excluded) within 1 %, and reads / fills / updates /
// utilised capacity of every (level, dataspace) exact. Mapper runs (05, 06, example designs) are
// evaluated with the mapping the mapper printed (*.map.yaml) as a fixed mapping.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "engine/common/csv.hpp"
#include "engine/common/error.hpp"
#include "engine/validation/timeloop_input.hpp"
#include "test_support.hpp"

using namespace mapfuse;

namespace {

std::string tutorial(const std::string& rel) {
  return test::shared_data("ffm/timeloop_exercises/tutorial_exercises/01_accelergy_timeloop_2020_ispass/timeloop/" + rel);
}
std::string design(const std::string& name) {
  return test::shared_data("ffm/timeloop_exercises/example_designs/example_designs/" + name +
                           "/ref_outputs/default_problem");
}

// Checks one run: cycles exact, dynamic energy within 1 %, every count exact. `skip` names
// (level, tensor) pairs to leave out, and `energy` = false the energy bound, for runs that need
// them to be asserted separately.
TimeloopValidation check_run(const std::string& dir, std::set<std::pair<std::string, std::string>> skip = {},
                             bool energy = true) {
  const TimeloopValidation v = validate_timeloop_case(dir);
  INFO(v.name);
  CHECK(v.valid);
  CHECK(v.model_cycles == v.ref_cycles);
  if (energy) CHECK(std::fabs(v.energy_error_pct()) < 1.0);
  CHECK(v.counts.size() > 0);
  for (const auto& c : v.counts) {
    if (skip.count({c.level, c.tensor})) continue;
    INFO(c.level << " " << c.tensor);
    CHECK(c.model_reads == c.ref_reads);
    CHECK(c.model_fills == c.ref_fills);
    CHECK(c.model_updates == c.ref_updates);
    CHECK(c.model_capacity == c.ref_capacity);
  }
  // Level energies: every level within 1 % (or both ~0).
  for (const auto& l : v.levels) {
    if (skip.count({l.level, "*"})) continue;
    INFO(l.level << " ref " << l.ref_pj << " model " << l.model_pj);
    CHECK(std::fabs(l.model_pj - l.ref_pj) <= 0.01 * l.ref_pj + 0.01);
  }
  return v;
}

const TimeloopValidation::Counts* find_counts(const TimeloopValidation& v, const std::string& level,
                                              const std::string& tensor) {
  for (const auto& c : v.counts)
    if (c.level == level && c.tensor == tensor) return &c;
  return nullptr;
}

}  // namespace

TEST_CASE("validation: timeloop 00-model-conv1d-1level") { check_run(tutorial("00-model-conv1d-1level/ref-output")); }
TEST_CASE("validation: timeloop 01-model-conv1d-2level/os") { check_run(tutorial("01-model-conv1d-2level/ref-output/os")); }
TEST_CASE("validation: timeloop 01-model-conv1d-2level/ws") { check_run(tutorial("01-model-conv1d-2level/ref-output/ws")); }
TEST_CASE("validation: timeloop 02-model-conv1d+oc-2level/no-tiling") {
  check_run(tutorial("02-model-conv1d+oc-2level/ref-output/no-tiling"));
}
TEST_CASE("validation: timeloop 02-model-conv1d+oc-2level/tiling") {
  check_run(tutorial("02-model-conv1d+oc-2level/ref-output/tiling"));
}
TEST_CASE("validation: timeloop 03-model-conv1d+oc-3level/bypass") {
  const auto v = check_run(tutorial("03-model-conv1d+oc-3level/ref-output/bypass"));
  // Bypassed dataspaces are absent on both sides.
  CHECK(find_counts(v, "RegisterFile", "Inputs") == nullptr);
}
TEST_CASE("validation: timeloop 03-model-conv1d+oc-3level/no-bypass") {
  check_run(tutorial("03-model-conv1d+oc-3level/ref-output/no-bypass"));
}
TEST_CASE("validation: timeloop 04-model-conv1d+oc-3levelspatial/cp") {
  const auto v = check_run(tutorial("04-model-conv1d+oc-3levelspatial/ref-output/cp"));
  // C is split over 16 global buffers: each holds all 512 outputs as partial sums (16 x 1024
  // updates), and the spatial reduction on the way up leaves one DRAM update per output.
  const auto* gb = find_counts(v, "GlobalBuffer", "Outputs");
  const auto* dram = find_counts(v, "MainMemory", "Outputs");
  REQUIRE(gb != nullptr);
  REQUIRE(dram != nullptr);
  CHECK(gb->model_updates == 16 * 1024);
  CHECK(dram->model_updates == 512);
}
TEST_CASE("validation: timeloop 04-model-conv1d+oc-3levelspatial/kp") {
  check_run(tutorial("04-model-conv1d+oc-3levelspatial/ref-output/kp"));
}
TEST_CASE("validation: timeloop 05-mapper-conv1d+oc-3level/baked") {
  check_run(tutorial("05-mapper-conv1d+oc-3level/ref-output/baked"));
}
TEST_CASE("validation: timeloop 05-mapper-conv1d+oc-3level/freebypass") {
  check_run(tutorial("05-mapper-conv1d+oc-3level/ref-output/freebypass"));
}
TEST_CASE("validation: timeloop 05-mapper-conv1d+oc-3level/null") {
  check_run(tutorial("05-mapper-conv1d+oc-3level/ref-output/null"));
}
TEST_CASE("validation: timeloop simba_like") {
  // 9 storage levels, 3 of them dummy levels carrying the fan-out; PEWeightRegs is clustered
  // (cluster_size 64), which scales its energy by Timeloop's cluster utilisation.
  const auto v = check_run(design("simba_like"));
  CHECK(v.energy_error_pct() == doctest::Approx(0).epsilon(1e-6).scale(1));
}
TEST_CASE("validation: timeloop simple_weight_stationary") { check_run(design("simple_weight_stationary")); }
TEST_CASE("validation: timeloop simple_output_stationary") { check_run(design("simple_output_stationary")); }

// Eyeriss-style arrays put Q on the columns (one dummy level) and S on the rows (the next dummy
// level); both move the input row h = q*Hstride + s. Timeloop counts the multicast groups of each
// spatial level and multiplies them across bypassed levels (14 x 3 = 42 groups), which the model
// follows; counting distinct tile origins over all those loops at once would give 29 (stride 2)
// or 16 (stride 1) and global-buffer input reads 31 % / 62 % low.
TEST_CASE("validation: timeloop 06-mapper-convlayer-eyeriss") {
  const auto v = check_run(tutorial("06-mapper-convlayer-eyeriss/ref-output"));
  const auto* c = find_counts(v, "shared_glb", "Inputs");
  REQUIRE(c != nullptr);
  CHECK(c->model_reads == 12042240);
}
TEST_CASE("validation: timeloop eyeriss_like") {
  const auto v = check_run(design("eyeriss_like"));
  const auto* c = find_counts(v, "shared_glb", "Inputs");
  REQUIRE(c != nullptr);
  CHECK(c->model_reads == 1354752);
}

TEST_CASE("validation: timeloop importer: levels, fan-out, energies, folding") {
  const auto f = locate_timeloop_case(design("simba_like"));
  const TimeloopCase tc = import_timeloop_input(f.input, f.ert, f.map);
  // 9 storage levels; only the dummy level without spatial loops is folded (into PEAccuBuffer).
  REQUIRE(tc.folded_levels == std::vector<std::string>{"inter_reg_mac_spatial"});
  REQUIRE(tc.core.levels.size() == 8);
  CHECK(tc.core.levels[0].name == "PEWeightRegs");
  CHECK(tc.core.levels[1].name == "PEAccuBuffer");
  CHECK(tc.core.levels[1].fanout.x == 1);
  CHECK(tc.core.levels[1].fanout.y == 4);  // mesh 16x4 -> 16x16
  CHECK(tc.core.levels.back().name == "DRAM");
  CHECK(tc.core.levels.back().unbounded());
  CHECK(tc.core.levels.back().block_size == 8);  // width 64 / datawidth 8
  CHECK(tc.core.compute.instances == 256);
  // PEWeightRegs: 512 bits / cluster 64 / 8 bits = 1 word per access; 48 used instances in
  // clusters of 64 over 256 instances: cluster utilisation 48 / 4 = 12.
  CHECK(tc.core.levels[0].block_size == 1);
  CHECK(tc.core.levels[0].read_pj == doctest::Approx(0.259899 / 12));
  const auto e = locate_timeloop_case(design("eyeriss_like"));
  CHECK(import_timeloop_input(e.input, e.ert, e.map).folded_levels.empty());
}

TEST_CASE("validation: timeloop every reference run is found and imports") {
  const auto cases = find_timeloop_cases(test::shared_data("ffm/timeloop_exercises"));
  CHECK(cases.size() == 17);
  for (const auto& d : cases) {
    INFO(d);
    CHECK_NOTHROW(validate_timeloop_case(d));
  }
}

TEST_CASE("validation: timeloop stats reader agrees with the oracle table") {
  // oracles_timeloop_exercises.csv was extracted independently from the same stats files:
  // cycles, computes, and total fJ/compute (which includes leakage).
  const CsvTable t = read_csv(test::shared_data("ffm/oracles_timeloop_exercises.csv"));
  const int c_path = t.column("path"), c_cycles = t.column("cycles"), c_computes = t.column("computes"),
            c_fj = t.column("total_fJ_per_compute");
  int checked = 0;
  for (const auto& row : t.rows) {
    std::string rel = row[c_path];
    const std::string prefix = "workspace/";
    if (rel.rfind(prefix, 0) == 0) rel = rel.substr(prefix.size());
    const std::string path = test::shared_data("ffm/timeloop_exercises/" + rel);
    if (!std::filesystem::exists(path)) continue;  // runs whose inputs were not copied
    INFO(path);
    const TimeloopStats s = read_timeloop_stats(path);
    CHECK(s.cycles == std::stoll(row[c_cycles]));
    CHECK(s.computes == std::stoll(row[c_computes]));
    const double total_pj = std::stod(row[c_fj]) * static_cast<double>(s.computes) / 1000.0;
    CHECK((s.dynamic_energy_pj() + s.leakage_pj()) == doctest::Approx(total_pj).epsilon(1e-4));
    ++checked;
  }
  CHECK(checked == 17);
}

TEST_CASE("validation: timeloop bad input names the file and key") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "mapfuse_tl_bad";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string src = tutorial("03-model-conv1d+oc-3level/ref-output/bypass");
  fs::copy_file(src + "/timeloop-model.ERT.yaml", dir / "timeloop-model.ERT.yaml");
  std::ifstream in(src + "/parsed-processed-input.yaml");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto write_input = [&](const std::string& body) { std::ofstream(dir / "parsed-processed-input.yaml") << body; };
  auto message = [&] {
    try {
      import_timeloop_input((dir / "parsed-processed-input.yaml").string(), (dir / "timeloop-model.ERT.yaml").string());
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  SUBCASE("unknown mapping target") {
    std::string t = text;
    const size_t k = t.find("target: GlobalBuffer");
    REQUIRE(k != std::string::npos);
    t.replace(k, 20, "target: GlobalBufer");
    write_input(t);
    const std::string m = message();
    CHECK(m.find("parsed-processed-input.yaml") != std::string::npos);
    CHECK(m.find("mapping.target") != std::string::npos);
    CHECK(m.find("did you mean 'GlobalBuffer'") != std::string::npos);
  }
  SUBCASE("factors that do not multiply out") {
    std::string t = text;
    const size_t k = t.find("P=16");
    REQUIRE(k != std::string::npos);
    t.replace(k, 4, "P=8");
    write_input(t);
    const std::string m = message();
    CHECK(m.find("mapping") != std::string::npos);
    CHECK(m.find("multiply") != std::string::npos);
  }
  SUBCASE("malformed YAML") {
    write_input("architecture: [unclosed\n");
    CHECK(message().find("malformed YAML") != std::string::npos);
  }
  SUBCASE("missing stats") {
    write_input(text);
    CHECK_THROWS_AS(validate_timeloop_case(dir.string()), InputError);
  }
  fs::remove_all(dir);
}
