// COALA (engine/cost/coala.hpp): hand-computed schedules (two CTs over one link, a forced eviction
// and its write-back, contention, a multi-hop path) and the replays of Stream's own schedules.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include <map>

#include "engine/common/csv.hpp"
#include "engine/common/error.hpp"
#include "engine/cost/coala.hpp"
#include "engine/cost/coala_links.hpp"
#include "engine/cost/coala_memory.hpp"
#include "engine/validation/stream_replay.hpp"
#include "test_support.hpp"

using namespace mapfuse;
using namespace mapfuse::coala;

namespace {

// Compute cores (read 1 pJ, write 2 pJ per 64-bit access) plus a DRAM core (1000 pJ per access) last.
Problem machine(int compute_cores, double capacity_bits) {
  Problem p;
  for (int i = 0; i < compute_cores; ++i) p.cores.push_back({"core" + std::to_string(i), capacity_bits, 1, 2, 64, 64, false});
  p.cores.push_back({"dram", 1e12, 1000, 1000, 64, 64, true});
  return p;
}

// Every ordered pair of distinct cores over the one link 0.
void one_bus(Problem& p, double bw, double energy_per_cc) {
  p.links = {{"bus", bw, energy_per_cc}};
  const size_t n = p.cores.size();
  p.paths.assign(n * n, {});
  for (size_t a = 0; a < n; ++a)
    for (size_t b = 0; b < n; ++b)
      if (a != b) p.paths[a * n + b] = {0};
}

int tensor(Problem& p, double bits, int owner, bool output, bool constant, std::vector<int> consumers) {
  p.tensors.push_back({bits, owner, output, constant, std::move(consumers)});
  return int(p.tensors.size()) - 1;
}

TileSpec tile(int layer, int core, int64_t priority, double runtime, int output, std::vector<int> inputs) {
  return TileSpec{.layer = layer, .core = core, .priority = priority, .runtime_cc = runtime, .output = output,
                  .inputs = std::move(inputs)};
}

const Transfer& find_transfer(const Schedule& s, int tensor, int receiver) {
  for (const auto& t : s.transfers)
    if (t.tensor == tensor && t.receiver == receiver) return t;
  FAIL("no transfer of tensor " << tensor << " to core " << receiver);
  return s.transfers.front();
}

// One core of 1000 bits: A and B each produce 600 bits, which C and D (8-bit outputs) consume in
// turn, so B's output forces A's out to DRAM and C's fetch forces B's out. Tensors 0-3: OA, OB, OC, OD.
Problem eviction_case() {
  Problem p = machine(1, 1000);
  one_bus(p, 128, 0);
  const int oa = tensor(p, 600, 0, true, false, {2});
  const int ob = tensor(p, 600, 1, true, false, {3});
  const int oc = tensor(p, 8, 2, true, false, {});
  const int od = tensor(p, 8, 3, true, false, {});
  p.tiles = {tile(0, 0, 0, 100, oa, {}), tile(1, 0, 1, 100, ob, {}), tile(2, 0, 2, 10, oc, {oa}),
             tile(3, 0, 3, 10, od, {ob})};
  p.edges = {{0, 2}, {1, 3}};
  return p;
}

}  // namespace

