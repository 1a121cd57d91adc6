// Per-tile costs from mapfuse's own mapper (engine/search/stream/tile_costs.hpp, docs/stream.md "Per-tile cost").
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "engine/arch/arch_toml.hpp"
#include "engine/common/error.hpp"
#include "engine/search/stream/schedule_problem.hpp"
#include "engine/search/stream/tile_costs.hpp"
#include "engine/workload/tile_graph.hpp"
#include "engine/cost/coala.hpp"
#include "engine/search/exhaustive.hpp"
#include "tile_workloads.hpp"

using namespace mapfuse;

namespace {

using test::conv;
using test::finalized;
using test::source;

// src (8 channels, 8x8) -> conv1 -> conv2 (3x3, pad 1, 8 -> 8 channels): identical convs.
Workload two_conv_chain() {
  return finalized({source("x", "a", 8, 8, 8), conv("conv1", "a", 8, 8, 8, 8, 3, 1, 1),
                    conv("conv2", "conv1", 8, 8, 8, 8, 3, 1, 1)});
}

// Every layer cut into rows (one CT per output row), all in one fused stack.
TileSet rows(const Workload& w) {
  TilingOptions o;
  o.layers.resize(w.einsums.size());
  std::vector<int> all;
  for (size_t i = 0; i < w.einsums.size(); ++i) {
    const int r = row_rank(w.einsums[i]);
    o.layers[i].intra = {{w.einsums[i].ranks[static_cast<size_t>(r)].name, 0, 1}};
    all.push_back(static_cast<int>(i));
  }
  o.stacks = layer_stacks_manual(w, {all});
  return generate_tiles(w, o);
}

}  // namespace

TEST_CASE("tile cost: a CT's cost is the exhaustive mapper's on the CT-sized Einsum") {
  const Architecture a = load_architecture("tpu_like_quad_core");
  const Workload w = finalized({source("x", "a", 8, 6, 6), conv("conv", "a", 8, 32, 6, 6, 3, 1, 1)});
  const TileSet ts = rows(w);
  REQUIRE(ts.tiles.size() == 12);
  const std::vector<int> core(ts.tiles.size(), 2);
  const int tile = ts.layer_first[1] + 2;  // conv row 2: an interior row

  // By hand: the conv with one output row; tpu_like's levels are rf_128B, rf_2B, sram_2MB, DRAM.
  // Everything fits the 2 MiB SRAM: it keeps the whole CT (no loop above it) and backs all three.
  const Einsum e = conv("conv", "a", 8, 32, 1, 6, 3, 1, 1);
  const Core& c = a.cores[2];
  REQUIRE(c.levels.size() == 4);
  REQUIRE(c.levels[2].name == "sram_2MB");
  Mapspace space;
  space.levels.resize(4);
  space.levels[2].keep = 0b111;
  space.levels[3].max_factor.assign(e.ranks.size(), int64_t{1});
  ExhaustiveOptions xo;
  xo.onchip_backing = 0b111;

  SUBCASE("Stream's criterion: fewest cycles, then least energy") {
    xo.front = true;
    const MapperResult r = exhaustive_search(e, c, space, xo);
    REQUIRE(!r.pareto.empty());
    const ParetoMapping& fastest = r.pareto.back();  // the front is by energy: cycles descend
    TileCostStats st;
    const auto costs = map_tile_costs(w, ts, a, core, {}, &st);
    const TileCost& tc = costs[static_cast<size_t>(tile)];
    CHECK(tc.latency_cc == fastest.cycles);
    CHECK(tc.onchip_energy_pj == fastest.energy_pj);
    CHECK(tc.offchip_energy_pj == 0);
    CHECK(!tc.any_offchip());
    // 6 x 8 x 32 x 9 MACs on 32 x 32 PEs: at least 14 cycles.
    CHECK(tc.latency_cc >= 13824.0 / 1024);
    // Footprints: the input box is 3 rows x 6 columns (clipped from 8) x 8 channels of 8 bits.
    REQUIRE(tc.operands.size() == 3);
    CHECK(tc.operands[0].memory_bits == 32 * 8 * 9 * 8);  // weights K x C x R x S
    CHECK(tc.operands[1].memory_bits == 8 * 3 * 6 * 8);
    CHECK(tc.operands[2].memory_bits == 32 * 6 * 8);
    CHECK(st.tiles == 12);
    // Keys: the source's rows, the conv's edge rows (input box clipped to 2 rows) and interior
    // rows; the conv's two differ only in their boxes: one mapping problem, mapped once (the
    // fewest cycles, then the least energy at those cycles, in one search).
    CHECK(st.unique_keys == 3);
    CHECK(st.mapper_problems == 2);
    CHECK(st.mapper_calls == 2);
    CHECK(costs[static_cast<size_t>(ts.layer_first[1])].operands[1].memory_bits == 8 * 2 * 6 * 8);
  }
  SUBCASE("a scalar objective") {
    xo.front = false;
    xo.objective = Objective::Edp;
    const MapperResult r = exhaustive_search(e, c, space, xo);
    REQUIRE(r.best);
    TileCostOptions o;
    o.objective = Objective::Edp;
    o.energy_tiebreak = false;
    const TileCost tc = map_tile_costs(w, ts, a, core, o)[static_cast<size_t>(tile)];
    CHECK(tc.latency_cc == r.cost.cycles);
    CHECK(tc.onchip_energy_pj == r.cost.energy_pj);
    // Backed on chip, nothing reaches DRAM.
    CHECK(r.cost.level_energy_pj[3] == 0);
  }
}

