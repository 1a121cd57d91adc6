// The fused cost evaluation of LoopTrees (engine/cost/fused.hpp): hand-computed counts for two
// fused matmuls, reservations against capacity, and the inputs it rejects.
#include <doctest/doctest.h>

#include <cmath>

#include "engine/common/error.hpp"
#include "engine/cost/fused.hpp"
#include "engine/cost/model.hpp"
#include "engine/mapping/looptree.hpp"

using namespace mapfuse;

namespace {

// A buffer (read 1, write 2, update 3 pJ; unlimited bandwidth) under DRAM (100 pJ per word,
// 0.5 words per cycle); MAC 0.5 pJ.
Core fused_test_core(int64_t buffer_entries) {
  Core c;
  c.name = "fused_test";
  c.compute = {"MAC", 0.5, 1e9, 1};
  Level buf{.name = "Buffer", .entries = buffer_entries, .word_bits = 8, .read_pj = 1, .write_pj = 2, .update_pj = 3};
  Level dram{.name = "DRAM", .word_bits = 8, .shared_bandwidth = 0.5, .read_pj = 100, .write_pj = 100, .update_pj = 100};
  c.levels = {buf, dram};
  finalize(c, "fused_test");
  return c;
}

// T1[m,n] = T0[m,k] W0[k,n] (M=4, N=2, K=2), then T2[m,n] = T1[m,k] W1[k,n] (M=4, N=2, K=2).
Workload two_matmuls() {
  Workload w;
  w.name = "two_matmuls";
  w.einsums.push_back(make_matmul("A", 4, 2, 2, "T0", "W0", "T1"));
  w.einsums.push_back(make_matmul("B", 4, 2, 2, "T1", "W1", "T2"));
  finalize(w);
  return w;
}

// Every loop of the (tile) Einsum at the buffer in rank order; the buffer keeps every tensor and
// DRAM keeps every tensor (formally, for the exchanged ones).
Mapping all_in_buffer(const Einsum& e) {
  Mapping m;
  m.levels.resize(2);
  for (size_t r = 0; r < e.ranks.size(); ++r)
    if (e.ranks[r].size > 1) m.levels[0].loops.push_back({static_cast<int>(r), e.ranks[r].size});
  m.levels[0].keep = m.levels[1].keep = 0b111;
  return m;
}

LoopTree fused_on_m(const Workload& w, int64_t m_factor) {
  FusionGroup g;
  g.einsums = {0, 1};
  if (m_factor > 1) g.shared_loops.push_back({{0, 0}, m_factor, 0});  // rank M of both, above the buffer
  g.backing = {{"T1", 0}};
  for (int i = 0; i < 2; ++i) {
    Einsum tile = w.einsums[i];
    tile.ranks[0].size /= m_factor;
    g.mappings.push_back(all_in_buffer(tile));
  }
  return LoopTree{{g}};
}

}  // namespace

