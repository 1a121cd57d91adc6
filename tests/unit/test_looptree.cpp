// The fused LoopTree type: structural checks with precise reasons.
#include <doctest/doctest.h>

#include "engine/arch/arch_toml.hpp"
#include "engine/mapping/looptree.hpp"
#include "engine/workload/zoo.hpp"

using namespace mapfuse;

TEST_CASE("looptree: two fused matmuls and the checks that reject broken trees") {
  Workload w = zoo_workload("matmul_chain_2");
  REQUIRE(w.einsums.size() == 2);
  const Core c = load_architecture("tpuv4i").cores.at(0);
  const Einsum& a = w.einsums[0];
  const Einsum& b = w.einsums[1];
  const std::string exchanged = a.tensors[a.output_index()].name;
  REQUIRE(b.tensor_index(exchanged) >= 0);
  // Shared loop: M split in 64 tiles at the global buffer (level 2); each Einsum maps the rest at
  // the outermost level.
  const int am = a.rank_index("M"), bm = b.rank_index("M");
  REQUIRE(am >= 0);
  REQUIRE(bm >= 0);
  auto rest = [&](const Einsum& e, int mr) {
    Einsum r = e;
    r.ranks[mr].size /= 64;
    return trivial_mapping(r, c);
  };
  FusionGroup g{{0, 1}, {{{am, bm}, 64, 2}}, {{exchanged, 2}}, {}, {rest(a, am), rest(b, bm)}};
  LoopTree t{{g}};
  CHECK_FALSE(check_looptree(t, w, c).has_value());

  SUBCASE("exchanged tensor without backing") {
    t.groups[0].backing.clear();
    CHECK(check_looptree(t, w, c).value().find("has no backing level") != std::string::npos);
  }
  SUBCASE("backing below the shared loops") {
    t.groups[0].backing[0].level = 1;
    CHECK(check_looptree(t, w, c).value().find("below shared loops") != std::string::npos);
  }
  SUBCASE("shared factor that does not divide") {
    t.groups[0].shared_loops[0].factor = 3;
    CHECK(check_looptree(t, w, c).value().find("does not divide") != std::string::npos);
  }
  SUBCASE("consumer before producer") {
    std::swap(t.groups[0].einsums[0], t.groups[0].einsums[1]);
    std::swap(t.groups[0].mappings[0], t.groups[0].mappings[1]);
    std::swap(t.groups[0].shared_loops[0].rank[0], t.groups[0].shared_loops[0].rank[1]);
    CHECK(check_looptree(t, w, c).value().find("runs before its producer") != std::string::npos);
  }
  SUBCASE("unfused tree is valid and Einsums appear once") {
    LoopTree u = unfused_looptree(w, {trivial_mapping(a, c), trivial_mapping(b, c)});
    CHECK_FALSE(check_looptree(u, w, c).has_value());
    u.groups[1].einsums[0] = 0;
    CHECK(check_looptree(u, w, c).value().find("is in fusion groups 0 and 1") != std::string::npos);
  }
}