TEST_CASE("coala: two CTs on two cores over one link, exact start/end/energy") {
  Problem p = machine(2, 1e6);
  one_bus(p, 128, 0.5);
  const int w0 = tensor(p, 640, 0, false, true, {0});
  const int w1 = tensor(p, 320, 1, false, true, {1});
  const int oa = tensor(p, 1280, 0, true, false, {1});
  const int ob = tensor(p, 64, 1, true, false, {});
  p.tiles = {tile(0, 0, 0, 100, oa, {w0}), tile(1, 1, 1, 50, ob, {w1, oa})};
  p.tiles[0].onchip_energy_pj = 1000;
  p.tiles[1].onchip_energy_pj = 500;
  p.edges = {{0, 1}};
  const Schedule s = schedule(p, Options::for_semantics(Semantics::Stream));
  // A: W0 from DRAM over [0,5) (640 b at 128 b/cc); runs [5,105).
  CHECK(s.tiles[0].start == 5);
  CHECK(s.tiles[0].end == 105);
  const Transfer& t0 = find_transfer(s, w0, 0);
  CHECK(t0.start == 0);
  CHECK(t0.end == 5);
  CHECK(t0.cause == TransferCause::OffChip);
  CHECK(t0.memory_energy_pj == doctest::Approx(1000 * 10 + 2 * 10));
  CHECK(t0.link_energy_pj == doctest::Approx(2.5));
  // B: synchronised to 105, head start 5 + 20 -> W1 searched from 80; OA core-to-core [105,115).
  const Transfer& t1 = find_transfer(s, w1, 1);
  CHECK(t1.start == 80);
  CHECK(t1.end == 83);
  const Transfer& t2 = find_transfer(s, oa, 1);
  CHECK(t2.sender == 0);
  CHECK(t2.cause == TransferCause::CoreToCore);
  CHECK(t2.start == 105);
  CHECK(t2.end == 115);
  CHECK(t2.memory_energy_pj == doctest::Approx(1 * 20 + 2 * 20));
  CHECK(s.tiles[1].start == 115);
  CHECK(s.tiles[1].end == 165);
  CHECK(s.latency_cc == 165);
  CHECK(s.energy.cn_onchip == 1500);
  CHECK(s.energy.memory[int(TransferCause::OffChip)] == doctest::Approx(10020 + 5010));
  CHECK(s.energy.link[int(TransferCause::OffChip)] == doctest::Approx(4));
  CHECK(s.energy.memory[int(TransferCause::CoreToCore)] == doctest::Approx(60));
  CHECK(s.energy.link[int(TransferCause::CoreToCore)] == doctest::Approx(5));
  CHECK(s.energy.total() == doctest::Approx(16599));
}

TEST_CASE("coala: a forced eviction is written back to DRAM and fetched again") {
  const Schedule s = schedule(eviction_case(), Options::for_semantics(Semantics::Stream));
  const int oa = 0, ob = 1;
  // B's output needs 600 of 1000 bits while OA holds 600: OA is evicted, written back over [100,105).
  std::vector<const Transfer*> evictions;
  for (const auto& t : s.transfers)
    if (t.cause == TransferCause::Eviction) evictions.push_back(&t);
  REQUIRE(evictions.size() == 2);
  CHECK(evictions[0]->tensor == oa);
  CHECK(evictions[0]->start == 100);
  CHECK(evictions[0]->end == 105);
  CHECK(s.tiles[1].start == 105);
  CHECK(s.tiles[1].end == 205);
  // C fetches OA back; OB (still needed by D) makes room: written back over [205,210).
  CHECK(evictions[1]->tensor == ob);
  CHECK(evictions[1]->start == 205);
  CHECK(evictions[1]->end == 210);
  const Transfer& back = find_transfer(s, oa, 0);
  CHECK(back.sender == 1);
  CHECK(back.start == 210);
  CHECK(back.end == 215);
  CHECK(s.tiles[2].start == 215);
  CHECK(s.tiles[2].end == 225);
  // D waits until OA is freed at 225 (C's end), then fetches OB over [225,230).
  const Transfer& ob_back = find_transfer(s, ob, 0);
  CHECK(ob_back.start == 225);
  CHECK(s.tiles[3].start == 230);
  CHECK(s.latency_cc == 240);
  CHECK(s.energy.memory[int(TransferCause::Eviction)] == doctest::Approx(2 * (1 * 10 + 1000 * 10)));
  CHECK(s.energy.memory[int(TransferCause::OffChip)] == doctest::Approx(2 * (1000 * 10 + 2 * 10)));
  CHECK(s.peak_memory_bits[0] == 600 + 8 + 8);  // OB, OC and OD from 230 on
}

TEST_CASE("coala: the memory trace of the forced eviction, step by step") {
  // The eviction case above, hand-traced: OA [0,225) is written back at 100 (freed from the core
  // at 105, when OB arrives: no step), OB [105,240) is written back at 205 and freed at 210, when
  // OA comes back (no step); OC from 215, OD from 230; OA leaves at C's end 225 as OB arrives
  // (no step); OB leaves at D's end 240.
  const Schedule s = schedule(eviction_case(), Options::for_semantics(Semantics::Stream));
  REQUIRE(s.memory_trace.size() == 2);
  CHECK(s.memory_trace[0] == std::vector<MemoryStep>{{0, 600}, {215, 608}, {230, 616}, {240, 16}});
  // DRAM: the write-back copies, from their transfer starts until their consumers end.
  CHECK(s.memory_trace[1] == std::vector<MemoryStep>{{0, 0}, {100, 600}, {205, 1200}, {225, 600}, {240, 0}});
}

