// The lane-parallel evaluator must equal the scalar model exactly, lane by lane.
#include <doctest/doctest.h>

#include <random>

#include "engine/arch/arch_toml.hpp"
#include "engine/cost/batch.hpp"
#include "engine/search/random_mapping.hpp"

using namespace mapfuse;

namespace {

// Redistributes the factors of each rank over the loops of that rank in `shape` (keeping the
// product), so that every lane shares the shape's structure; some factors become 1.
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

void check_equal(const std::string& arch, const Einsum& e, int shapes, uint64_t seed) {
  const Core c = load_architecture(arch).cores.at(0);
  const EvalPlan plan = compile_plan(e, c);
  std::mt19937_64 rng(seed);
  int compared = 0, valid = 0;
  for (int s = 0; s < shapes; ++s) {
    const FlatMapping shape = flatten(random_mapping(e, c, rng));
    const BatchEvaluator batch(plan, shape);
    LaneFactors factors{};
    FlatMapping lanes[kBatchLanes];
    for (int k = 0; k < kBatchLanes; ++k) {
      lanes[k] = reshuffle(shape, e, rng);
      for (int i = 0; i < shape.n_loops; ++i) factors[i][k] = lanes[k].loops[i].factor;
    }
    BatchResult out;
    batch.evaluate(factors, kBatchLanes, out);
    for (int k = 0; k < kBatchLanes; ++k) {
      const CostResult ref = evaluate(plan, lanes[k]);
      INFO("shape " << s << " lane " << k);
      REQUIRE(out.invalid[k] == ref.invalid);
      if (ref.invalid == Invalid::None || ref.invalid == Invalid::CapacityExceeded) {
        CHECK(out.energy_pj[k] == ref.energy_pj);
        CHECK(out.cycles[k] == ref.cycles);
      }
      ++compared;
      valid += ref.valid();
    }
  }
  CHECK(compared == shapes * kBatchLanes);
  CHECK(valid > compared / 20);
}

}  // namespace

TEST_CASE("batch: equals the scalar model on Gemmini (conv with halos, strides)") {
  check_equal("gemmini_default", make_conv("c", {.N = 2, .K = 32, .C = 24, .P = 14, .Q = 14, .R = 3, .S = 3, .Wstride = 2}), 400, 1);
}

TEST_CASE("batch: equals the scalar model on the TPUv4i-like core (matmul)") {
  check_equal("tpuv4i", make_matmul("mm", 512, 256, 384), 400, 2);
}

TEST_CASE("batch: equals the scalar model with colliding spatial loops") {
  // The global buffer's fan-out accepts any rank, so P and R (same input row) can share it.
  check_equal("tpuv4i", make_depthwise_conv("dw", {.C = 16, .P = 28, .Q = 28, .R = 3, .S = 3}, "I", "W", "O"), 400, 3);
}
