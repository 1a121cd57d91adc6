// The FFM baselines (engine/search/ffm/baselines.hpp) search FFM's own fused mapspace with its
// cost model: every result is a LoopTree that evaluate_fused prices as reported, never better
// than FFM's exact optimum, and random sampling finds that optimum on a space small enough.
#include <doctest/doctest.h>

#include "engine/arch/arch_toml.hpp"
#include "engine/common/error.hpp"
#include "engine/cost/fused.hpp"
#include "engine/search/ffm/baselines.hpp"
#include "engine/search/ffm/ffm.hpp"
#include "test_support.hpp"

using namespace mapfuse;
using namespace mapfuse::ffm;

namespace {

// tests/fixtures/ffm/small_core.toml: DRAM > Buffer (64 words) > Reg (8 words).
Core small_core() { return load_architecture(test::source_dir("tests/fixtures/ffm/small_core.toml")).cores.at(0); }

// n matmuls of size^3.
Workload chain(int n, int64_t size) {
  return test::matmul_chain(size, std::vector<std::pair<int64_t, int64_t>>(static_cast<size_t>(n), {size, size}));
}

}  // namespace

TEST_CASE("ffm baselines: valid LoopTrees priced as reported, never better than FFM, monotone traces, deterministic") {
  const Core c = small_core();
  const Workload w = chain(3, 4);
  const FfmResult exact = ffm_search(w, c, {});
  for (Objective obj : {Objective::Edp, Objective::Energy}) {
    const FfmSolution* opt = exact.best(obj);
    REQUIRE(opt != nullptr);
    const double optimum = obj == Objective::Edp ? opt->edp() : opt->energy_pj;
    for (Baseline b : {Baseline::Random, Baseline::Annealing, Baseline::Genetic}) {
      INFO(to_string(b) << " " << to_string(obj));
      BaselineOptions o;
      o.objective = obj;
      o.time_budget_s = 60;
      o.max_evaluations = 1500;
      o.seed = 7;
      o.verify = true;  // every point also priced by evaluate_fused on its LoopTree
      const BaselineResult r = run_baseline(w, c, b, o);
      REQUIRE(r.found);
      CHECK(r.stopped_by == "evaluations");
      CHECK(r.evaluations == 1500);
      CHECK(!check_looptree(r.tree, w, c));
      const FusedCost fc = evaluate_fused(r.tree, w, c);
      CHECK(fc.valid);
      CHECK(fc.energy_pj == r.energy_pj);
      CHECK(fc.cycles == r.cycles);
      CHECK(r.objective == (obj == Objective::Edp ? fc.edp() : fc.energy_pj));
      CHECK(r.objective >= optimum * (1 - 1e-12));  // FFM is exact
      REQUIRE(!r.trace.empty());
      for (size_t i = 1; i < r.trace.size(); ++i) {
        CHECK(r.trace[i].best < r.trace[i - 1].best);
        CHECK(r.trace[i].evaluations > r.trace[i - 1].evaluations);
      }
      CHECK(r.trace.back().best == r.objective);
      const BaselineResult again = run_baseline(w, c, b, o);
      CHECK(again.objective == r.objective);
      CHECK(again.trace.size() == r.trace.size());
    }
  }
}

TEST_CASE("ffm baselines: incremental pricing equals evaluate_fused on every point, valid or over capacity") {
  // Four 4x4x4 matmuls on a 64-word buffer: many sampled points overflow it, others fuse groups of
  // two to four Einsums; verify throws on the first point priced differently.
  const Core c = small_core();
  const Workload w = chain(4, 4);
  for (Baseline b : {Baseline::Random, Baseline::Annealing, Baseline::Genetic}) {
    INFO(to_string(b));
    BaselineOptions o;
    o.time_budget_s = 60;
    o.max_evaluations = 3000;
    o.seed = 3;
    o.verify = true;
    BaselineResult r;
    CHECK_NOTHROW(r = run_baseline(w, c, b, o));
    CHECK(r.valid > 0);
    CHECK(r.valid < r.evaluations);  // some points were over capacity and were priced invalid too
  }
}