TEST_CASE("coala: a too-large CT writes the core's tensors back, then blocks the bus for its runtime") {
  Problem p = machine(1, 1e6);
  one_bus(p, 128, 0);
  const int wa = tensor(p, 640, 0, false, true, {0});
  const int oa = tensor(p, 1280, 0, true, false, {1});
  const int ob = tensor(p, 64, 1, true, false, {});
  const int ib = tensor(p, 1280, 1, false, false, {});  // B's own input window, streamed from DRAM
  p.tiles = {tile(0, 0, 0, 100, oa, {wa}), tile(1, 0, 1, 200, ob, {})};
  p.tiles[1].blocks = {{ob, 32, true}, {ib, 64, false}};
  p.tiles[1].output_offchip = true;
  p.tiles[1].offchip_energy_pj = 777;
  p.edges = {{0, 1}};
  const Schedule s = schedule(p, Options::for_semantics(Semantics::Stream));
  CHECK(s.tiles[0].start == 5);
  CHECK(s.tiles[0].end == 105);
  // OA (not in DRAM) is written back from when it exists: [105,115) at 128 b/cc.
  const Transfer& wb = find_transfer(s, oa, 1);
  CHECK(wb.cause == TransferCause::Eviction);
  CHECK(wb.start == 105);
  CHECK(wb.end == 115);
  CHECK(s.tiles[1].start == 115);
  CHECK(s.tiles[1].end == 315);
  int blocks = 0;
  for (const auto& t : s.transfers)
    if (t.cause == TransferCause::Block) {
      ++blocks;
      CHECK(t.start == 115);
      CHECK(t.end == 315);
      CHECK(t.occupies_links);
    }
  CHECK(blocks == 2);
  CHECK(s.latency_cc == 315);
  CHECK(s.energy.memory[int(TransferCause::Eviction)] == doctest::Approx(1 * 20 + 1000 * 20));
  CHECK(s.energy.stream_breakdown()[2].second == doctest::Approx(1000 * 10 + 2 * 10 + 777));
}

TEST_CASE("coala: two transfers contending for one link") {
  for (const double fraction : {0.5, 1.0}) {
    Problem p = machine(2, 1e6);
    one_bus(p, 128, 0);
    const int w0 = tensor(p, 640, 0, false, true, {0});
    const int w1 = tensor(p, 640, 1, false, true, {1});
    const int o0 = tensor(p, 8, 0, true, false, {});
    const int o1 = tensor(p, 8, 1, true, false, {});
    p.tiles = {tile(0, 0, 0, 10, o0, {w0}), tile(0, 1, 1, 10, o1, {w1})};
    p.tiles[1].sub = 1;
    for (auto& t : p.tiles) t.bw_fraction = fraction;
    const Schedule s = schedule(p, Options::for_semantics(Semantics::Stream));
    const Transfer& a = find_transfer(s, w0, 0);
    const Transfer& b = find_transfer(s, w1, 1);
    CAPTURE(fraction);
    if (fraction == 0.5) {  // 64 + 64 b/cc fit side by side: both over [0,10)
      CHECK(a.start == 0);
      CHECK(b.start == 0);
      CHECK(b.end == 10);
      CHECK(s.tiles[1].start == 10);
    } else {  // 128 b/cc each: the second waits for the first
      CHECK(a.end == 5);
      CHECK(b.start == 5);
      CHECK(b.end == 10);
      CHECK(s.tiles[1].start == 10);
    }
  }
}