TEST_CASE("tile cost: Table 3 cores keep weights in W_mem and activations in Act_mem") {
  const Architecture a = load_architecture("stream_t3_4c_1ws");  // its cores run MACs only
  const Workload w = finalized({conv("conv0", "x", 4, 4, 4, 4, 3, 1, 1), conv("conv", "conv0", 4, 8, 4, 4, 3, 1, 1)});
  const TileSet ts = rows(w);
  REQUIRE(ts.tiles.size() == 8);
  const int tile = ts.layer_first[1] + 2;
  const Einsum e = conv("conv", "a", 4, 8, 1, 4, 3, 1, 1);
  for (int ci : {0, 1}) {  // the WS core, an OS core
    CAPTURE(ci);
    const Core& c = a.cores[static_cast<size_t>(ci)];
    const int L = static_cast<int>(c.levels.size());
    const int wm = c.level_index("W_mem"), am = c.level_index("Act_mem");
    REQUIRE(wm == L - 2);
    REQUIRE(am == L - 3);
    // By hand: weights (tensor 0) whole in W_mem, inputs and outputs (1, 2) whole in Act_mem; no
    // loop above Act_mem over a rank the activations use (all of them), none at DRAM at all.
    Mapspace space;
    space.levels.resize(static_cast<size_t>(L));
    space.levels[static_cast<size_t>(wm)].keep = 0b001;
    space.levels[static_cast<size_t>(am)].keep = 0b110;
    for (int l : {wm, L - 1}) space.levels[static_cast<size_t>(l)].max_factor.assign(e.ranks.size(), int64_t{1});
    ExhaustiveOptions xo;
    xo.onchip_backing = 0b111;
    const MapperResult r = exhaustive_search(e, c, space, xo);
    REQUIRE(!r.pareto.empty());
    const std::vector<int> core(ts.tiles.size(), ci);
    const TileCost tc = map_tile_costs(w, ts, a, core, {})[static_cast<size_t>(tile)];
    CHECK(!tc.any_offchip());
    CHECK(tc.latency_cc == r.pareto.back().cycles);
    CHECK(tc.onchip_energy_pj == r.pareto.back().energy_pj);
  }
}

