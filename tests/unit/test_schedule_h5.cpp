// The schedule file (results/schedule_h5.hpp): a record survives the round trip field for field,
// and foreign or missing files are InputErrors naming the path (a newer schema version:
// tests/cli/schedule_report.sh, with h5py).
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "engine/common/error.hpp"
#include "results/schedule_h5.hpp"

using namespace mapfuse;
namespace fs = std::filesystem;

namespace {

ScheduleRecord two_core_record(const std::string& name) {
  ScheduleRecord r;
  r.name = name;
  r.semantics = "stream";
  r.source = "hand-made";
  r.latency_cc = 165;
  r.energy_pj = 16599;
  r.cores = {{"core0", 1e6, 1280, false}, {"core1", 1e6, 1344, false}, {"dram", 1e12, 960, true}};
  r.links = {{"bus", 128, 0.5}, {"port", 64, 0}};
  r.tiles = {{0, 0, 0, 0, 5, 105}, {1, 0, 1, 1, 115, 165}};
  r.transfers = {{0, 2, 0, 0, "OFF_CHIP", {1, 0}, 0, 5, 640, 128, true, 2.5, 10020},
                 {2, 0, 1, 1, "CORE_TO_CORE", {0}, 105, 115, 1280, 128, false, 5, 60},
                 {3, 1, 2, 1, "BLOCK", {}, 115, 165, 64, 8, true, 0, 0}};
  r.memory = {{0, 0, 640}, {0, 5, 1920}, {1, 80, 320}, {1, 105, 1600}, {2, 0, 960}};
  r.energy_breakdown = {{"total_cn_onchip_energy", 1500}, {"total_core_to_core_link_energy", 5}};
  return r;
}

void check_equal(const ScheduleRecord& a, const ScheduleRecord& b) {
  CHECK(a.name == b.name);
  CHECK(a.semantics == b.semantics);
  CHECK(a.source == b.source);
  CHECK(a.latency_cc == b.latency_cc);
  CHECK(a.energy_pj == b.energy_pj);
  REQUIRE(a.cores.size() == b.cores.size());
  for (size_t i = 0; i < a.cores.size(); ++i) {
    CHECK(a.cores[i].name == b.cores[i].name);
    CHECK(a.cores[i].capacity_bits == b.cores[i].capacity_bits);
    CHECK(a.cores[i].peak_memory_bits == b.cores[i].peak_memory_bits);
    CHECK(a.cores[i].offchip == b.cores[i].offchip);
  }
  REQUIRE(a.links.size() == b.links.size());
  for (size_t i = 0; i < a.links.size(); ++i) {
    CHECK(a.links[i].name == b.links[i].name);
    CHECK(a.links[i].bandwidth_bits_per_cc == b.links[i].bandwidth_bits_per_cc);
    CHECK(a.links[i].energy_pj_per_cc == b.links[i].energy_pj_per_cc);
  }
  REQUIRE(a.tiles.size() == b.tiles.size());
  for (size_t i = 0; i < a.tiles.size(); ++i) {
    const auto &x = a.tiles[i], &y = b.tiles[i];
    CHECK((x.layer == y.layer && x.sub == y.sub && x.core == y.core && x.pick == y.pick && x.start == y.start && x.end == y.end));
  }
  REQUIRE(a.transfers.size() == b.transfers.size());
  for (size_t i = 0; i < a.transfers.size(); ++i) {
    const auto &x = a.transfers[i], &y = b.transfers[i];
    CAPTURE(i);
    CHECK((x.tensor == y.tensor && x.sender == y.sender && x.receiver == y.receiver && x.tile == y.tile));
    CHECK(x.cause == y.cause);
    CHECK(x.links == y.links);
    CHECK((x.start == y.start && x.end == y.end && x.bits == y.bits && x.bandwidth_bits_per_cc == y.bandwidth_bits_per_cc));
    CHECK(x.occupies_links == y.occupies_links);
    CHECK((x.link_energy_pj == y.link_energy_pj && x.memory_energy_pj == y.memory_energy_pj));
  }
  REQUIRE(a.memory.size() == b.memory.size());
  for (size_t i = 0; i < a.memory.size(); ++i)
    CHECK((a.memory[i].core == b.memory[i].core && a.memory[i].t == b.memory[i].t && a.memory[i].bits == b.memory[i].bits));
  CHECK(a.energy_breakdown == b.energy_breakdown);
}

std::string temp_path(const std::string& name) {
  return (fs::temp_directory_path() / ("mapfuse_schedule_h5_" + std::to_string(::getpid()) + "_" + name)).string();
}

}  // namespace

TEST_CASE("schedule_h5: two schedules survive the round trip, read back in name order") {
  const std::string path = temp_path("round.h5");
  const ScheduleRecord b = two_core_record("b_run"), a = two_core_record("a_run");
  ScheduleRecord empty;
  empty.name = "empty";
  write_schedule_h5(path, {b, a, empty});
  CHECK(is_schedule_h5(path));
  const auto back = read_schedule_h5(path);
  REQUIRE(back.size() == 3);
  check_equal(back[0], a);
  check_equal(back[1], b);
  check_equal(back[2], empty);
  fs::remove(path);
}

TEST_CASE("schedule_h5: bad records and bad files") {
  const std::string path = temp_path("bad.h5");
  ScheduleRecord r = two_core_record("x");
  r.transfers[0].links = {2};  // no link 2
  CHECK_THROWS_AS(write_schedule_h5(path, {r}), std::invalid_argument);
  r = two_core_record("x/y");
  CHECK_THROWS_AS(write_schedule_h5(path, {r}), std::invalid_argument);
  CHECK_THROWS_AS(write_schedule_h5(path, {two_core_record("x"), two_core_record("x")}), std::invalid_argument);
  CHECK_FALSE(fs::exists(path));

  { std::ofstream(path) << "not hdf5"; }
  CHECK_FALSE(is_schedule_h5(path));
  CHECK_THROWS_WITH_AS(read_schedule_h5(path), doctest::Contains(path.c_str()), InputError);
  CHECK_THROWS_WITH_AS(read_schedule_h5(path + ".missing"), doctest::Contains("cannot open"), InputError);

  fs::remove(path);
}
