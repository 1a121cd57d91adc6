// Evaluating a loop structure with many factor sets (a mapper's inner loop) must equal evaluating
// each mapping on its own; a factor of 1 must mean "no loop", as flatten() drops such loops.
#include <doctest/doctest.h>

#include <random>

#include "engine/arch/arch_toml.hpp"
#include "engine/cost/lanes.hpp"
#include "engine/cost/model.hpp"
#include "engine/search/random_mapping.hpp"

using namespace mapfuse;

namespace {

// Redistributes the prime factors of each rank over the loops of that rank in `shape` (keeping
// the product), so that the result shares the shape's structure; some factors become 1.
FlatMapping reshuffle(const FlatMapping& shape, const Einsum& e, std::mt19937_64& rng) {
  FlatMapping m = shape;
  for (size_t r = 0; r < e.ranks.size(); ++r) {
    std::vector<int> loops;
    for (int i = 0; i < m.n_loops; ++i)
      if (m.loops[i].rank == static_cast<int>(r)) loops.push_back(i), m.loops[i].factor = 1;
    if (loops.empty()) continue;
    for (int64_t pf : prime_factors(e.ranks[r].size))
      m.loops[loops[std::uniform_int_distribution<size_t>(0, loops.size() - 1)(rng)]].factor *= pf;
  }
  return m;
}

// The same mapping without its factor-1 loops (what flatten() would produce).
FlatMapping drop_unit_loops(const FlatMapping& m) {
  FlatMapping out = m;
  out.n_loops = 0;
  for (int i = 0; i < m.n_loops; ++i)
    if (m.loops[i].factor > 1) out.loops[out.n_loops++] = m.loops[i];
  return out;
}

void check_equal(const Core& c, const Einsum& e, int shapes, uint64_t seed, bool expect_valid = true,
                 void (*tweak)(EvalPlan&) = nullptr) {
  EvalPlan plan = compile_plan(e, c);
  if (tweak) tweak(plan);
  std::mt19937_64 rng(seed);
  int compared = 0, valid = 0;
  for (int sh = 0; sh < shapes; ++sh) {
    const FlatMapping shape = flatten(random_mapping(e, c, rng));
    const NestStructure s = analyze(plan, shape);
    LaneFactors lanes{};
    CompactCost lane_out[kLanes];
    const int count = 1 + sh % kLanes;  // partial batches too
    for (int k = 0; k < count; ++k) {
      const FlatMapping m = reshuffle(shape, e, rng);
      for (int i = 0; i < m.n_loops; ++i) lanes[i][k] = m.loops[i].factor;
    }
    evaluate_lanes(plan, s, lanes, count, lane_out);
    for (int k = 0; k < count; ++k) {
      int64_t factors[kMaxLoops];
      for (int i = 0; i < shape.n_loops; ++i) factors[i] = lanes[i][k];
      const CompactCost ref = evaluate(plan, s, factors);
      INFO("shape " << sh << " lane " << k);
      REQUIRE(lane_out[k].invalid == ref.invalid);
      CHECK(lane_out[k].energy_pj == ref.energy_pj);  // bit-identical, not approximately equal
      CHECK(lane_out[k].cycles == ref.cycles);
    }
    for (int k = 0; k < 8; ++k) {
      const FlatMapping m = reshuffle(shape, e, rng);
      int64_t factors[kMaxLoops];
      for (int i = 0; i < m.n_loops; ++i) factors[i] = m.loops[i].factor;
      const CompactCost got = evaluate(plan, s, factors);
      const CostResult ref = evaluate(plan, drop_unit_loops(m));
      INFO("shape " << sh << " variant " << k);
      REQUIRE(got.invalid == ref.invalid);
      if (ref.invalid == Invalid::None || ref.invalid == Invalid::CapacityExceeded) {
        CHECK(got.energy_pj == ref.energy_pj);
        CHECK(got.cycles == ref.cycles);
      }
      ++compared;
      valid += ref.valid();
    }
  }
  if (expect_valid) CHECK(valid > compared / 20);
}

void check_equal(const std::string& arch, const Einsum& e, int shapes, uint64_t seed) {
  check_equal(load_architecture(arch).cores.at(0), e, shapes, seed);
}

}  // namespace

TEST_CASE("structure: one structure, many factor sets, on Gemmini (conv with halos, strides)") {
  check_equal("gemmini_default", make_conv("c", {.N = 2, .K = 32, .C = 24, .P = 14, .Q = 14, .R = 3, .S = 3, .Wstride = 2}), 400, 1);
}

