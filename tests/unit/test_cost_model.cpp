// Hand-computed access counts for small cases, invariants on random mappings, and DOSA's worked
// example. Level 0 is the innermost level.
#include <doctest/doctest.h>

#include <random>

#include "engine/arch/arch_toml.hpp"
#include "engine/cost/model.hpp"
#include "engine/mapping/mapping.hpp"
#include "engine/search/random_mapping.hpp"
#include "engine/validation/dosa_dataset.hpp"

using namespace mapfuse;

namespace {

// Two levels: a 64-word buffer (read 1 pJ, write 2 pJ, update 3 pJ, 4 words/cycle shared) under
// an unbounded DRAM (100 pJ, 1 word/cycle); optional spatial fan-out below the buffer.
Core two_level(int64_t fanout_x = 1, RoleMask x_reuse = 0) {
  Core c;
  c.name = "test";
  c.compute = {"MAC", 0.5, 1e9, 1};
  Level buf{.name = "Buffer", .entries = 64, .word_bits = 8, .shared_bandwidth = 4,
            .read_pj = 1, .write_pj = 2, .update_pj = 3};
  Level dram{.name = "DRAM", .word_bits = 8, .shared_bandwidth = 1, .read_pj = 100,
             .write_pj = 100, .update_pj = 100};
  dram.fanout.x = fanout_x;
  dram.fanout.x_reuse = x_reuse;
  c.levels = {buf, dram};
  finalize(c, "test");
  return c;
}

CostResult eval(const Einsum& e, const Core& c, const std::string& text) {
  Mapping m = parse_mapping(text, e, c);
  REQUIRE_FALSE(check_structure(m, e, c).has_value());
  return evaluate(compile_plan(e, c), flatten(m));
}

}  // namespace

TEST_CASE("cost model: 1-D convolution, sliding window reuse in a buffer") {
  // O[p] += W[r] * I[p + r], P = 4, R = 3: 12 MACs; the input has 6 values.
  Einsum e;
  e.name = "conv1d";
  e.ranks = {{"R", 3}, {"P", 4}};
  e.tensors = {{"W", TensorRole::Weight, {{{0, 1}}}, 8},
               {"I", TensorRole::Input, {{{1, 1}, {0, 1}}}, 8},
               {"O", TensorRole::Output, {{{1, 1}}}, 8}};
  const Core c = two_level();
  // DRAM steps P; the buffer holds all of W, a 3-wide input window and one output.
  CostResult r = eval(e, c, "DRAM[W,I,O] P=4 | Buffer[W,I,O] R=3");
  REQUIRE(r.valid());
  const int W = 0, I = 1, O = 2, buf = 0, dram = 1;
  CHECK(r.operations == 12);
  CHECK(r.access[buf][W].tile == 3);
  CHECK(r.access[buf][I].tile == 3);
  CHECK(r.access[buf][O].tile == 1);
  CHECK(r.level_occupancy[buf] == 7);
  CHECK(r.access[buf][W].fills == 3);  // W stays while P steps (P is irrelevant to W)
  CHECK(r.access[buf][I].fills == 6);  // 3 for the first window, then 1 new value per step
  CHECK(r.access[buf][W].reads == 12);  // compute reads its operands for every MAC
  CHECK(r.access[buf][I].reads == 12);
  CHECK(r.access[buf][O].updates == 12);
  // DRAM serves exactly what the buffer is filled with, and receives each output once.
  CHECK(r.access[dram][W].reads == 3);
  CHECK(r.access[dram][I].reads == 6);
  CHECK(r.access[dram][O].updates == 4);
  CHECK(r.access[dram][O].reads == 0);
  CHECK(r.access[dram][W].tile == 3);
  CHECK(r.access[dram][I].tile == 6);
  CHECK(r.compute_cycles == 12);
}

