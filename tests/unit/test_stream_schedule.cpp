// The schedule pipeline from a workload (engine/search/stream/): tile-cost tables, allocations and
// the COALA problem built from a tile graph, checked against Stream classic's own schedules: its
// ONNX, the tpu_like_quad_core preset, its allocation and its own tile costs (cost_lut.csv through
// the table reader) must give every CN's start and end and the totals of cns.csv / totals.json.
#include <doctest/doctest.h>

#include <filesystem>
#include <functional>
#include <fstream>
#include <map>
#include <set>
#include <tuple>

#include "engine/arch/arch_toml.hpp"
#include "engine/common/csv.hpp"
#include "engine/common/error.hpp"
#include "engine/cost/coala.hpp"
#include "engine/cost/tile_cost_csv.hpp"
#include "engine/search/stream/allocation.hpp"
#include "engine/search/stream/schedule_problem.hpp"
#include "engine/validation/stream_replay.hpp"
#include "engine/workload/onnx_import.hpp"
#include "engine/workload/tile_graph.hpp"
#include "test_support.hpp"

using namespace mapfuse;

namespace {

namespace fs = std::filesystem;

std::string write_temp(const std::string& name, const std::string& text) {
  const fs::path p = fs::temp_directory_path() / ("mapfuse_stream_schedule_" + name);
  std::ofstream(p) << text;
  return p.string();
}

// Stream's allocation (derived/mapping_tpu_like_quad_core_fixed_k4.yaml) as an allocation file:
// Conv, Gemm and the default (ReLU) on cores 0-3 by inter-core group, pools on core 4, adds on 5.
std::string stream_allocation(const Workload& w) {
  std::string s = "[ops]\nmac = [\"tpu_like_0\", \"tpu_like_1\", \"tpu_like_2\", \"tpu_like_3\"]\n"
                  "elementwise = [\"tpu_like_0\", \"tpu_like_1\", \"tpu_like_2\", \"tpu_like_3\"]\n"
                  "pool = \"pooling_4\"\n[layers]\n";
  for (const auto& e : w.einsums) {
    int inputs = 0;
    for (const auto& t : e.tensors) inputs += t.role == TensorRole::Input;
    if (e.op == OpKind::Elementwise && inputs == 2) s += "\"" + e.name + "\" = \"simd_5\"\n";
  }
  return s;
}

struct Rebuilt {
  Workload w;
  Architecture arch;
  TileGraph g;
  std::vector<int> cores;
  std::vector<TileCost> costs;
  coala::Problem problem;
  coala::Schedule schedule;
};

Rebuilt rebuild(const std::string& onnx, const std::string& run, bool fused) {
  Rebuilt r;
  OnnxOptions oo;
  oo.fold_unary = false;  // Stream runs ReLUs as layers
  r.w = import_onnx(test::shared_data(onnx), oo);
  r.arch = load_architecture("tpu_like_quad_core");
  TilingOptions opt;
  opt.layers = stream_tiling(r.w, 4);
  std::vector<int> all(r.w.einsums.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = int(i);
  opt.stacks = fused ? layer_stacks_manual(r.w, {all}) : layer_stacks_lbl(r.w);
  r.g = build_tile_graph(r.w, opt);
  const Allocation a = load_allocation(write_temp("alloc.toml", stream_allocation(r.w)));
  r.cores = allocate_tiles(a, r.w, r.g.tiles, r.arch);
  const CsvTable lut = stream_cost_lut_table(test::shared_data("stream/derived/coala/" + run), r.w, r.arch);
  r.costs = tile_costs_from_table(lut, r.w, r.g.tiles, r.arch, r.cores);
  r.problem = build_schedule_problem(r.w, r.g, r.arch, r.cores, r.costs);
  r.schedule = coala::schedule(r.problem, coala::Options::for_semantics(coala::Semantics::Stream));
  return r;
}

// Our schedule in the replay's tile order (cns.csv rows), through the CNs' layer names.
ReplayComparison compare_with_stream(const Rebuilt& r, const std::string& run) {
  const std::string dir = test::shared_data("stream/derived/coala/" + run);
  const StreamReplay replay = load_stream_replay(dir);
  const CsvTable cns = read_csv(dir + "/cns.csv");
  const int name = cns.column("layer_name"), sub = cns.column("sub_id"), core = cns.column("core");
  coala::Schedule s = r.schedule;
  s.tiles.clear();
  for (size_t i = 0; i < cns.rows.size(); ++i) {
    const int e = r.w.einsum_index(cns.rows[i][size_t(name)]);
    REQUIRE(e >= 0);
    const int t = r.g.tiles.layer_first[size_t(e)] + std::stoi(cns.rows[i][size_t(sub)]);
    CHECK(r.cores[size_t(t)] == std::stoi(cns.rows[i][size_t(core)]));  // Stream's core ids = our node ids
    s.tiles.push_back(r.schedule.tiles[size_t(t)]);
  }
  return compare_replay(replay, s);
}

// Every CN's start and end (to 1e-6 cc), the pick order, latency and energy (relative 1e-9).
ReplayComparison check_matches_stream(const Rebuilt& r, const std::string& run, size_t cns, double latency,
                                      double energy) {
  const ReplayComparison c = compare_with_stream(r, run);
  CHECK(c.cns == cns);
  CHECK(c.cn_mismatches == 0);
  CHECK(c.pick_mismatches == 0);
  CHECK(r.schedule.latency_cc == latency);
  CHECK(r.schedule.energy.total() == doctest::Approx(energy).epsilon(1e-9));
  CHECK(c.ok());
  return c;
}

}  // namespace

TEST_CASE("stream schedule: Stream's 2conv fused run rebuilt from its ONNX, allocation and cost LUT") {
  const Rebuilt r = rebuild("stream/classic_cb9dfc52/testing/workload/2_conv.onnx", "2conv_fused_fixed_k4", true);
  REQUIRE(r.problem.tiles.size() == 448);
  // Hand-checked pieces of the problem: conv1's first CT (row 0, K 0..1 on core 0) fetches its
  // weights (2x8x3x3 x 8 bits = 1152) and then its input window as Stream sizes it, padding
  // included (cns.csv tensor_I_bits: 8 channels x 3 rows x 58 columns x 8 bits = 11136), from DRAM.
  const auto& t0 = r.problem.tiles[0];
  REQUIRE(t0.inputs.size() == 2);
  CHECK(r.problem.tensors[size_t(t0.inputs[0])].bits == 1152);
  CHECK(r.problem.tensors[size_t(t0.inputs[1])].bits == 11136);
  CHECK(r.problem.tensors[size_t(t0.inputs[1])].starts_offchip);
  // The four K-split CTs of a row share one input-row object (Stream's broadcast candidates).
  CHECK(r.problem.tiles[1].inputs[1] == t0.inputs[1]);
  CHECK(r.problem.tiles[3].inputs[1] == t0.inputs[1]);
  CHECK(r.problem.tensors[size_t(t0.inputs[1])].consumers.size() == 4);
  CHECK(t0.bw_fraction == 0.25);
  CHECK(!t0.sink);  // a tiled last layer is no sink in Stream (intra-layer edges)

  const ReplayComparison c = check_matches_stream(r, "2conv_fused_fixed_k4", 448, 61004, 43296172.624);
  CHECK(c.transfer_mismatches == 0);  // every transfer and block row of transfers.csv, in order

  // mapfuse's sink rule: every conv2 CT's output is a network output and is written back: 224
  // write-backs of 896 bits (2 channels x 56 columns x 8 bits), each a read of 112 words from the
  // tpu_like SRAM (1.625625 pJ) and a write of 112 words to DRAM (125 pJ); the last one ends
  // 896 / 32 = 28 cycles after the last CT.
  ScheduleProblemOptions po;
  po.sinks_by_layer_edges = false;
  const coala::Problem p2 = build_schedule_problem(r.w, r.g, r.arch, r.cores, r.costs, po);
  int sinks = 0;
  for (const auto& t : p2.tiles) sinks += t.sink;
  CHECK(sinks == 224);
  const coala::Schedule s2 = coala::schedule(p2, coala::Options::for_semantics(coala::Semantics::Stream));
  CHECK(s2.energy.memory[3] == doctest::Approx(224 * (1.625625 + 125) * 112).epsilon(1e-12));
  CHECK(s2.energy.total() == doctest::Approx(43296172.624 + 224 * (1.625625 + 125) * 112).epsilon(1e-12));
  CHECK(s2.latency_cc == 61004 + 28);
}

TEST_CASE("stream schedule: Stream's ResNet-18 layer-by-layer run rebuilt from its ONNX, allocation and cost LUT") {
  const Rebuilt r = rebuild("stream/classic_cb9dfc52/examples/workload/resnet18.onnx", "resnet18_lbl_fixed_k4", false);
  REQUIRE(r.problem.tiles.size() == 162);
  // Layer by layer, every operand streams from DRAM: no input is fetched, every CT blocks the bus.
  for (const auto& t : r.problem.tiles) {
    CHECK(t.inputs.empty());
    CHECK(t.output_offchip);
  }
  // The sink is the fc layer, one CT per group (no intra-layer edges).
  int sinks = 0;
  for (const auto& t : r.problem.tiles) sinks += t.sink;
  CHECK(sinks == 4);
  const ReplayComparison c = check_matches_stream(r, "resnet18_lbl_fixed_k4", 162, 5563353.5, 4607092175.552);
  // Transfers: Stream's rows include a 0-bandwidth block for the ReLU's 8-bit constant and the
  // pooling's 0-bit one, which mapfuse's Einsums do not have (68 + 2 rows), so the rows are not
  // aligned; per CN, Stream's other block rows are ours: the same (start, end, bandwidth, whether
  // it occupies the bus), as multisets (the order of a CT's blocks differs: Stream's O;I2;I1).
  CHECK(c.expected_transfers == 486);
  CHECK(r.schedule.transfers.size() == 486 - 70);
  const std::string dir = test::shared_data("stream/derived/coala/resnet18_lbl_fixed_k4");
  const CsvTable tr = read_csv(dir + "/transfers.csv"), cns = read_csv(dir + "/cns.csv");
  std::map<std::string, std::string> op_of;
  std::map<std::string, int> tile_of;
  for (const auto& row : cns.rows) {
    const std::string cn = "L" + row[size_t(cns.column("layer_id"))] + "S" + row[size_t(cns.column("sub_id"))];
    op_of[cn] = row[size_t(cns.column("op_type"))];
    tile_of[cn] = r.g.tiles.layer_first[size_t(r.w.einsum_index(row[size_t(cns.column("layer_name"))]))] +
                  std::stoi(row[size_t(cns.column("sub_id"))]);
  }
  using Row = std::tuple<int, double, double, double, bool>;  // tile, start, end, bandwidth, occupies
  std::multiset<Row> want, got;
  for (const auto& row : tr.rows) {
    const std::string cn = row[size_t(tr.column("cn"))];
    REQUIRE(row[size_t(tr.column("kind"))] == "block");
    if (row[size_t(tr.column("layer_operand"))] == "W" && (op_of[cn] == "relu" || op_of[cn] == "pooling")) continue;
    want.insert({tile_of[cn], std::stod(row[size_t(tr.column("start"))]), std::stod(row[size_t(tr.column("end"))]),
                 std::stod(row[size_t(tr.column("link_bw_used"))]), row[size_t(tr.column("new_comm_event"))] == "1"});
  }
  for (const auto& x : r.schedule.transfers) got.insert({x.tile, x.start, x.end, x.bandwidth, x.occupies_links});
  CHECK(want.size() == 416);
  CHECK(want == got);

  // The off-chip operands and their bandwidths survive a written table.
  const std::string path = (fs::temp_directory_path() / "mapfuse_stream_schedule_lbl_costs.csv").string();
  write_tile_costs(path, r.w, r.g.tiles, r.arch, r.cores, r.costs);
  const auto back = read_tile_costs(path, r.w, r.g.tiles, r.arch, r.cores);
  int offchip = 0;
  for (size_t t = 0; t < back.size(); ++t) {
    REQUIRE(back[t].operands.size() == r.costs[t].operands.size());
    for (size_t a = 0; a < back[t].operands.size(); ++a) {
      CHECK(back[t].operands[a].offchip == r.costs[t].operands[a].offchip);
      CHECK(back[t].operands[a].dram_bits_per_cycle == r.costs[t].operands[a].dram_bits_per_cycle);
      offchip += back[t].operands[a].offchip;
    }
  }
  CHECK(offchip == 416);  // every operand of every CT: Stream's 416 blocks that have a mapfuse tensor
}

TEST_CASE("stream schedule: a written tile-cost table reads back, rows match by range, size, '*' and whole rank") {
  const Rebuilt r = rebuild("stream/classic_cb9dfc52/testing/workload/2_conv.onnx", "2conv_fused_fixed_k4", true);
  const std::string path = (fs::temp_directory_path() / "mapfuse_stream_schedule_costs.csv").string();
  write_tile_costs(path, r.w, r.g.tiles, r.arch, r.cores, r.costs);
  const auto back = read_tile_costs(path, r.w, r.g.tiles, r.arch, r.cores);
  REQUIRE(back.size() == r.costs.size());
  for (size_t i = 0; i < back.size(); ++i) {
    CHECK(back[i].latency_cc == r.costs[i].latency_cc);
    CHECK(back[i].onchip_energy_pj == r.costs[i].onchip_energy_pj);
    CHECK(back[i].offchip_energy_pj == r.costs[i].offchip_energy_pj);
  }
  // Hand-written: conv1's CTs by size (P one row, K two channels), conv2's by '*', first match wins.
  const std::string conv1 = r.w.einsums[0].name, conv2 = r.w.einsums[1].name;
  std::string text = "layer,core,P,K,latency_cc,onchip_energy_pj,offchip_energy_pj,offchip\n";
  for (int c = 0; c < 4; ++c) {
    const std::string core = "tpu_like_" + std::to_string(c);
    text += conv1 + "," + core + ",0:1,0:2,7,1,0,\n";  // row 0, K 0..1 (only core 0 runs it)
    text += conv1 + "," + core + ",1,2,5,2,0,O=3;I1=0.5\n"; // any other single row of 2 channels
    text += conv2 + "," + core + ",*,*,11,3,4,\n";
  }
  const auto costs = tile_costs_from_table(parse_csv(text, "hand.csv"), r.w, r.g.tiles, r.arch, r.cores);
  CHECK(costs[0].latency_cc == 7);  // conv1 row 0, K 0..1 on core 0
  CHECK(costs[1].latency_cc == 5);  // row 0, K 2..3: not "0:2", but one row of two channels
  CHECK(costs[4].latency_cc == 5);  // row 1
  CHECK(costs[4].any_offchip());
  const int out = r.w.einsums[0].output_index();
  CHECK(costs[4].operands[size_t(out)].dram_bits_per_cycle == 3);
  CHECK(costs[r.g.tiles.layer_first[1]].latency_cc == 11);
  CHECK(costs[r.g.tiles.layer_first[1]].offchip_energy_pj == 4);
  // The first matching row wins also over the exact rows a written table has (they are hashed).
  std::string general = "layer,core,P,K,latency_cc,onchip_energy_pj,offchip_energy_pj,offchip\n";
  for (int c = 0; c < 4; ++c) general += conv1 + ",tpu_like_" + std::to_string(c) + ",1,*,9,1,0,\n";
  const CsvTable written = read_csv(path);
  // The written rows under P and K only (the other ranks are whole in 2conv).
  const int wp = written.column("P"), wk = written.column("K"), wl = written.column("latency_cc");
  for (const auto& row : written.rows)
    general += row[0] + "," + row[1] + "," + row[size_t(wp)] + "," + row[size_t(wk)] + "," + row[size_t(wl)] + ",1,0,\n";
  const auto first = tile_costs_from_table(parse_csv(general, "general.csv"), r.w, r.g.tiles, r.arch, r.cores);
  for (int t = 0; t < r.g.tiles.layer_first[1]; ++t) CHECK(first[size_t(t)].latency_cc == 9);
  for (size_t t = size_t(r.g.tiles.layer_first[1]); t < first.size(); ++t) CHECK(first[t].latency_cc == r.costs[t].latency_cc);
}

namespace {
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}
bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
}  // namespace