TEST_CASE("ffm fused cost: two matmuls fused at the buffer, hand-computed") {
  const Workload w = two_matmuls();
  const Core c = fused_test_core(64);
  const int buf = 0, dram = 1;
  const int T0 = 0, W0 = 1, T1 = 2;  // A's tensors
  const int W1 = 1, T2 = 2;          // B's tensors (T1 is B's tensor 0)
  const FusedCost f = evaluate_fused(fused_on_m(w, 2), w, c);
  REQUIRE(f.valid);
  // A per tile (M=2, N=2, K=2; 8 MACs): T0 and W0 tiles of 4 come from DRAM; T1 is backed in the
  // buffer: never filled from or drained to DRAM.
  const CostResult& a = f.tiles[0];
  CHECK(a.access[dram][T1].total() == 0);
  CHECK(a.access[buf][T1].fills == 0);
  CHECK(a.access[buf][T1].updates == 8);
  CHECK(a.access[buf][T1].reads == 4);  // read-modify-write after the first update
  CHECK(a.access[dram][T0].reads == 4);
  CHECK(a.access[dram][W0].reads == 4);
  CHECK(a.access[buf][T0].fills == 4);
  // Energy per tile: 8 MACs x 0.5 + buffer reads 20 x 1 + fills 8 x 2 + updates 8 x 3 + DRAM 8 x 100.
  CHECK(f.einsums[0].tile.energy_pj == 4 + 20 + 16 + 24 + 800);
  CHECK(f.einsums[0].iterations == 2);
  CHECK(f.einsums[0].energy_pj == 2 * 864.0);
  // Latency per tile: 8 DRAM words at 0.5 words/cycle = 16 cycles > 8 compute cycles.
  CHECK(f.einsums[0].cycles == 2 * 16.0);
  // B per tile: T1 read on chip only; W1 4 words in, T2 4 words out to DRAM.
  const CostResult& b = f.tiles[1];
  CHECK(b.access[dram][0].total() == 0);
  CHECK(b.access[buf][0].fills == 0);
  CHECK(b.access[buf][0].reads == 8);
  CHECK(b.access[dram][W1].reads == 4);
  CHECK(b.access[dram][T2].updates == 4);
  CHECK(b.access[dram][T2].reads == 0);
  CHECK(f.einsums[1].energy_pj == 2 * (4 + 20 + 8 + 24 + 800.0));
  CHECK(f.einsums[1].cycles == 2 * 16.0);
  CHECK(f.energy_pj == 1728.0 + 1712.0);
  CHECK(f.cycles == 64.0);
  // Reservations in the buffer: A's branch holds T0 and W0 (4 + 4), B's holds W1 and T2 (4 + 4);
  // T1's tile (4) is live in both.
  CHECK(f.einsums[0].own[buf] == 8);
  CHECK(f.einsums[0].exchanged_tile[T1] == 4);
  CHECK(f.einsums[1].own[buf] == 8);
  CHECK(f.peak[buf] == 12);

  SUBCASE("without tiling (whole T1 on chip) the weights are fetched once") {
    const FusedCost g = evaluate_fused(fused_on_m(w, 1), w, c);
    REQUIRE(g.valid);
    // A: 16 MACs, T0 8 + W0 4 words from DRAM, buffer reads 16 + 16 + 8, fills 12, updates 16.
    CHECK(g.einsums[0].energy_pj == 8 + 40 + 24 + 48 + 1200.0);
    CHECK(g.peak[buf] == 8 + 4 + 8);  // T0, W0 and the whole T1
  }
  SUBCASE("the unfused tree pays the intermediate twice through DRAM") {
    Mapping ma = all_in_buffer(w.einsums[0]), mb = all_in_buffer(w.einsums[1]);
    const FusedCost u = evaluate_fused(unfused_looptree(w, {ma, mb}), w, c);
    REQUIRE(u.valid);
    CHECK(u.tiles[0].access[dram][T1].updates == 8);
    CHECK(u.tiles[1].access[dram][0].reads == 8);
    // A: DRAM 8 + 4 + 8 words; buffer reads 40, fills 12, updates 16; 16 MACs.
    CHECK(u.einsums[0].energy_pj == 8 + 40 + 24 + 48 + 2000.0);
    // 20 DRAM words at 0.5 words/cycle.
    CHECK(u.einsums[0].cycles == 40.0);
    CHECK(u.energy_pj > f.energy_pj);
  }
  SUBCASE("reservations count against capacity") {
    const Core small = fused_test_core(11);  // 12 needed during either branch
    const FusedCost s = evaluate_fused(fused_on_m(w, 2), w, small);
    CHECK_FALSE(s.valid);
    CHECK(s.invalid == Invalid::CapacityExceeded);
    CHECK(s.invalid_level == buf);
    CHECK(s.energy_pj == f.energy_pj);  // the costs are still reported
    CHECK(evaluate_fused(fused_on_m(w, 2), w, fused_test_core(12)).valid);
  }
}

