// Inputs found by the fuzzers (scripts/fuzz.sh), kept so that what they exposed stays fixed.
// Each case names the target, what it found, and the fix.
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "engine/arch/arch_toml.hpp"
#include "engine/arch/energy_mlp.hpp"
#include "engine/common/error.hpp"
#include "engine/workload/timeloop_problem.hpp"
#include "test_support.hpp"

using namespace mapfuse;

namespace {
std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
}  // namespace

// fuzz_arch_toml, timeout (10 s under ASan): a one-byte edit of fadiff_small_mlp.toml's comment.
// Loading it fits two energy MLPs, and each forward pass of the 20,000-step fit allocated its
// activation vectors. The fit now runs in fixed arrays (energy_mlp.cpp) and a fit with more points
// than a CACTI table has is refused, so a user's file cannot make loading run for minutes.
TEST_CASE("fuzz regression: arch TOML with energy MLPs loads, and equals the preset it was mutated from") {
  const std::string path = test::source_dir("tests/fixtures/fuzz/arch_toml_mlp_slow_fit.toml");
  const Architecture mutated = parse_architecture(read_text(path), path);
  const Architecture preset = load_architecture("fadiff_small_mlp");
  REQUIRE(mutated.cores.size() == 1);
  REQUIRE(mutated.cores[0].levels.size() == preset.cores[0].levels.size());
  for (size_t l = 0; l < preset.cores[0].levels.size(); ++l) {
    CHECK(mutated.cores[0].levels[l].read_pj == preset.cores[0].levels[l].read_pj);
    CHECK(mutated.cores[0].levels[l].write_pj == preset.cores[0].levels[l].write_pj);
  }
}

TEST_CASE("fuzz regression: an energy MLP over more than 256 points is refused, at 256 it fits") {
  std::vector<double> kb, pj;
  for (int i = 0; i < 257; ++i) kb.push_back(1 + i), pj.push_back(0.3 + 0.01 * i);
  CHECK_THROWS_WITH_AS(fit_energy_mlp(kb, pj, {8}), doctest::Contains("at most 256"), std::invalid_argument);
  kb.pop_back();
  pj.pop_back();
  const EnergyMlp m = fit_energy_mlp(kb, pj, {2});
  CHECK(m.at(128) > 0);
  CHECK(m.max_relative_error < 0.05);
}

// fuzz_timeloop_yaml, uncaught exception (abort): a Timeloop problem dump with bytes erased so that a
// node the reader indexes as a map is not one; yaml-cpp threw from `x["name"].Scalar()` and the
// exception left the importer. Now every yaml-cpp exception in the reader becomes an InputError
// naming the file (and the line when yaml-cpp knows it).
TEST_CASE("fuzz regression: a malformed Timeloop problem is an InputError naming the file") {
  const std::string path = test::source_dir("tests/fixtures/fuzz/timeloop_problem_bad_coefficient.yaml");
  try {
    (void)import_timeloop_problem(path);
    FAIL("expected an InputError");
  } catch (const InputError& e) {
    CHECK(e.where().file == path);
    CHECK(std::string(e.what()).find("timeloop_problem_bad_coefficient.yaml") != std::string::npos);
  }
}