TEST_CASE("tile cost: each unique (CT shape, core) is mapped once; identical layers share") {
  const Architecture a = load_architecture("tpu_like_quad_core");
  const Workload w = two_conv_chain();
  const TileSet ts = rows(w);
  REQUIRE(ts.tiles.size() == 24);  // 8 rows per layer
  const int c1 = ts.layer_first[1], c2 = ts.layer_first[2];

  // On one core: the source's rows are all alike (1 key); each conv has edge rows (input box of
  // 2 rows: the halo clipped) and interior rows (3): 2 keys, and conv2 is conv1 again.
  std::vector<int> core(ts.tiles.size(), 0);
  TileCostStats st;
  auto costs = map_tile_costs(w, ts, a, core, {}, &st);
  CHECK(st.tiles == 24);
  CHECK(st.unique_keys == 3);
  CHECK(st.mapper_problems == 2);
  CHECK(st.mapper_calls == 2);
  CHECK(st.mappings_evaluated > 0);
  CHECK(costs[c1].operands[1].memory_bits == 8 * 2 * 8 * 8);
  CHECK(costs[c1 + 1].operands[1].memory_bits == 8 * 3 * 8 * 8);
  CHECK(costs[c1 + 7].operands[1].memory_bits == 8 * 2 * 8 * 8);
  for (int r = 0; r < 8; ++r) {
    CHECK(costs[c2 + r].latency_cc == costs[c1 + r].latency_cc);
    CHECK(costs[c2 + r].onchip_energy_pj == costs[c1 + r].onchip_energy_pj);
  }
  // The Timeloop-semantics model counts the padded halo as data: the edge rows cost as much.
  CHECK(costs[c1].latency_cc == costs[c1 + 3].latency_cc);

  // conv2 on another core: tpu_like_1 is tpu_like_0 again, so the keys are shared...
  for (int r = 0; r < 8; ++r) core[static_cast<size_t>(c2 + r)] = 1;
  const auto costs1 = map_tile_costs(w, ts, a, core, {}, &st);
  CHECK(st.unique_keys == 3);
  CHECK(costs1[c2 + 4].latency_cc == costs[c2 + 4].latency_cc);
  CHECK(costs1[c2 + 4].onchip_energy_pj == costs[c2 + 4].onchip_energy_pj);
  // ... unless it differs: with twice the SRAM read energy, conv2's 2 keys are its own.
  Architecture b = a;
  b.cores[1].levels[2].read_pj *= 2;
  const auto costs2 = map_tile_costs(w, ts, b, core, {}, &st);
  CHECK(st.unique_keys == 5);
  CHECK(st.mapper_problems == 3);
  CHECK(st.mapper_calls == 3);
  CHECK(costs2[c2 + 4].onchip_energy_pj > costs[c2 + 4].onchip_energy_pj);
  CHECK(costs2[c1 + 4].onchip_energy_pj == costs[c1 + 4].onchip_energy_pj);
}

TEST_CASE("tile cost: operands that do not fit go off-chip, largest first") {
  Architecture a = load_architecture("tpu_like_quad_core");
  Core& c = a.cores[0];
  REQUIRE(c.levels[2].name == "sram_2MB");
  c.levels[2].entries = 1024;  // a 1 KiB SRAM
  // A[8,64] (512 values) x B[64,32] (weights, 2048) -> Z[8,32] (256): B goes, A and Z (768) fit.
  const Workload w = finalized({make_matmul("mm", 8, 32, 64)});
  const TileSet ts = generate_tiles(w, {});
  REQUIRE(ts.tiles.size() == 1);
  const std::vector<int> core = {0};
  TileCostStats st;
  const TileCost tc = map_tile_costs(w, ts, a, core, {}, &st).at(0);
  REQUIRE(tc.operands.size() == 3);
  CHECK(!tc.operands[0].offchip);
  CHECK(tc.operands[1].offchip);
  CHECK(!tc.operands[2].offchip);
  CHECK(tc.operands[0].memory_bits == 512 * 8);
  CHECK(tc.operands[1].memory_bits == 0);
  CHECK(tc.operands[2].memory_bits == 256 * 8);
  // By hand: the DRAM port moves 8 words per cycle, so B takes 256 cycles if read once; the array
  // needs only 16 (16384 MACs on 32 x 32 PEs), so the fastest mapping reads B exactly once:
  // 2048 words x 125 pJ, 256 cycles, 2048 x 8 bits / 256 cycles = 64 bits per cycle.
  CHECK(tc.latency_cc == 256);
  CHECK(tc.offchip_energy_pj == 2048 * 125.0);
  CHECK(tc.operands[1].dram_bits_per_cycle == 64);
  CHECK(tc.onchip_energy_pj > 16384 * 0.04);
  CHECK(st.mapper_calls >= 1);

  SUBCASE("on a core with room, nothing goes off-chip") {
    const Architecture big = load_architecture("tpu_like_quad_core");
    const TileCost t2 = map_tile_costs(w, ts, big, core, {}).at(0);
    CHECK(!t2.any_offchip());
    CHECK(t2.offchip_energy_pj == 0);
    CHECK(t2.latency_cc < 256);
  }
}

