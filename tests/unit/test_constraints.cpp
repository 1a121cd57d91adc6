// Mapspace constraints in TOML: parsing, errors, and the mapper honouring them.
#include <doctest/doctest.h>

#include "engine/arch/arch_toml.hpp"
#include "engine/common/error.hpp"
#include "engine/search/exhaustive.hpp"
#include "engine/search/mapspace_toml.hpp"
#include "engine/search/random_search.hpp"
#include "test_support.hpp"

using namespace mapfuse;

TEST_CASE("constraints: Gemmini's DOSA mapspace pins orders, bypass and spatial ranks") {
  const Core c = load_architecture("gemmini_default").cores.at(0);
  const Einsum e = make_conv("c", {.K = 32, .C = 16, .P = 7, .Q = 7, .R = 3, .S = 3});
  const auto specs = load_constraints(test::source_dir("presets/constraints/gemmini_dosa.toml"));
  REQUIRE(specs.size() == 3);
  const Mapspace space = make_mapspace(specs, e, c);
  ExhaustiveOptions opt;
  opt.max_mappings = 50'000'000;
  const MapperResult r = exhaustive_search(e, c, space, opt);
  REQUIRE(r.best.has_value());
  const Mapping& m = *r.best;
  for (const Loop& lp : m.levels[0].loops) CHECK(lp.kind != LoopKind::Temporal);  // registers
  for (const Loop& lp : m.levels[2].loops) {                                     // scratchpad
    CHECK(lp.kind == LoopKind::SpatialX);
    CHECK(e.ranks[lp.rank].name == "K");
  }
  for (const Loop& lp : m.levels[1].loops)
    if (lp.kind != LoopKind::Temporal) CHECK(e.ranks[lp.rank].name == "C");
  // Accumulator loops follow K S R C N Q P (outer to inner).
  const std::string order = "KSRCNQP";
  size_t last = 0;
  for (const Loop& lp : m.levels[1].loops)
    if (lp.kind == LoopKind::Temporal) {
      const size_t pos = order.find(e.ranks[lp.rank].name);
      CHECK(pos >= last);
      last = pos;
    }
  // Constraining never finds something better than the free space allows.
  CHECK(r.evaluated > 0);
}

TEST_CASE("constraints: bad input names the file, line and what conflicts") {
  const Core c = load_architecture("gemmini_default").cores.at(0);
  const Einsum e = make_conv("conv1", {.K = 32, .C = 16, .P = 7, .Q = 7});
  auto error_of = [&](const std::string& text) {
    try {
      make_mapspace(parse_constraints(text, "c.toml"), e, c);
    } catch (const InputError& err) {
      return std::string(err.what());
    }
    return std::string("no error");
  };
  CHECK(error_of("[[constraint]]\nlevel = \"Acumulator\"\n").find("c.toml:1:") != std::string::npos);
  CHECK(error_of("[[constraint]]\nlevel = \"Acumulator\"\n").find("did you mean 'Accumulator'") != std::string::npos);
  CHECK(error_of("[[constraint]]\nlevel = \"DRAM\"\nlayer = \"conv1\"\ntemporal_order = [\"Z\"]\n").find("has no rank 'Z'") !=
        std::string::npos);
  // P may be iterated nowhere: every level either lists an order without P or caps it at 1.
  const std::string conflict =
      "[[constraint]]\nlevel = \"DRAM\"\ntemporal_order = [\"K\", \"C\", \"Q\"]\n"
      "[[constraint]]\nlevel = \"Accumulator\"\nmax_factors = { P = 1 }\n"
      "[[constraint]]\nlevel = \"Scratchpad\"\ntemporal_order = []\n"
      "[[constraint]]\nlevel = \"Registers\"\ntemporal_order = []\n";
  const std::string msg = error_of(conflict);
  CHECK(msg.find("rank P") != std::string::npos);
  CHECK(msg.find("c.toml:1") != std::string::npos);   // the DRAM order
  CHECK(msg.find("c.toml:4") != std::string::npos);   // the accumulator bound
  // A level's own bounds that no factor meets.
  const std::string both = error_of("[[constraint]]\nlevel = \"Accumulator\"\nmin_factors = { K = 4 }\nmax_factors = { K = 2 }\n");
  CHECK(both.find("c.toml:1") != std::string::npos);
  CHECK(both.find("rank K for a factor of at least 4 and at most 2") != std::string::npos);
  CHECK_THROWS_AS(parse_constraints("[[constraint]]\nlevel = \"DRAM\"\nmax_factors = { P = 0 }\n", "c.toml"), InputError);
  CHECK_THROWS_AS(parse_constraints("[[constraint]]\nlevel = \"DRAM\"\nkeeps = []\n", "c.toml"), InputError);
  CHECK_THROWS_AS(parse_constraints("[[constraint]]\nlevel = \"DRAM\"\nkeep = [\"weights\"]\n", "c.toml"), InputError);
}