TEST_CASE("coala: a multi-hop path occupies every link, at its slowest link's rate") {
  Problem p = machine(3, 1e6);  // cores 0,1,2 and DRAM 3
  p.links = {{"l01", 64, 1}, {"l12", 32, 2}, {"dram", 1000, 0}};
  const size_t n = p.cores.size();
  p.paths.assign(n * n, {2});
  for (size_t i = 0; i < n; ++i) p.paths[i * n + i] = {};
  p.paths[0 * n + 2] = {0, 1};
  p.paths[1 * n + 2] = {1};
  const int oa = tensor(p, 320, 0, true, false, {2});
  const int ob = tensor(p, 64, 1, true, false, {2});
  const int oc = tensor(p, 8, 2, true, false, {});
  p.tiles = {tile(0, 0, 0, 10, oa, {}), tile(1, 1, 1, 10, ob, {}), tile(2, 2, 2, 5, oc, {oa, ob})};
  p.edges = {{0, 2}, {1, 2}};
  Options o = Options::for_semantics(Semantics::Stream);
  o.sync_cores_at_layer_start = false;
  const Schedule s = schedule(p, o);
  const Transfer& a = find_transfer(s, oa, 2);
  CHECK(a.start == 10);
  CHECK(a.end == 20);  // 320 b at min(64, 32) b/cc
  CHECK(a.link_energy_pj == doctest::Approx(10 * 1 + 10 * 2));
  const Transfer& b = find_transfer(s, ob, 2);
  CHECK(b.start == 20);  // l12 is full until the two-hop transfer ends
  CHECK(b.end == 22);
  CHECK(s.tiles[2].start == 22);
  CHECK(s.latency_cc == 27);
}

TEST_CASE("coala: link calendar and memory timeline") {
  LinkCalendar l(128);
  l.reserve(10, 20, 100);
  CHECK(l.earliest(0, 10, 28) == 0);
  CHECK(l.earliest(0, 11, 29) == 20);  // does not fit before 10, and 100 + 29 > 128 in [10,20)
  CHECK(l.earliest(5, 5, 28) == 5);
  CHECK(l.earliest(12, 3, 28) == 12);
  CHECK(l.earliest(12, 0, 128) == 12);  // zero-length requests fit anywhere
  MemoryTimeline m;
  m.add(0, 600);
  m.add(50, 300);
  m.add(80, -600);
  CHECK(m.usage_at(60) == 900);
  CHECK(m.usage_at(90) == 300);
  CHECK(m.earliest_fit(10, 200, 1000) == 80);
  CHECK(m.earliest_fit(10, 100, 1000) == 10);
  CHECK(m.peak() == 900);
}

TEST_CASE("coala: bad problems are InputErrors") {
  Problem p = machine(1, 1e6);
  one_bus(p, 128, 0);
  const int o = tensor(p, 8, 0, true, false, {});
  p.tiles = {tile(0, 5, 0, 10, o, {})};
  CHECK_THROWS_AS(schedule(p, Options{}), InputError);
  p.tiles = {tile(0, 0, 0, 10, o, {}), tile(0, 0, 1, 10, o, {})};
  p.edges = {{0, 1}, {1, 0}};
  CHECK_THROWS_AS(schedule(p, Options{}), InputError);
}

namespace {
// `peaks`: per core, the peak top-memory use rebuilt from the run's memory_events.csv (adds and
// removes at their timesteps).
void check_replay(const std::string& run, size_t cns, double latency, double energy, std::vector<double> peaks) {
  const StreamReplay r = load_stream_replay(test::shared_data("stream/derived/coala/" + run));
  const Schedule s = schedule(r.problem, Options::for_semantics(Semantics::Stream));
  const ReplayComparison c = compare_replay(r, s);
  CHECK(c.cns == cns);
  CHECK(c.cn_mismatches == 0);
  CHECK(c.pick_mismatches == 0);
  CHECK(c.transfer_mismatches == 0);
  CHECK(s.latency_cc == latency);
  CHECK(s.energy.total() == doctest::Approx(energy).epsilon(1e-9));
  CHECK(c.ok());
  CHECK(s.peak_memory_bits == peaks);
}
}  // namespace

TEST_CASE("coala: Stream's 2conv fused schedule to the cycle") {
  check_replay("2conv_fused_fixed_k4", 448, 61004, 43296172.624, {685056, 685056, 685056, 685056, 0, 0, 632832});
  // The broadcast rule matters: multicast (any earlier window of the tensor) gives another schedule.
  const StreamReplay r = load_stream_replay(test::shared_data("stream/derived/coala/2conv_fused_fixed_k4"));
  Options o = Options::for_semantics(Semantics::Stream);
  o.dedup_only_equal_start = false;
  CHECK(compare_replay(r, schedule(r.problem, o)).cn_mismatches > 0);
}

