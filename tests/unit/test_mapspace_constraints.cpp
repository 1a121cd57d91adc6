// Architecture-stated mapspace constraints (AccelForge's `keep:`, `may_reuse`, `min_usage`):
// Level::must_keep, Fanout::x_multicast / y_multicast, Fanout::x_min_usage / y_min_usage, on the
// accelforge_tpu_v4i preset. Hand counts for a 64^3 matmul; the search honours every constraint.
#include <doctest/doctest.h>

#include <string>

#include "engine/arch/arch_toml.hpp"
#include "engine/common/error.hpp"
#include "engine/cost/model.hpp"
#include "engine/cost/relaxed.hpp"
#include "engine/mapping/mapping.hpp"
#include "engine/search/exhaustive.hpp"
#include "test_support.hpp"

using namespace mapfuse;

namespace {

// A[m,k] (input) x B[k,n] (weight) -> C[m,n] (output).
Einsum mm64() { return make_matmul("mm", 64, 64, 64, "A", "B", "C"); }

// AccelForge's optimum for one 64^3 matmul: M over the four cores, N and K over the MXU.
const char* kBest = "MainMemory[A,B,C] | GlobalBuffer[B] M=16 M=4@x | LocalBuffer[A,C] N=64@x K=64@y | Register[B]";

std::string thrown(const std::string& toml) {
  try {
    parse_architecture(toml, "arch.toml");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("mapspace constraints: min_usage asks for as much of each axis as the ranks can fill") {
  const Core& c = test::preset_core("accelforge_tpu_v4i");
  const Einsum e = mm64();
  const int gb = c.level_index("GlobalBuffer"), lb = c.level_index("LocalBuffer");
  // X below the LocalBuffer multicasts inputs, so only N (not in A) may go there: 64 of 128.
  CHECK(max_axis_use(c.levels[lb].fanout, LoopKind::SpatialX, e) == 64);
  CHECK(min_axis_use(c.levels[lb].fanout, LoopKind::SpatialX, e) == 64);
  CHECK(min_axis_use(c.levels[lb].fanout, LoopKind::SpatialY, e) == 64);  // K (not in C)
  CHECK(min_axis_use(c.levels[gb].fanout, LoopKind::SpatialX, e) == 4);   // all four cores
  // A rank of 48: the largest divisor within 128 is 48; 3 x 5 x 7 within 4 cores: 3.
  CHECK(min_axis_use(c.levels[lb].fanout, LoopKind::SpatialX, make_matmul("m", 64, 48, 64)) == 48);
  CHECK(min_axis_use(c.levels[gb].fanout, LoopKind::SpatialX, make_matmul("m", 105, 7, 5)) == 3);
  // No minimum on tpuv4i (the same hardware, free mapspace); copies are exempt.
  CHECK(min_axis_use(test::preset_core("tpuv4i").levels[lb].fanout, LoopKind::SpatialX, e) == 1);
  Einsum copy = e;
  copy.op = OpKind::Copy;
  CHECK(min_axis_use(c.levels[lb].fanout, LoopKind::SpatialX, copy) == 1);

  const std::string two_cores = "MainMemory[A,B,C] | GlobalBuffer[B] M=32 M=2@x | LocalBuffer[A,C] N=64@x K=64@y | Register[B]";
  const Mapping m = parse_mapping(two_cores, e, c);
  const auto err = check_structure(m, e, c);
  REQUIRE(err.has_value());
  CHECK(err->kind == MappingError::Kind::FanoutUnderused);
  CHECK(err->message.find("at least 4x1") != std::string::npos);
  CHECK(evaluate(compile_plan(e, c), flatten(m)).invalid == Invalid::FanoutUnderused);
  // The same mapping is valid where nothing is asked.
  CHECK(evaluate(compile_plan(e, test::preset_core("tpuv4i")), flatten(m)).valid());
}

TEST_CASE("mapspace constraints: must_keep makes a level hold its roles") {
  const Core& c = test::preset_core("accelforge_tpu_v4i");
  const Einsum e = mm64();
  const std::string bypass = "MainMemory[A,B,C] | GlobalBuffer[B] M=16 M=4@x | LocalBuffer[A] N=64@x K=64@y | Register[B]";
  const Mapping m = parse_mapping(bypass, e, c);
  const auto err = check_structure(m, e, c);
  REQUIRE(err.has_value());
  CHECK(err->kind == MappingError::Kind::KeepMissing);
  CHECK(err->message == "level LocalBuffer must hold C (output, must_keep)");
  CHECK(evaluate(compile_plan(e, c), flatten(m)).invalid == Invalid::KeepMissing);
  CHECK(evaluate(compile_plan(e, test::preset_core("tpuv4i")), flatten(m)).valid());
  CHECK_FALSE(check_structure(parse_mapping(kBest, e, c), e, c).has_value());
}

TEST_CASE("mapspace constraints: no multicast across the cores (hand count)") {
  const Core& c = test::preset_core("accelforge_tpu_v4i");
  const Einsum e = mm64();
  const int gb = c.level_index("GlobalBuffer"), reg = c.level_index("Register");
  const CostResult r = evaluate(compile_plan(e, c), flatten(parse_mapping(kBest, e, c)));
  REQUIRE(r.valid());
  // Every PE holds one weight for the whole run: 64 x 64 register fills per core, four cores.
  CHECK(r.access[reg][1].fills == 4 * 4096);
  // M (which B does not index) splits the cores, and the cores share no transfer: the
  // GlobalBuffer reads B once per core. It is filled from DRAM once.
  CHECK(r.access[gb][1].reads == 4 * 4096);
  CHECK(r.access[gb][1].fills == 4096);
  // Allowing multicast across the cores: one read serves all four.
  Core mc = c;
  mc.levels[gb].fanout.x_multicast = kAllRoles;
  const CostResult s = evaluate(compile_plan(e, mc), flatten(parse_mapping(kBest, e, mc)));
  CHECK(s.access[gb][1].reads == 4096);
  CHECK(s.access[reg][1].fills == 4 * 4096);
  CHECK(s.energy_pj == doctest::Approx(r.energy_pj - 3 * 4096 * c.levels[gb].read_pj));
  // Latency: 262,144 MACs over 4 x 64 x 64 MACs in use take 16 cycles, but A, B and C cross
  // the HBM once each: 12,288 words at 584.76 words per cycle, 22 whole cycles.
  CHECK(r.compute_cycles == 16);
  CHECK(r.cycles == 22);
}

TEST_CASE("mapspace constraints: the exhaustive mapper honours all three and finds AccelForge's mapping") {
  const Core& c = test::preset_core("accelforge_tpu_v4i");
  const Einsum e = mm64();
  ExhaustiveOptions o;
  o.objective = Objective::Energy;
  const MapperResult best = exhaustive_search(e, c, Mapspace{}, o);
  REQUIRE(best.best.has_value());
  CHECK_FALSE(check_structure(*best.best, e, c).has_value());
  const CostResult ref = evaluate(compile_plan(e, c), flatten(parse_mapping(kBest, e, c)));
  CHECK(best.cost.energy_pj <= ref.energy_pj);
  CHECK(best.cost.compute_cycles == 16);  // all four cores and 64 x 64 of each MXU
  // Every mapping on the front obeys them too.
  for (const ParetoMapping& p : best.pareto) CHECK_FALSE(check_structure(p.mapping, e, c).has_value());
}

TEST_CASE("mapspace constraints: bad TOML names the key") {
  const std::string head = "name = \"a\"\n[compute]\nenergy_pj = 1\n[[level]]\nname = \"DRAM\"\nkeeps = [\"input\", \"weight\", \"output\"]\n";
  CHECK(thrown(head + "[[level]]\nname = \"B\"\nentries = 8\nkeeps = [\"input\"]\nmust_keep = [\"weight\"]\n").find("must_keep") !=
        std::string::npos);
  CHECK(thrown(head + "fanout = { x = 4, x_min_usage = 2 }\n[[level]]\nname = \"B\"\nentries = 8\n").find("x_min_usage") !=
        std::string::npos);
  CHECK(thrown(head + "fanout = { x = 4, x_multicast = [\"inputs\"] }\n[[level]]\nname = \"B\"\nentries = 8\n").find("x_multicast") !=
        std::string::npos);
}

TEST_CASE("mapspace constraints: the relaxed (FADiff) model refuses an architecture that states its mapspace") {
  const Einsum e = mm64();
  CHECK_NOTHROW(make_relaxed_layer(e, test::preset_core("tpuv4i")));
  try {
    make_relaxed_layer(e, test::preset_core("accelforge_tpu_v4i"));
    FAIL("expected an InputError");
  } catch (const InputError& err) {
    CHECK(std::string(err.what()).find("not supported by the relaxed (FADiff) model") != std::string::npos);
  }
}