// CTs with off-chip operands are mapped by branch and bound with the energy tie-break: the same
// costs as the whole energy/cycles front (TileCostOptions::offchip_front), with fewer mappings.
TEST_CASE("tile cost: off-chip CTs by branch and bound equal the whole front") {
  Architecture a = load_architecture("tpu_like_quad_core");
  a.cores[0].levels[2].entries = 2600;
  const Workload w = finalized({source("x", "a", 8, 6, 6), conv("conv", "a", 8, 32, 6, 6, 3, 1, 1)});
  const TileSet ts = rows(w);
  const std::vector<int> core(ts.tiles.size(), 0);
  for (Objective o : {Objective::Cycles, Objective::Edp}) {
    TileCostOptions bb, front;
    bb.objective = front.objective = o;
    front.offchip_front = true;
    TileCostStats sb, sf;
    const auto cb = map_tile_costs(w, ts, a, core, bb, &sb);
    const auto cf = map_tile_costs(w, ts, a, core, front, &sf);
    REQUIRE(cb.size() == cf.size());
    int offchip = 0;
    for (size_t i = 0; i < cb.size(); ++i) {
      offchip += cb[i].any_offchip();
      CHECK(cb[i].latency_cc == cf[i].latency_cc);
      CHECK(cb[i].onchip_energy_pj == cf[i].onchip_energy_pj);
      CHECK(cb[i].offchip_energy_pj == cf[i].offchip_energy_pj);
      for (size_t t = 0; t < cb[i].operands.size(); ++t) {
        CHECK(cb[i].operands[t].offchip == cf[i].operands[t].offchip);
        CHECK(cb[i].operands[t].dram_bits_per_cycle == cf[i].operands[t].dram_bits_per_cycle);
      }
    }
    CHECK(offchip == 6);  // the conv's six rows
    CHECK(sb.mappings_evaluated < sf.mappings_evaluated);
  }
}

// A relative gap for the per-tile searches (TileCostOptions::mapper_gap): each CT keeps its least
// cycles, its energy is within the gap of the exact search's, and the cache tells the two apart.
TEST_CASE("tile cost: a mapper gap keeps each CT's cycles, its energy within the gap, and its own cache keys") {
  Architecture a = load_architecture("tpu_like_quad_core");
  a.cores[0].levels[2].entries = 2600;  // some rows off-chip: both search paths
  const Workload w = finalized({source("x", "a", 8, 6, 6), conv("conv", "a", 8, 32, 6, 6, 3, 1, 1)});
  const TileSet ts = rows(w);
  for (int on : {0, 2}) {
    const std::vector<int> core(ts.tiles.size(), on);
    TileCostOptions exact, gap;
    gap.mapper_gap = 0.05;
    TileCostStats se, sg;
    const auto ce = map_tile_costs(w, ts, a, core, exact, &se);
    const auto cg = map_tile_costs(w, ts, a, core, gap, &sg);
    REQUIRE(ce.size() == cg.size());
    for (size_t i = 0; i < ce.size(); ++i) {
      const double e_exact = ce[i].onchip_energy_pj + ce[i].offchip_energy_pj;
      const double e_gap = cg[i].onchip_energy_pj + cg[i].offchip_energy_pj;
      CHECK(cg[i].latency_cc == ce[i].latency_cc);
      CHECK(e_gap >= e_exact * (1 - 1e-12));
      CHECK(e_gap <= e_exact * 1.05);
    }
    CHECK(sg.mappings_evaluated <= se.mappings_evaluated);
  }
  const Einsum e = conv("conv", "a", 8, 32, 1, 6, 3, 1, 1);
  TileCostOptions zero, gap;
  zero.mapper_gap = 0;
  gap.mapper_gap = 0.05;
  CHECK(tile_cost_cache_key(e, "core", 0, zero) == tile_cost_cache_key(e, "core", 0, TileCostOptions{}));
  CHECK(tile_cost_cache_key(e, "core", 0, gap) != tile_cost_cache_key(e, "core", 0, zero));
}