TEST_CASE("stream schedule: bad tables and allocations are InputErrors naming file, line, column and key") {
  OnnxOptions oo;
  oo.fold_unary = false;
  const Workload w = import_onnx(test::shared_data("stream/classic_cb9dfc52/testing/workload/2_conv.onnx"), oo);
  const Architecture arch = load_architecture("tpu_like_quad_core");
  TilingOptions opt;
  opt.layers = stream_tiling(w, 4);
  opt.stacks = layer_stacks_manual(w, {{0, 1}});
  const TileGraph g = build_tile_graph(w, opt);
  const std::string conv1 = w.einsums[0].name, conv2 = w.einsums[1].name;

  // Allocations.
  std::string e = error_of([&] { load_allocation(write_temp("a1.toml", "[ops]\nmacc = \"tpu_like_0\"\n")); });
  CHECK(has(e, "a1.toml:2"));
  CHECK(has(e, "did you mean 'mac'"));
  auto alloc = [&](const std::string& name, const std::string& text) {
    return allocate_tiles(load_allocation(write_temp(name, text)), w, g.tiles, arch);
  };
  e = error_of([&] { alloc("a2.toml", "[ops]\nmac = [\"tpu_like_0\", \"tpu_like_1\", \"tpu_like_2\", \"tpu_like_33\"]\n"); });
  CHECK(has(e, "a2.toml:2"));
  CHECK(has(e, "ops.mac"));
  CHECK(has(e, "unknown core 'tpu_like_33'"));
  CHECK(has(e, "did you mean 'tpu_like_3'"));
  e = error_of([&] { alloc("a3.toml", "[ops]\nmac = \"pooling_4\"\n"); });
  CHECK(has(e, "core 'pooling_4' cannot run layer"));
  e = error_of([&] { alloc("a4.toml", "[ops]\nmac = [\"tpu_like_0\", \"tpu_like_1\"]\n"); });
  CHECK(has(e, "2 cores for layer"));
  e = error_of([&] { alloc("a5.toml", "[layers]\nconv9 = \"tpu_like_0\"\n[ops]\ndefault = \"tpu_like_0\"\n"); });
  CHECK(has(e, "a5.toml:2"));
  CHECK(has(e, "layers.conv9"));
  e = error_of([&] { alloc("a6.toml", "[layers]\n\"" + conv1 + "\" = \"tpu_like_0\"\n"); });
  CHECK(has(e, "has no core"));
  // A single core takes every group; a layer entry beats the op kind.
  const auto cores = alloc("a7.toml", "[layers]\n\"" + conv2 + "\" = \"tpu_like_2\"\n[ops]\nmac = [\"tpu_like_0\", "
                                      "\"tpu_like_1\", \"tpu_like_2\", \"tpu_like_3\"]\n");
  CHECK(cores[1] == 1);
  CHECK(cores[size_t(g.tiles.layer_first[1]) + 1] == 2);
  // Greedy: round-robin over the capable cores in node order (tpu_like_0..3 run everything).
  const auto greedy = allocate_greedy(w, g.tiles, arch);
  for (size_t t = 0; t < greedy.size(); ++t) CHECK(greedy[t] == g.tiles.tiles[t].group % 4);

  // Tables.
  const std::string head = "layer,core,P,K,latency_cc,onchip_energy_pj,offchip_energy_pj,offchip\n";
  auto costs = [&](const std::string& text) { return tile_costs_from_table(parse_csv(text, "t.csv"), w, g.tiles, arch, greedy); };
  e = error_of([&] { costs(head + conv1 + ",tpu_like_0,*,*,fast,1,0,\n"); });
  CHECK(has(e, "t.csv:2:5"));
  CHECK(has(e, "latency_cc"));
  e = error_of([&] { costs(head + conv1 + ",tpu_like_0,1:1,*,1,1,0,\n"); });
  CHECK(has(e, "t.csv:2:3"));
  e = error_of([&] { costs(head + conv1 + ",tpu_like_9,*,*,1,1,0,\n"); });
  CHECK(has(e, "t.csv:2:2"));
  CHECK(has(e, "did you mean"));
  e = error_of([&] { costs(head + conv1 + ",tpu_like_0,*,*,1,1,0,Q=1\n"); });
  CHECK(has(e, "t.csv:2:8"));
  CHECK(has(e, "unknown operand 'Q'"));
  e = error_of([&] { costs("layer,core,PP,latency_cc,onchip_energy_pj,offchip_energy_pj\n"); });
  CHECK(has(e, "t.csv:1:3"));
  CHECK(has(e, "did you mean 'P'"));
  // Every CT of conv1 on core 0 is covered, nothing else: the first CT without a row is named.
  e = error_of([&] { costs(head + conv1 + ",tpu_like_0,*,*,1,1,0,\n"); });
  CHECK(has(e, "no row for CT 1 of layer '" + conv1 + "' (sub 1"));
  CHECK(has(e, "on core 'tpu_like_1'"));
}