TEST_CASE("ffm baselines: on a tiny fused mapspace random sampling reaches FFM's optimum") {
  const Core c = small_core();
  const Workload w = chain(2, 2);
  const FfmResult exact = ffm_search(w, c, {});
  const FfmSolution* opt = exact.best(Objective::Edp);
  REQUIRE(opt != nullptr);
  BaselineOptions o;
  o.time_budget_s = 60;
  o.max_evaluations = 20000;
  const BaselineResult r = run_baseline(w, c, Baseline::Random, o);
  REQUIRE(r.found);
  CHECK(r.objective == doctest::Approx(opt->edp()).epsilon(1e-12));
}

TEST_CASE("ffm baselines: bad input is an InputError") {
  const Core c = small_core();
  const Workload w = chain(2, 2);
  BaselineOptions o;
  o.time_budget_s = 0;
  CHECK_THROWS_WITH_AS(run_baseline(w, c, Baseline::Random, o), doctest::Contains("positive"), InputError);
  o.time_budget_s = 1;
  o.max_evaluations = -5;
  CHECK_THROWS_AS(run_baseline(w, c, Baseline::Genetic, o), InputError);
  CHECK_THROWS_WITH_AS(parse_baseline("randm"), doctest::Contains("did you mean"), InputError);
  CHECK(parse_baseline("sa") == Baseline::Annealing);
}

TEST_CASE("ffm baselines: mapspace constraints hold the baselines to FFM's constrained mapspace") {
  // MM0 may keep only its weight in the Buffer (so T1 cannot be backed there by MM0's side), and
  // every Einsum's registers must take all of K: FFM's constrained optimum is worse than its free
  // one, random sampling on the tiny space reaches exactly the constrained optimum, and SA and GA
  // never beat it.
  const Core c = small_core();
  const Workload w = chain(2, 2);
  const std::vector<ConstraintSpec> cs = parse_constraints(R"(
[[constraint]]
level = "Buffer"
layer = "MM0"
keep = ["weight"]
[[constraint]]
level = "Reg"
min_factors = { K = 2 }
)",
                                                           "baseline_constraints.toml");
  FfmOptions fo;
  fo.pmappings.constraints = cs;
  const FfmResult free = ffm_search(w, c, {});
  const FfmResult constrained = ffm_search(w, c, fo);
  REQUIRE(free.best(Objective::Edp) != nullptr);
  REQUIRE(constrained.best(Objective::Edp) != nullptr);
  const double optimum = constrained.best(Objective::Edp)->edp();
  CHECK(optimum > free.best(Objective::Edp)->edp());
  for (Baseline b : {Baseline::Random, Baseline::Annealing, Baseline::Genetic}) {
    INFO(to_string(b));
    BaselineOptions o;
    o.time_budget_s = 60;
    o.max_evaluations = b == Baseline::Random ? 20000 : 3000;
    o.constraints = cs;
    o.verify = true;
    const BaselineResult r = run_baseline(w, c, b, o);
    REQUIRE(r.found);
    CHECK(r.objective >= optimum * (1 - 1e-12));
    if (b == Baseline::Random) CHECK(r.objective == doctest::Approx(optimum).epsilon(1e-12));
    // The best tree keeps every Einsum's K whole in the registers.
    for (const FusionGroup& g : r.tree.groups)
      for (const Mapping& m : g.mappings) {
        int64_t k_at_reg = 1;
        for (const Loop& l : m.levels[0].loops)
          if (l.rank == 2) k_at_reg *= l.factor;
        CHECK(k_at_reg == 2);
      }
  }
  // A constraint on a layer the workload does not have is an InputError naming file:line.
  BaselineOptions bad;
  bad.constraints = parse_constraints("[[constraint]]\nlevel = \"Buffer\"\nlayer = \"nope\"\n", "bad.toml");
  CHECK_THROWS_WITH_AS(run_baseline(w, c, Baseline::Random, bad), doctest::Contains("bad.toml:1"), InputError);
}