// A work limit for the per-tile searches (TileCostOptions::mapper_work): an anytime search. Each
// CT's cost is a valid mapping's, never below the exact search's (cycles first, then energy), the
// stopped searches are counted, and the cache keeps the two apart. A limit the searches never
// reach gives the exact costs.
TEST_CASE("tile cost: a mapper work limit gives valid costs no better than exact, counted, with their own keys") {
  Architecture a = load_architecture("tpu_like_quad_core");
  a.cores[0].levels[2].entries = 2600;  // some rows off-chip: both search paths
  const Workload w = finalized({source("x", "a", 8, 6, 6), conv("conv", "a", 8, 32, 6, 6, 3, 1, 1)});
  const TileSet ts = rows(w);
  for (int on : {0, 2}) {
    const std::vector<int> core(ts.tiles.size(), on);
    TileCostOptions exact, tight, loose;
    tight.mapper_work = 200;
    loose.mapper_work = int64_t{1} << 50;
    TileCostStats se, st, sl;
    const auto ce = map_tile_costs(w, ts, a, core, exact, &se);
    const auto ct = map_tile_costs(w, ts, a, core, tight, &st);
    const auto cl = map_tile_costs(w, ts, a, core, loose, &sl);
    REQUIRE(ce.size() == ct.size());
    for (size_t i = 0; i < ce.size(); ++i) {
      const double e_exact = ce[i].onchip_energy_pj + ce[i].offchip_energy_pj;
      const double e_tight = ct[i].onchip_energy_pj + ct[i].offchip_energy_pj;
      CHECK(ct[i].latency_cc >= ce[i].latency_cc);
      if (ct[i].latency_cc == ce[i].latency_cc) CHECK(e_tight >= e_exact * (1 - 1e-12));
      CHECK(cl[i].latency_cc == ce[i].latency_cc);
      CHECK(cl[i].onchip_energy_pj + cl[i].offchip_energy_pj == e_exact);
    }
    CHECK(se.truncated == 0);
    CHECK(sl.truncated == 0);
    CHECK(st.truncated > 0);
    CHECK(st.truncated <= st.mapper_calls);
  }
  const Einsum e = conv("conv", "a", 8, 32, 1, 6, 3, 1, 1);
  TileCostOptions zero, work;
  work.mapper_work = 1000;
  CHECK(tile_cost_cache_key(e, "core", 0, zero) == tile_cost_cache_key(e, "core", 0, TileCostOptions{}));
  CHECK(tile_cost_cache_key(e, "core", 0, work) != tile_cost_cache_key(e, "core", 0, zero));
}

TEST_CASE("tile cost: a CT the rule fits by its boxes but no mapping holds gets more operands off-chip") {
  Architecture a = load_architecture("tpu_like_quad_core");
  a.cores[0].levels[2].entries = 2600;
  const Workload w = finalized({source("x", "a", 8, 6, 6), conv("conv", "a", 8, 32, 6, 6, 3, 1, 1)});
  const TileSet ts = rows(w);
  const std::vector<int> core(ts.tiles.size(), 0);
  TileCostStats st;
  const auto costs = map_tile_costs(w, ts, a, core, {}, &st);
  // Edge row: boxes 2304 (weights) + 96 (input: 2 rows x 6 columns x 8) + 192 (output) = 2592
  // words fit 2600, but held whole the input is 3 x 8 x 8 (the halo's padding included): 2688
  // do not, so the weights (the largest) go off-chip after all. Interior rows: 2304 + 144 + 192
  // = 2640, off-chip by the rule itself.
  const TileCost& edge = costs[static_cast<size_t>(ts.layer_first[1])];
  const TileCost& mid = costs[static_cast<size_t>(ts.layer_first[1] + 2)];
  CHECK(edge.operands[0].offchip);
  CHECK(!edge.operands[1].offchip);
  CHECK(mid.operands[0].offchip);
  CHECK(edge.latency_cc == mid.latency_cc);
  CHECK(edge.offchip_energy_pj == mid.offchip_energy_pj);
  // The weights read once from DRAM: 2304 words x 125 pJ.
  CHECK(mid.offchip_energy_pj == 2304 * 125.0);
  CHECK(st.unique_keys == 3);
  CHECK(st.mapper_problems == 3);  // the edge and interior rows differ in what the rule sends off-chip
}