// Storage above the split: the same tree with both weights kept resident in the buffer above
// the shared M loop. Each is filled once (4 words from DRAM) instead of once per iteration, and
// held during both branches.
TEST_CASE("ffm fused cost: resident weights are filled once and held by every branch, hand-computed") {
  const Workload w = two_matmuls();
  const Core c = fused_test_core(64);
  const int buf = 0, dram = 1;
  const int T0 = 0, W0 = 1, W1 = 1;
  LoopTree t = fused_on_m(w, 2);
  t.groups[0].resident = {{"W0", buf}, {"W1", buf}};
  REQUIRE_FALSE(check_looptree(t, w, c).has_value());
  const FusedCost f = evaluate_fused(t, w, c);
  REQUIRE(f.valid);
  CHECK(f.contexts[0].resident == 1u << W0);
  CHECK(f.contexts[1].resident == 1u << W1);
  // A per tile: W0 never comes from DRAM and is not filled in the tile; T0 still is (4 words).
  const CostResult& a = f.tiles[0];
  CHECK(a.access[dram][W0].total() == 0);
  CHECK(a.access[buf][W0].fills == 0);
  CHECK(a.access[buf][W0].reads == 8);
  CHECK(a.access[dram][T0].reads == 4);
  // Per tile 8 MACs x 0.5 + buffer reads 20 x 1 + fills 4 x 2 + updates 8 x 3 + DRAM 4 x 100 =
  // 456; twice, plus the one fill of W0: 4 DRAM reads and 4 buffer writes, 408.
  CHECK(f.einsums[0].tile.energy_pj == 4 + 20 + 8 + 24 + 400);
  CHECK(f.einsums[0].energy_pj == 2 * 456.0 + 408);
  // The in-branch tree pays that fill twice: 1,728 pJ.
  CHECK(f.einsums[0].energy_pj == 1728.0 - 408);
  // Latency: per tile 4 DRAM words plus half of W0's fill (2): 6 words at 0.5 words per cycle,
  // 12 cycles (the model divides the demand per compute cycle as Timeloop does, 0.75, and rounds
  // the resulting cycles up) against 16 with W0 in the branch.
  CHECK(f.einsums[0].cycles == 2 * std::ceil(8 / (0.5 / (6.0 / 8))));
  CHECK(f.einsums[0].cycles < 32);
  // B: T2's 4 updates to DRAM plus half of W1's fill per tile; the same energy saving.
  CHECK(f.einsums[1].energy_pj == 2 * (4 + 20 + 8 + 24 + 800.0) - 408);
  CHECK(f.einsums[1].cycles == 2 * std::ceil(8 / (0.5 / (6.0 / 8))));
  // Reservations: each branch holds its own tile (T0, or T2: 4 words), T1's tile (4) and both
  // resident weights (8), against 12 with the weights in their branches.
  CHECK(f.einsums[0].own[buf] == 4);
  CHECK(f.einsums[0].resident == 4);
  CHECK(f.einsums[1].resident == 4);
  CHECK(f.usage[0][buf] == 16);
  CHECK(f.usage[1][buf] == 16);
  CHECK(f.peak[buf] == 16);
  CHECK_FALSE(evaluate_fused(t, w, fused_test_core(15)).valid);
  CHECK(evaluate_fused(t, w, fused_test_core(16)).valid);
  // What the LoopTree says.
  CHECK(to_text(t, w, c).find("resident: W0@Buffer W1@Buffer") != std::string::npos);

  SUBCASE("a resident tensor a shared loop steps is rejected") {
    LoopTree n = fused_on_m(w, 1);
    n.groups[0].shared_loops.push_back({{1, 0}, 2, 0});  // A's N and B's M: W0 is indexed by N
    for (int i = 0; i < 2; ++i) {
      Einsum tile = w.einsums[i];
      tile.ranks[i == 0 ? 1 : 0].size /= 2;
      n.groups[0].mappings[i] = all_in_buffer(tile);
    }
    n.groups[0].resident = {{"W0", buf}};
    CHECK_THROWS_WITH_AS(evaluate_fused(n, w, c), doctest::Contains("indexed by shared loop"), InputError);
  }
  SUBCASE("malformed resident entries") {
    LoopTree n = t;
    n.groups[0].resident = {{"T1", buf}};
    CHECK(check_looptree(n, w, c).value_or("").find("produced inside the group") != std::string::npos);
    n.groups[0].resident = {{"W0", dram}};
    CHECK(check_looptree(n, w, c).value_or("").find("not an on-chip level") != std::string::npos);
    n.groups[0].resident = {{"W0", buf}, {"W0", buf}};
    CHECK(check_looptree(n, w, c).value_or("").find("resident twice") != std::string::npos);
    n.groups[0].resident = {{"nothing", buf}};
    CHECK(check_looptree(n, w, c).value_or("").find("does not exist") != std::string::npos);
    n.groups[0].mappings[0].levels[0].keep = 0b101;  // W0 not kept in the buffer
    n.groups[0].resident = {{"W0", buf}};
    CHECK_THROWS_WITH_AS(evaluate_fused(n, w, c), doctest::Contains("must keep resident tensor 'W0'"), InputError);
  }
}

