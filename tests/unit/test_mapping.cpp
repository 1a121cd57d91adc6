// Mapping text form, DOSA strings and batch evaluation.
#include <doctest/doctest.h>

#include <random>

#include "engine/arch/arch_toml.hpp"
#include "engine/common/error.hpp"
#include "engine/cost/model.hpp"
#include "engine/mapping/mapping.hpp"
#include "engine/search/random_mapping.hpp"

using namespace mapfuse;

TEST_CASE("mapping: text form round-trips on random mappings") {
  const Core c = load_architecture("gemmini_default").cores.at(0);
  const Einsum e = make_conv("c", {.N = 2, .K = 32, .C = 16, .P = 14, .Q = 14, .R = 3, .S = 3, .Wstride = 2});
  std::mt19937_64 rng(3);
  for (int i = 0; i < 500; ++i) {
    const Mapping m = random_mapping(e, c, rng);
    const std::string text = to_text(m, e, c);
    const Mapping back = parse_mapping(text, e, c);
    CHECK(back == m);
    CHECK(to_text(back, e, c) == text);
  }
}

TEST_CASE("mapping: DOSA strings") {
  const Einsum e = make_conv("conv1", {.K = 64, .C = 3, .P = 112, .Q = 112, .R = 7, .S = 7, .Wstride = 2, .Hstride = 2});
  const Core c = load_architecture("fadiff_large").cores.at(0);
  const Mapping m =
      parse_dosa_mapping("L3[WIO] P28 R7 Q56 K8 - L2[WI] N1 K4X - L1[O] K2 S7 Q2 P2 C3X - L0[W] P2", e, c);
  CHECK(to_text(m, e, c) ==
        "DRAM[Weights,Inputs,Outputs] P=28 R=7 Q=56 K=8 | Scratchpad[Weights,Inputs] K=4@x | "
        "Accumulator[Outputs] K=2 S=7 Q=2 P=2 C=3@y | Registers[Weights] P=2");
  CHECK_FALSE(check_structure(m, e, c).has_value());
  CHECK_THROWS_AS(parse_dosa_mapping("L7[WIO] P112", e, c), InputError);
  CHECK_THROWS_AS(parse_dosa_mapping("L3[WXO] P112", e, c), InputError);
  CHECK_THROWS_AS(parse_dosa_mapping("L3[WIO] Z4", e, c), InputError);
  CHECK_THROWS_AS(parse_mapping("DRAM[Weights] P=0", e, c), InputError);
  CHECK_THROWS_AS(parse_mapping("DRAM[Weights] P=4@z", e, c), InputError);
  CHECK_THROWS_AS(parse_mapping("DRAM[Weights] | DRAM[Inputs]", e, c), InputError);
}

TEST_CASE("mapping: spatial ranks must suit the axis") {
  const Einsum e = make_conv("c", {.K = 16, .C = 16, .P = 4, .Q = 4});
  const Core c = load_architecture("gemmini_default").cores.at(0);
  // Columns (X below the scratchpad) multicast inputs: K may go there, C may not.
  auto err = check_structure(parse_mapping("DRAM[Weights,Inputs,Outputs] K=16 P=4 Q=4 | Scratchpad[Weights,Inputs] C=16@x", e, c), e, c);
  REQUIRE(err.has_value());
  CHECK(err->kind == MappingError::Kind::RankNotOnAxis);
  CHECK_FALSE(check_structure(parse_mapping("DRAM[Weights,Inputs,Outputs] C=16 P=4 Q=4 | Scratchpad[Weights,Inputs] K=16@x", e, c), e, c).has_value());
  // The accumulator may not hold weights.
  err = check_structure(parse_mapping("DRAM[Weights,Inputs,Outputs] K=16 C=16 P=4 Q=4 | Accumulator[Weights]", e, c), e, c);
  REQUIRE(err.has_value());
  CHECK(err->kind == MappingError::Kind::KeepNotAllowed);
}

TEST_CASE("cost model: batch evaluation equals one-by-one evaluation") {
  const Core c = load_architecture("tpuv4i").cores.at(0);
  const Einsum e = make_matmul("mm", 256, 128, 512);
  const EvalPlan plan = compile_plan(e, c);
  std::mt19937_64 rng(11);
  std::vector<FlatMapping> maps;
  for (int i = 0; i < 3000; ++i) maps.push_back(flatten(random_mapping(e, c, rng)));
  std::vector<CostResult> batch(maps.size());
  evaluate_batch(plan, maps, batch);
  for (size_t i = 0; i < maps.size(); ++i) {
    const CostResult one = evaluate(plan, maps[i]);
    CHECK(one.invalid == batch[i].invalid);
    CHECK(one.energy_pj == batch[i].energy_pj);
    CHECK(one.cycles == batch[i].cycles);
  }
}