// A home below a fan-out (per-PE registers, an analog array's cells) holds an operand spread over
// its instances: the capacity rule counts them (words_per_instance), not one instance's entries.
TEST_CASE("tile cost: an operand homed in per-PE memories is checked against all their instances") {
  Architecture a = load_architecture("tpu_like_quad_core");
  Core& c = a.cores[0];
  REQUIRE(c.levels[0].name == "rf_128B");
  REQUIRE(c.levels[0].instances == 1024);
  c.levels[2].may_keep &= static_cast<RoleMask>(~role_bit(TensorRole::Weight));  // weights' home: rf_128B
  // B[K=64, N=32]: 2048 weights, spread by N over sram's 32 columns and by K over rf_2B's 32:
  // two per PE, within 128 entries. One instance alone (128 entries) could not hold them.
  const Workload w = finalized({make_matmul("mm", 8, 32, 64)});
  const TileSet ts = generate_tiles(w, {});
  const std::vector<int> core = {0};
  const TileCost tc = map_tile_costs(w, ts, a, core, {}).at(0);
  CHECK(!tc.operands[1].offchip);
  CHECK(tc.offchip_energy_pj == 0);
  // Held whole and stationary, the weights never reload: 16,384 MACs on 1,024 PEs take 16 steps,
  // and each PE reads its two weights from rf_128B once per use.
  CHECK(tc.latency_cc >= 16);

  SUBCASE("one entry per PE cannot hold two weights each: they go off-chip") {
    c.levels[0].entries = 1;
    const TileCost t1 = map_tile_costs(w, ts, a, core, {}).at(0);
    CHECK(t1.operands[1].offchip);
    CHECK(t1.offchip_energy_pj >= 2048 * 125.0);
  }
}