// An output accumulated across a shared loop over a reduction rank: A's K split in two by a
// loop around A alone (a nested run of one Einsum), T1 stored whole in the buffer above it and
// read by B after the loop. The first tile's updates land on zero, the second's read the partial
// sums back: in all exactly the traffic of the unsplit A.
TEST_CASE("ffm fused cost: an output accumulated across a shared reduction loop, hand-computed") {
  const Workload w = two_matmuls();
  const Core c = fused_test_core(64);
  const int buf = 0, T1 = 2;
  LoopTree t = fused_on_m(w, 1);
  t.groups[0].shared_loops.push_back({{2, -1}, 2, 0});  // A's K, above the buffer
  Einsum a = w.einsums[0];
  a.ranks[2].size = 1;
  t.groups[0].mappings[0] = all_in_buffer(a);
  REQUIRE_FALSE(check_looptree(t, w, c).has_value());
  const FusedCost f = evaluate_fused(t, w, c);
  REQUIRE(f.valid);
  CHECK(f.contexts[0].iterations == 2);
  CHECK(f.contexts[0].reduction == 2);
  // First tile: 8 updates of T1, none read back; the second reads all 8 back.
  CHECK(f.tiles[0].access[buf][T1].updates == 8);
  CHECK(f.tiles[0].access[buf][T1].reads == 0);
  CHECK(f.einsums[0].rest.energy_pj == f.einsums[0].tile.energy_pj + 8 * 1);
  // A in all: 16 MACs, T0 8 + W0 4 words from DRAM, buffer reads 40, fills 12, updates 16; the
  // same as unsplit (1,320 pJ), and 2 x 12 cycles (6 DRAM words per tile).
  const FusedCost whole = evaluate_fused(fused_on_m(w, 1), w, c);
  CHECK(f.einsums[0].energy_pj == 8 + 40 + 24 + 48 + 1200.0);
  CHECK(f.einsums[0].energy_pj == whole.einsums[0].energy_pj);
  CHECK(f.einsums[0].cycles == 24);
  // T1 is held whole during both branches; A's own tiles are halved (T0 4, W0 2).
  CHECK(f.einsums[0].own[buf] == 6);
  CHECK(f.usage[0][buf] == 6 + 8);

  SUBCASE("the loop may not cover the output's consumer") {
    LoopTree n = t;
    n.groups[0].shared_loops[0].rank = {2, 0};  // also B's M
    Einsum b = w.einsums[1];
    b.ranks[0].size /= 2;
    n.groups[0].mappings[1] = all_in_buffer(b);
    CHECK_THROWS_WITH_AS(evaluate_fused(n, w, c), doctest::Contains("partial sums would cross"), InputError);
  }
}

TEST_CASE("ffm fused cost: trees outside the modelled fused mapspace are rejected") {
  const Workload w = two_matmuls();
  const Core c = fused_test_core(64);
  LoopTree t = fused_on_m(w, 2);
  SUBCASE("shared loop over a reduction rank of the consumer") {
    // A's N with B's K: B's output would carry partial sums across iterations.
    t.groups[0].shared_loops[0].rank = {1, 2};
    for (int i = 0; i < 2; ++i) {
      Einsum tile = w.einsums[i];
      tile.ranks[i == 0 ? 1 : 2].size /= 2;
      t.groups[0].mappings[i] = all_in_buffer(tile);
    }
    CHECK_THROWS_WITH_AS(evaluate_fused(t, w, c), doctest::Contains("partial sums"), InputError);
  }
  SUBCASE("exchanged tensor backed in DRAM inside a group") {
    t.groups[0].backing[0].level = 1;
    t.groups[0].shared_loops[0].level = 1;
    CHECK_THROWS_WITH_AS(evaluate_fused(t, w, c), doctest::Contains("outermost level"), InputError);
  }
  SUBCASE("own loop above the backing level") {
    Mapping& m = t.groups[0].mappings[0];
    m.levels[0].loops = {{0, 2}, {1, 2}};
    m.levels[1].loops = {{2, 2}};
    CHECK_THROWS_WITH_AS(evaluate_fused(t, w, c), doctest::Contains("above the backing level"), InputError);
  }
  SUBCASE("structurally broken tree") {
    t.groups[0].shared_loops[0].factor = 3;
    CHECK_THROWS_WITH_AS(evaluate_fused(t, w, c), doctest::Contains("does not divide"), InputError);
  }
}

TEST_CASE("ffm fused cost: an Einsum alone in its group costs what the single-Einsum model says") {
  const Workload w = two_matmuls();
  const Core c = fused_test_core(64);
  Mapping ma = all_in_buffer(w.einsums[0]);
  Mapping mb = all_in_buffer(w.einsums[1]);
  mb.levels[0].loops = {{2, 2}, {1, 2}};  // B: K, N at the buffer, M at DRAM
  mb.levels[1].loops = {{0, 4}};
  const FusedCost u = evaluate_fused(unfused_looptree(w, {ma, mb}), w, c);
  REQUIRE(u.valid);
  const CostResult ra = evaluate(compile_plan(w.einsums[0], c), flatten(ma));
  const CostResult rb = evaluate(compile_plan(w.einsums[1], c), flatten(mb));
  CHECK(u.einsums[0].energy_pj == ra.energy_pj);
  CHECK(u.einsums[0].cycles == ra.cycles);
  CHECK(u.einsums[1].energy_pj == rb.energy_pj);
  CHECK(u.einsums[1].cycles == rb.cycles);
  CHECK(u.energy_pj == ra.energy_pj + rb.energy_pj);
  CHECK(u.peak[0] == std::max(ra.level_occupancy[0], rb.level_occupancy[0]));
}