TEST_CASE("constraints: the random mapper samples within them and never beats the exhaustive optimum") {
  const Core c = load_architecture("gemmini_default").cores.at(0);
  const Einsum e = make_conv("c", {.K = 32, .C = 16, .P = 7, .Q = 7, .R = 3, .S = 3});
  const Mapspace space = make_mapspace(load_constraints(test::source_dir("presets/constraints/gemmini_dosa.toml")), e, c);
  // Orders, kept tensors and spatial ranks are honoured by construction.
  RandomMappingOptions ropt;
  ropt.space = &space;
  std::mt19937_64 rng(7);
  int inside = 0;
  for (int i = 0; i < 2000; ++i) inside += satisfies(random_mapping(e, c, rng, ropt), space);
  CHECK(inside == 2000);  // this mapspace has no factor bounds to reject on
  // Unconstrained samples mostly break them (a sanity check that satisfies() can say no).
  int free_inside = 0;
  for (int i = 0; i < 2000; ++i) free_inside += satisfies(random_mapping(e, c, rng), space);
  CHECK(free_inside < 100);

  const SearchResult rs = random_search(e, c, 5000, 3, Objective::Edp, ropt);
  REQUIRE(rs.best.has_value());
  CHECK(satisfies(*rs.best, space));
  ExhaustiveOptions opt;
  opt.max_mappings = 50'000'000;
  const MapperResult ex = exhaustive_search(e, c, space, opt);
  REQUIRE(ex.best.has_value());
  CHECK(ex.cost.edp() <= rs.cost.edp());
  CHECK(ex.cost.edp() > 0);
}

TEST_CASE("constraints: satisfies() checks order, factor bounds, keep and spatial ranks") {
  const Core c = load_architecture("gemmini_default").cores.at(0);
  const Einsum e = make_conv("c", {.K = 32, .C = 16, .P = 7, .Q = 7, .R = 3, .S = 3});
  const Mapping m = parse_mapping(
      "DRAM[Weights,Inputs,Outputs] K=2 P=7 Q=7 | Scratchpad[Weights,Inputs] K=16@x | Accumulator[Outputs] S=3 R=3 C=16@y | "
      "Registers[Weights]",
      e, c);
  const auto space_of = [&](const std::string& text) { return make_mapspace(parse_constraints(text, "t.toml"), e, c); };
  CHECK(satisfies(m, space_of("[[constraint]]\nlevel = \"Accumulator\"\ntemporal_order = [\"S\", \"R\"]\n")));
  CHECK_FALSE(satisfies(m, space_of("[[constraint]]\nlevel = \"Accumulator\"\ntemporal_order = [\"R\", \"S\"]\n")));
  CHECK_FALSE(satisfies(m, space_of("[[constraint]]\nlevel = \"Accumulator\"\ntemporal_order = [\"S\"]\n")));
  CHECK(satisfies(m, space_of("[[constraint]]\nlevel = \"DRAM\"\nmax_factors = { P = 7 }\n")));
  CHECK_FALSE(satisfies(m, space_of("[[constraint]]\nlevel = \"DRAM\"\nmax_factors = { P = 6 }\n")));
  CHECK_FALSE(satisfies(m, space_of("[[constraint]]\nlevel = \"DRAM\"\nmin_factors = { C = 2 }\n")));
  CHECK_FALSE(satisfies(m, space_of("[[constraint]]\nlevel = \"Scratchpad\"\nspatial_x = [\"C\"]\n")));
  CHECK(satisfies(m, space_of("[[constraint]]\nlevel = \"Scratchpad\"\nspatial_x = [\"K\"]\n")));
  CHECK_FALSE(satisfies(m, space_of("[[constraint]]\nlevel = \"Registers\"\nkeep = []\n")));
}