TEST_CASE("cost model: 2-level matmul with and without bypass") {
  // Z[m,n] += A[m,k] * B[k,n] with M=4, N=2, K=3: 24 MACs.
  const Einsum e = make_matmul("mm", 4, 2, 3, "A", "B", "Z");
  const Core c = two_level();
  SUBCASE("buffer keeps every tensor") {
    CostResult r = eval(e, c, "DRAM[A,B,Z] M=4 | Buffer[A,B,Z] N=2 K=3");
    REQUIRE(r.valid());
    const int A = 0, B = 1, Z = 2, buf = 0, dram = 1;
    CHECK(r.access[buf][A].tile == 3);
    CHECK(r.access[buf][B].tile == 6);
    CHECK(r.access[buf][Z].tile == 2);
    CHECK(r.access[buf][A].fills == 12);  // a new row of A for each of the 4 M steps
    CHECK(r.access[buf][B].fills == 6);   // B is stationary across M
    CHECK(r.access[buf][A].reads == 24);
    CHECK(r.access[buf][B].reads == 24);
    CHECK(r.access[buf][Z].updates == 24);
    CHECK(r.access[dram][A].reads == 12);
    CHECK(r.access[dram][B].reads == 6);
    CHECK(r.access[dram][Z].updates == 8);  // each output written back once
    CHECK(r.access[dram][Z].reads == 0);    // never re-read: no partial sums leave the buffer
    CHECK(r.access[buf][Z].reads == 16);    // 24 accumulations, the first 8 onto zero
    CHECK(r.access[buf][Z].fills == 0);     // zeros are not fetched from DRAM
    CHECK(r.level_cycles[dram] == 26);      // 12 + 6 + 8 words at 1 word/cycle
    // The buffer moves 36 (A) + 30 (B) + 40 (Z) words at 4 per cycle: 26.5, rounded up.
    CHECK(r.level_cycles[buf] == 27);
    CHECK(r.cycles == 27);
    // Energy: 24 MACs x 0.5 + buffer (reads 64 x 1 + fills 18 x 2 + updates 24 x 3)
    //   + DRAM 26 words x 100.
    CHECK(r.energy_pj == doctest::Approx(12 + 64 + 36 + 72 + 2600));
  }
  SUBCASE("A bypasses the buffer") {
    CostResult r = eval(e, c, "DRAM[A,B,Z] M=4 | Buffer[B,Z] N=2 K=3");
    REQUIRE(r.valid());
    CHECK(r.access[0][0].tile == 0);
    CHECK(r.access[0][0].reads == 0);
    CHECK(r.access[1][0].reads == 24);  // compute reads A straight from DRAM
    CHECK(r.access[1][1].reads == 6);
    CHECK(r.level_occupancy[0] == 8);
  }
}

TEST_CASE("cost model: spatial multicast and spatial reduction") {
  // 4 PEs below DRAM with no inner buffer: spreading N (irrelevant to A) multicasts A,
  // spreading K (irrelevant to Z) reduces partial sums spatially.
  const Einsum e = make_matmul("mm", 4, 4, 4, "A", "B", "Z");
  Core c = two_level(4);
  SUBCASE("N spread: A multicast") {
    CostResult r = eval(e, c, "DRAM[A,B,Z] M=4 K=4 N=4@x | Buffer[B,Z]");
    REQUIRE(r.valid());
    CHECK(r.access[1][0].reads == 16);  // 64 MACs / 4-way multicast
    CHECK(r.level_instances[0] == 4);
    CHECK(r.compute_cycles == 16);
    CHECK(r.utilization == doctest::Approx(1.0));
  }
  SUBCASE("K spread: Z reduced across PEs") {
    CostResult r = eval(e, c, "DRAM[A,B,Z] M=4 N=4 K=4@x | Buffer[B,Z]");
    REQUIRE(r.valid());
    CHECK(r.access[1][0].reads == 64);  // every PE needs its own A values
    // Each PE's buffer holds one Z value per (M,N): its partial sums meet in the reduction tree,
    // so DRAM receives 16 updates (not 64).
    CHECK(r.access[1][2].updates == 16);
  }
}