TEST_CASE("tile cost: bad allocations and CTs that cannot be mapped") {
  const Architecture a = load_architecture("tpu_like_quad_core");
  const Workload w = finalized({make_matmul("mm", 8, 32, 64)});
  const TileSet ts = generate_tiles(w, {});
  auto message = [&](const Architecture& arch, std::vector<int> core) {
    try {
      map_tile_costs(w, ts, arch, core, {});
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  // pooling_4 runs pools only.
  const std::string pool = message(a, {a.node_index("pooling_4")});
  CHECK(pool.find("mm") != std::string::npos);
  CHECK(pool.find("pooling_4") != std::string::npos);
  CHECK(pool.find("cannot run mac operators") != std::string::npos);
  CHECK(message(a, {17}).find("core 17 does not exist") != std::string::npos);
  CHECK(message(a, {0, 0}).find("2 cores given for 1 CTs") != std::string::npos);
  // A 1-word SRAM that must keep every role: no mapping fits even with all operands off-chip.
  Architecture tiny = a;
  tiny.cores[1].levels[2].entries = 1;
  tiny.cores[1].levels[2].must_keep = kAllRoles;
  const std::string none = message(tiny, {1});
  CHECK(none.find("layer 'mm', CT 0") != std::string::npos);
  CHECK(none.find("tpu_like_1") != std::string::npos);
  CHECK(none.find("even with every operand in off-chip memory") != std::string::npos);
}

// A row CT of a fused stack whose producer layer ran whole (its own stack): COALA holds the
// producer's whole output on the CT's core, not the CT's window of it. The rule counts that
// (held_input_bits), so the input streams from DRAM instead of overflowing the core, as
// Xception's block4_pool did on the 256 KiB pooling core (a whole-layer input split four ways).
TEST_CASE("tile cost: an input whose producers' whole outputs do not fit streams from DRAM") {
  // conv1 (3x3, 8 -> 8 channels, 8x8) alone; conv2 (1x1, 8 -> 2) and conv3 (1x1, 2 -> 2) fused by rows.
  const Workload w = finalized({conv("conv1", "x", 8, 8, 8, 8, 3, 1, 1), conv("conv2", "conv1", 8, 2, 8, 8, 1, 1, 0),
                                conv("conv3", "conv2", 2, 2, 8, 8, 1, 1, 0)});
  TilingOptions o;
  o.layers.resize(3);
  for (int l : {1, 2}) o.layers[size_t(l)].intra = {{w.einsums[size_t(l)].ranks[size_t(row_rank(w.einsums[size_t(l)]))].name, 0, 1}};
  o.stacks = layer_stacks_manual(w, {{0}, {1, 2}});
  const TileGraph g = build_tile_graph(w, o);
  const TileSet& ts = g.tiles;
  REQUIRE(ts.tiles.size() == 1 + 8 + 8);
  const std::vector<int64_t> held = held_input_bits(g);
  REQUIRE(held.size() == ts.accesses.size());
  // conv2's rows each hold conv1's whole output (8 x 8 x 8 values, 8 bits); conv3's rows hold one
  // conv2 row (2 x 8 values); outputs and weights hold nothing more than their box.
  for (size_t t = 0; t < ts.tiles.size(); ++t) {
    const auto acc = ts.tile_accesses(int(t));
    for (size_t a = 0; a < acc.size(); ++a) {
      const int64_t h = held[ts.tiles[t].accesses + a];
      const std::string& name = w.tensors[size_t(acc[a].tensor)].name;
      CAPTURE(t);
      CAPTURE(name);
      if (name == "conv1" && acc[a].role != TensorRole::Output) CHECK(h == 8 * 8 * 8 * 8);
      else if (name == "conv2" && acc[a].role != TensorRole::Output) CHECK(h == 2 * 8 * 8);
      else CHECK(h == 0);
    }
  }

  // A 256-word SRAM: a conv2 row by its boxes (64 input values, 16 weights, 16 outputs) fits; with
  // conv1's whole output (512 values) it does not, and the input, the largest, goes off-chip.
  Architecture a = load_architecture("tpu_like_quad_core");
  REQUIRE(a.cores[0].levels[2].name == "sram_2MB");
  a.cores[0].levels[2].entries = 256;
  const std::vector<int> core(ts.tiles.size(), 0);
  const int row = ts.layer_first[1] + 3;  // an interior conv2 row
  size_t in = 0;
  while (ts.tile_accesses(row)[in].role != TensorRole::Input || w.tensors[size_t(ts.tile_accesses(row)[in].tensor)].name != "conv1") ++in;
  const TileCost by_box = map_tile_costs(w, ts, a, core, {})[size_t(row)];
  CHECK(!by_box.any_offchip());
  const std::vector<TileCost> costs = map_tile_costs(w, ts, a, core, {}, nullptr, nullptr, held);
  const TileCost& by_held = costs[size_t(row)];
  for (size_t k = 0; k < by_held.operands.size(); ++k) CHECK(by_held.operands[k].offchip == (k == in));
  // The 64 input values come from DRAM once: their energy is DRAM's.
  CHECK(by_held.offchip_energy_pj >= 64 * a.cores[0].levels.back().read_pj);
  // conv3's rows hold one conv2 row: nothing changes for them.
  CHECK(!costs[size_t(ts.layer_first[2] + 3)].any_offchip());

  // COALA: with the boxes alone the row must fetch conv1's 4,096-bit output into a 2,048-bit core
  // and the schedule fails; with the held sizes the input streams and the schedule completes.
  const std::vector<TileCost> box_costs = map_tile_costs(w, ts, a, core, {});
  CHECK_THROWS_AS(coala::schedule(build_schedule_problem(w, g, a, core, box_costs), coala::Options{}), InputError);
  const coala::Schedule s = coala::schedule(build_schedule_problem(w, g, a, core, costs), coala::Options{});
  CHECK(s.latency_cc > 0);
  CHECK(s.energy.total() > 0);
}