TEST_CASE("coala: Stream's ResNet-18 layer-by-layer schedule to the cycle") {
  check_replay("resnet18_lbl_fixed_k4", 162, 5563353.5, 4607092175.552, {0, 0, 0, 0, 0, 0, 141007392});
}

TEST_CASE("coala: a malformed replay folder names file, line and column") {
  namespace fs = std::filesystem;
  const fs::path src = test::shared_data("stream/derived/coala/2conv_fused_fixed_k4");
  const fs::path dir = fs::temp_directory_path() / "mapfuse_coala_bad_replay";
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const auto& e : fs::directory_iterator(src)) fs::copy_file(e.path(), dir / e.path().filename());
  {
    std::ifstream in(dir / "cns.csv");
    std::string header, row, rest, line;
    std::getline(in, header);
    std::getline(in, row);
    while (std::getline(in, line)) rest += line + "\n";
    row.replace(row.find(",514,"), 5, ",fast,");  // the runtime of the first CN
    in.close();
    fs::permissions(dir / "cns.csv", fs::perms::owner_write, fs::perm_options::add);
    std::ofstream out(dir / "cns.csv", std::ios::trunc);
    out << header << "\n" << row << "\n" << rest;
  }
  try {
    load_stream_replay(dir.string());
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("cns.csv:2:") != std::string::npos);
    CHECK(e.key() == "runtime");
  }
  fs::remove_all(dir);
}

namespace {
// Stream's occupancy per core from memory_events.csv: every `add` from its timestep on, every
// `remove` from its timestep on (the `_noop` rows change nothing), as steps with equal neighbours
// merged. Core ids of the file are the replay's core indices (checked by the caller).
std::map<int, std::vector<MemoryStep>> stream_memory_trace(const std::string& folder) {
  const CsvTable t = read_csv(folder + "/memory_events.csv");
  const int action = t.column("action"), core = t.column("core"), bits = t.column("size_bits"), at = t.column("timestep");
  std::map<int, std::map<double, double>> delta;
  for (const auto& r : t.rows) {
    const double sign = r[size_t(action)] == "add" ? 1 : r[size_t(action)] == "remove" ? -1 : 0;
    if (sign != 0) delta[std::stoi(r[size_t(core)])][std::stod(r[size_t(at)])] += sign * std::stod(r[size_t(bits)]);
  }
  std::map<int, std::vector<MemoryStep>> out;
  for (const auto& [c, d] : delta) {
    auto& steps = out[c];
    steps.push_back({0, 0});
    double usage = 0;
    for (const auto& [time, change] : d) {
      usage += change;
      if (time == 0) steps.back().bits = usage;
      else if (usage != steps.back().bits) steps.push_back({time, usage});
    }
  }
  return out;
}
}  // namespace

TEST_CASE("coala: Stream's memory trace of the 2conv replay, step for step") {
  const std::string folder = test::shared_data("stream/derived/coala/2conv_fused_fixed_k4");
  const StreamReplay r = load_stream_replay(folder);
  REQUIRE(r.problem.cores.size() == 7);
  REQUIRE(r.problem.cores[6].offchip);
  const Schedule s = schedule(r.problem, Options::for_semantics(Semantics::Stream));
  REQUIRE(s.memory_trace.size() == 7);
  for (size_t c = 0; c < 7; ++c) {
    double top = 0;
    for (size_t i = 0; i < s.memory_trace[c].size(); ++i) {
      top = std::max(top, s.memory_trace[c][i].bits);
      if (i > 0) CHECK(s.memory_trace[c][i].t > s.memory_trace[c][i - 1].t);
    }
    CHECK(top == s.peak_memory_bits[c]);
  }
  // Cores 0-3 hold thousands of steps each; unused cores 4 and 5 stay empty.
  const auto stream = stream_memory_trace(folder);
  for (int c : {0, 1, 2, 3, 6}) {
    CAPTURE(c);
    REQUIRE(stream.count(c) == 1);
    if (c < 4) CHECK(s.memory_trace[size_t(c)].size() > 100);
    CHECK(s.memory_trace[size_t(c)] == stream.at(c));
  }
  CHECK(s.memory_trace[4] == std::vector<MemoryStep>{{0, 0}});
  CHECK(s.memory_trace[5] == std::vector<MemoryStep>{{0, 0}});
}