// Nested fusion: A; M{B; C} -- A produces T1 whole, and a loop over M that only B and C share
// steps T2 between them. T1 (8 words) is stored under no loop; B reads it piece by piece in
// every iteration of the nested loop, so it is held until the loop ends, during C's branch too
// although C does not touch it. T2 is stored under the nested loop: a 2 x 2 tile.
TEST_CASE("ffm fused cost: a nested loop over part of a group, hand-computed reservations") {
  Workload w;
  w.name = "three_matmuls";
  w.einsums.push_back(make_matmul("A", 4, 2, 2, "T0", "W0", "T1"));
  w.einsums.push_back(make_matmul("B", 4, 2, 2, "T1", "W1", "T2"));
  w.einsums.push_back(make_matmul("C", 4, 2, 2, "T2", "W2", "T3"));
  finalize(w);
  const Core c = fused_test_core(20);
  FusionGroup g;
  g.einsums = {0, 1, 2};
  g.shared_loops.push_back({{-1, 0, 0}, 2, 0});  // M of B and of C, above the buffer
  g.backing = {{"T1", 0}, {"T2", 0}};
  for (int i = 0; i < 3; ++i) {
    Einsum tile = w.einsums[i];
    if (i > 0) tile.ranks[0].size /= 2;
    g.mappings.push_back(all_in_buffer(tile));
  }
  LoopTree t{{g}};
  const FusedCost f = evaluate_fused(t, w, c);
  CHECK(f.valid);
  CHECK(f.einsums[0].iterations == 1);
  CHECK(f.einsums[1].iterations == 2);
  CHECK(f.einsums[2].iterations == 2);
  // Own words at the buffer (without exchanged tiles): A 8 + 4, B 4 (W1), C 4 + 4 (W2, T3).
  CHECK(f.einsums[0].own[0] == 12);
  CHECK(f.einsums[1].own[0] == 4);
  CHECK(f.einsums[2].own[0] == 8);
  // A: 12 + T1 8; B: 4 + T1 8 + T2 4; C: 8 + T1 8 (held by the loop) + T2 4.
  CHECK(f.usage[0][0] == 20);
  CHECK(f.usage[1][0] == 16);
  CHECK(f.usage[2][0] == 20);
  // Each nested Einsum costs its half tile twice.
  Einsum half = w.einsums[2];
  half.ranks[0].size = 2;
  FusedContext ctx;
  ctx.backing_level = 0;
  ctx.onchip = 0b001;  // T2, C's input
  ctx.iterations = 2;
  const CostResult one = evaluate(compile_plan(half, c), flatten_fused(all_in_buffer(half), ctx, 2));
  CHECK(f.einsums[2].energy_pj == doctest::Approx(2 * one.energy_pj).epsilon(1e-12));
  SUBCASE("one word less does not fit, at C's branch or A's") {
    const FusedCost g19 = evaluate_fused(t, w, fused_test_core(19));
    CHECK_FALSE(g19.valid);
    CHECK(g19.invalid == Invalid::CapacityExceeded);
  }
  SUBCASE("a nested loop stepping T2 along different dimensions in B and C is rejected") {
    t.groups[0].shared_loops[0].rank = {-1, 0, 1};  // C's N does not step T2
    Einsum tile = w.einsums[2];
    tile.ranks[1].size = 1;
    t.groups[0].mappings[2] = all_in_buffer(tile);
    CHECK_THROWS_WITH_AS(evaluate_fused(t, w, c), doctest::Contains("steps 'T2' differently"), InputError);
  }
  SUBCASE("loops whose runs overlap without nesting are rejected") {
    t.groups[0].shared_loops[0].factor = 1;
    t.groups[0].shared_loops.push_back({{0, 0, -1}, 1, 0});
    CHECK_THROWS_WITH_AS(evaluate_fused(t, w, c), doctest::Contains("without being inside it"), InputError);
  }
  SUBCASE("a loop over Einsums that are not consecutive is rejected") {
    t.groups[0].shared_loops[0].rank = {0, -1, 0};
    CHECK_THROWS_WITH_AS(evaluate_fused(t, w, c), doctest::Contains("not consecutive"), InputError);
  }
}