TEST_CASE("structure: one structure, many factor sets, on the TPUv4i-like core (matmul)") {
  check_equal("tpuv4i", make_matmul("mm", 512, 256, 384), 400, 2);
}

TEST_CASE("structure: one structure, many factor sets, with forced keeps, no multicast and min_usage") {
  // accelforge_tpu_v4i, its min_usage lifted (the factor sets reshuffle the spatial loops, which
  // would make nearly every lane underuse an axis; the check itself is compared as an invalidity).
  Core c = load_architecture("accelforge_tpu_v4i").cores.at(0);
  check_equal(c, make_matmul("mm", 512, 256, 384), 100, 4, false);
  for (Level& lv : c.levels) lv.fanout.x_min_usage = lv.fanout.y_min_usage = 0;
  finalize(c, "test");
  check_equal(c, make_matmul("mm", 512, 256, 384), 400, 4);
}

// The fused model's plan options: an output holding partial sums before the evaluation, and
// words moved outside the mapping's loops that compete for bandwidth (resident fills).
TEST_CASE("structure: one structure, many factor sets, with accumulated outputs and extra transfers") {
  const Core c = load_architecture("tpuv4i").cores.at(0);
  const Einsum e = make_matmul("mm", 512, 256, 384);
  check_equal(c, e, 300, 5, true, [](EvalPlan& p) { p.output_accumulates = true; });
  check_equal(c, e, 300, 6, true, [](EvalPlan& p) {
    p.levels[p.n_levels - 1].extra_read_words = 12345.5;
    p.levels[1].extra_write_words = 777.25;
  });
  // Accumulating never costs less, and costs more where the output's first updates were free.
  const EvalPlan plain = compile_plan(e, c);
  EvalPlan acc = plain;
  acc.output_accumulates = true;
  std::mt19937_64 rng(7);
  int more = 0;
  for (int i = 0; i < 200; ++i) {
    const FlatMapping m = flatten(random_mapping(e, c, rng));
    const CostResult a = evaluate(plain, m), b = evaluate(acc, m);
    if (!a.valid()) continue;
    CHECK(b.energy_pj >= a.energy_pj);
    CHECK(b.cycles >= a.cycles);
    more += b.energy_pj > a.energy_pj;
    // Every level that keeps the output reads back all it is updated with.
    for (int l = 0; l < plain.n_levels; ++l)
      if (b.access[l][2].updates > 0) CHECK(b.access[l][2].reads == b.access[l][2].updates);
  }
  CHECK(more > 0);
}

TEST_CASE("structure: one structure, many factor sets, with colliding spatial loops") {
  // The global buffer's fan-out accepts any rank, so P and R (same input row) can share it.
  check_equal("tpuv4i", make_depthwise_conv("dw", {.C = 16, .P = 28, .Q = 28, .R = 3, .S = 3}, "I", "W", "O"), 400, 3);
}

TEST_CASE("structure: packed 64-bit, packed 128-bit and plain vector refills agree") {
  const Core c = load_architecture("gemmini_default").cores.at(0);
  const Einsum e = make_conv("c", {.N = 2, .K = 32, .C = 24, .P = 14, .Q = 14, .R = 3, .S = 3, .Wstride = 2});
  const EvalPlan plan64 = compile_plan(e, c);
  for (int t = 0; t < 3; ++t) CHECK(plan64.tensors[t].packing == PlanTensor::Packing::Word64);
  EvalPlan plan128 = plan64, plain = plan64;
  for (int t = 0; t < 3; ++t) {
    plan128.tensors[t].packing = PlanTensor::Packing::Word128;
    plain.tensors[t].packing = PlanTensor::Packing::None;
  }
  std::mt19937_64 rng(5);
  int valid = 0;
  for (int i = 0; i < 3000; ++i) {
    const FlatMapping m = flatten(random_mapping(e, c, rng));
    const CostResult a = evaluate(plan64, m), b = evaluate(plan128, m), v = evaluate(plain, m);
    REQUIRE(a.invalid == v.invalid);
    CHECK(a.energy_pj == v.energy_pj);
    CHECK(b.energy_pj == v.energy_pj);
    CHECK(a.cycles == v.cycles);
    for (int l = 0; l < 4; ++l)
      for (int t = 0; t < 3; ++t) CHECK(a.access[l][t].fills == v.access[l][t].fills);
    valid += v.valid();
  }
  CHECK(valid > 100);
  // Large tensors get wider words or none.
  CHECK(compile_plan(make_matmul("big", int64_t{1} << 31, 8, 8), c).tensors[0].packing == PlanTensor::Packing::Word128);
}