TEST_CASE("cost model: structural errors are reported") {
  const Einsum e = make_matmul("mm", 4, 4, 4, "A", "B", "Z");
  Core c = two_level(2);
  Mapping m = parse_mapping("DRAM[A,B,Z] M=4 K=4 N=4@x", e, c);
  auto err = check_structure(m, e, c);
  REQUIRE(err.has_value());
  CHECK(err->kind == MappingError::Kind::FanoutExceeded);
  CHECK(evaluate(compile_plan(e, c), flatten(m)).invalid == Invalid::FanoutExceeded);
  m = parse_mapping("DRAM[A,B,Z] M=4 K=2", e, c);
  CHECK(check_structure(m, e, c)->kind == MappingError::Kind::FactorProduct);
  m = parse_mapping("DRAM[A,B] M=4 K=4 N=4", e, c);
  CHECK(check_structure(m, e, c)->kind == MappingError::Kind::BackingMissing);
  // A 64-word buffer cannot hold a 4x4x4 working set of all three tensors (48 words) twice over.
  Core small = two_level();
  small.levels[0].entries = 40;
  finalize(small, "small");
  m = parse_mapping("DRAM[A,B,Z] | Buffer[A,B,Z] M=4 K=4 N=4", e, small);
  CostResult r = evaluate(compile_plan(e, small), flatten(m));
  CHECK(r.invalid == Invalid::CapacityExceeded);
  CHECK(r.invalid_level == 0);
}

TEST_CASE("cost model: DOSA worked example (ResNet-50 conv1 on a 32x32 Gemmini)") {
  // Row 1 of shared/notes/dosa_gemmini.md section 5.1: per-level word accesses from DOSA's
  // model, which agrees with Timeloop on this row; Timeloop's cycles are 10,436,608.
  const Einsum e = make_conv("conv1", {.K = 64, .C = 3, .P = 112, .Q = 112, .R = 7, .S = 7,
                                       .Wstride = 2, .Hstride = 2});
  const Core c = dosa_gemmini_core(32, 128, 2048, 16, 2, 2, 64, 32);
  Mapping m = parse_dosa_mapping(
      "L3[WIO] P28 R7 Q56 K8 - L2[WI] N1 K4X - L1[O] K2 S7 Q2 P2 C3X - L0[W] P2", e, c);
  REQUIRE_FALSE(check_structure(m, e, c).has_value());
  CostResult r = evaluate(compile_plan(e, c), flatten(m));
  REQUIRE(r.valid());
  int64_t level_total[4] = {};
  for (int l = 0; l < 4; ++l)
    for (int t = 0; t < 3; ++t) level_total[l] += r.access[l][t].total();
  CHECK(r.operations == 118013952);
  CHECK(level_total[0] == 132765696);
  CHECK(level_total[1] == 83492864);
  CHECK(r.cycles == 10436608);
  CHECK(r.energy_pj == doctest::Approx(3.05701e9).epsilon(0.005));
}

TEST_CASE("cost model: invariants over random mappings") {
  const Core c = load_architecture("gemmini_default").cores.at(0);
  const Einsum e = make_conv("c", {.K = 32, .C = 16, .P = 14, .Q = 14, .R = 3, .S = 3});
  const EvalPlan plan = compile_plan(e, c);
  std::mt19937_64 rng(7);
  int valid = 0;
  for (int i = 0; i < 2000; ++i) {
    Mapping m = random_mapping(e, c, rng);
    REQUIRE_FALSE(check_structure(m, e, c).has_value());
    CostResult r = evaluate(plan, flatten(m));
    CHECK(r.operations == e.operations());
    CHECK(r.energy_pj > 0);
    CHECK(r.cycles >= r.compute_cycles);
    CHECK(r.compute_cycles * static_cast<double>(c.compute.instances) >=
          static_cast<double>(e.operations()));
    for (int t = 0; t < 3; ++t) {
      // The backing store delivers at least every value once (no tensor is created on chip).
      if (e.tensors[t].role != TensorRole::Output)
        CHECK(r.access[3][t].reads >= e.tensor_volume(t));
      else
        CHECK(r.access[3][t].updates >= e.tensor_volume(t));
    }
    valid += r.valid();
  }
  CHECK(valid > 100);
}
