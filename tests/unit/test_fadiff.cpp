// FADiff's optimizer and its baselines (engine/search/fadiff): the Gumbel-softmax straight-through
// estimator, the shared encoding and its exact decode (fusion adjustment, group capacity repair),
// determinism, validity of every reported mapping, and the methods' relative quality.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "engine/arch/arch_toml.hpp"
#include "engine/common/error.hpp"
#include "engine/cost/model.hpp"
#include "engine/search/fadiff/baselines.hpp"
#include "engine/search/fadiff/encoding.hpp"
#include "engine/search/fadiff/gumbel.hpp"
#include "engine/search/fadiff/optimize.hpp"
#include "engine/workload/zoo.hpp"

#include "conv_chain.hpp"
#include "test_support.hpp"

using namespace mapfuse;

namespace {

const Core& core(const std::string& name) { return test::preset_core(name); }

Workload conv_chain() { return test::conv_chain3(); }

std::vector<double> random_genes(const SearchSpace& s, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> U(0, 1);
  std::vector<double> g(s.n_genes());
  for (double& v : g) v = U(rng);
  return g;
}

OptimizeOptions eval_budget(int64_t n, uint64_t seed) {
  OptimizeOptions o;
  o.time_budget_s = 600;  // the evaluation budget ends every run here
  o.max_evaluations = n;
  o.seed = seed;
  return o;
}

// Exact per-layer costs of a result's mappings, no fusion adjustment.
void unfused_totals(const OptimizeResult& r, const Workload& w, const Core& c, double& energy, double& cycles) {
  energy = cycles = 0;
  for (size_t v = 0; v < r.layers.size(); ++v) {
    const int ei = w.einsum_index(r.layers[v]);
    const CostResult cr = evaluate(compile_plan(w.einsums[ei], c), flatten(r.mappings[v]));
    REQUIRE_MESSAGE(cr.valid(), r.layers[v]);
    energy += static_cast<double>(w.count(ei)) * cr.energy_pj;
    cycles += static_cast<double>(w.count(ei)) * cr.cycles;
  }
}

}  // namespace

TEST_CASE("fadiff: Gumbel-softmax straight-through picks a divisor and passes a gradient") {
  const int64_t c[] = {1, 2, 4, 8, 16};
  // No noise: the nearest candidate on the log scale (ln 5 is nearer ln 4 than ln 8).
  GumbelPick p = gumbel_softmax_st(c, 5, std::log(5.0), 2, 1, nullptr);
  CHECK(p.index == 2);
  CHECK(p.value == 4);
  CHECK(p.soft > 2);
  CHECK(p.soft < 8);
  CHECK(p.dsoft_du > 0);  // 2 alpha Cov_p(d, ln d) / tau > 0
  // The soft derivative is the derivative of Eq. 3 (central differences, same noise).
  const double g[] = {0.3, -0.2, 0.1, 0.5, -0.4};
  for (Proximity prox : {Proximity::Log, Proximity::Linear}) {
    const double u = std::log(6.0), h = 1e-6, alpha = prox == Proximity::Log ? 2 : 0.05;
    const GumbelPick a = gumbel_softmax_st(c, 5, u, alpha, 0.7, g, prox);
    const double fd = (gumbel_softmax_st(c, 5, u + h, alpha, 0.7, g, prox).soft -
                       gumbel_softmax_st(c, 5, u - h, alpha, 0.7, g, prox).soft) / (2 * h);
    CHECK(a.dsoft_du == doctest::Approx(fd).epsilon(1e-6));
    CHECK(a.dsoft_du > 0);
  }
  // Noise moves the hard choice (forward discrete) ...
  const double big[] = {0, 0, 0, 10, 0};
  p = gumbel_softmax_st(c, 5, std::log(5.0), 2, 1, big);
  CHECK(p.value == 8);
  CHECK(p.dsoft_du >= 0);
  // ... until the temperature (which scales the noise in the optimizer) collapses it to argmax l.
  p = gumbel_softmax_st(c, 5, std::log(5.0), 2, 0.01, big, Proximity::Log, 0.01);
  CHECK(p.value == 4);
  // One candidate: no gradient.
  p = gumbel_softmax_st(c, 1, 2.0, 2, 1, nullptr);
  CHECK(p.value == 1);
  CHECK(p.dsoft_du == 0);
}

TEST_CASE("fadiff: every decoded point is a valid exact mapping; no fusion = the exact model's sum") {
  const Workload w = zoo_workload("resnet18");
  for (const char* arch : {"fadiff_large", "fadiff_small"}) {
    const Core& c = core(arch);
    const SearchSpace s(w, c);
    CHECK(s.n_layers() == 21);
    ExactNetworkEvaluator ev(s, false);
    std::mt19937_64 rng(5);
    std::vector<double> x(s.net().n_vars, 1.0);
    std::vector<uint8_t> fused(s.n_edges()), none(s.n_edges(), 0);
    for (int rep = 0; rep < 20; ++rep) {
      decode_genes(s, random_genes(s, rng), x, fused);
      const auto r = ev.evaluate(x, none);
      REQUIRE(r.valid);
      double E = 0, C = 0;
      for (int v = 0; v < s.n_layers(); ++v) {
        const RelaxedLayer& L = s.net().layers[v];
        const Einsum& e = w.einsums[L.einsum];
        const Mapping mp = ev.mapping(v, x.data() + s.net().var_begin[v], 0);
        CHECK_FALSE(check_structure(mp, e, c).has_value());  // products, fan-out, keeps
        const CostResult cr = evaluate(compile_plan(e, c), flatten(mp));
        CHECK(cr.valid());  // capacity (after repair)
        E += L.count * cr.energy_pj;
        C += L.count * cr.cycles;
      }
      CHECK(r.energy_pj == doctest::Approx(E).epsilon(1e-12));
      CHECK(r.cycles == doctest::Approx(C).epsilon(1e-12));
    }
  }
}

TEST_CASE("fadiff: a fused edge removes the intermediate's DRAM traffic and charges its on-chip copy") {
  const Workload w = conv_chain();
  const Core& c = core("fadiff_large");
  const SearchSpace s(w, c);
  REQUIRE(s.n_edges() == 2);
  ExactNetworkEvaluator ev(s, false);
  std::mt19937_64 rng(11);
  std::vector<double> x(s.net().n_vars, 1.0);
  std::vector<uint8_t> fused(2);
  decode_genes(s, random_genes(s, rng), x, fused);
  const std::vector<uint8_t> none{0, 0}, first{1, 0};
  const auto r0 = ev.evaluate(x, none);
  const auto r1 = ev.evaluate(x, first);
  REQUIRE(r1.fused[0] == 1);  // the big scratchpad holds both layers' tiles
  const int D = 3, F = 2;     // DRAM, scratchpad
  const RelaxedLayer& P = s.net().layers[0];
  const RelaxedLayer& Q = s.net().layers[1];
  const CostResult p = evaluate(compile_plan(w.einsums[0], c), flat_from_factors(P, x.data()));
  const CostResult q = evaluate(compile_plan(w.einsums[1], c), flat_from_factors(Q, x.data() + s.net().var_begin[1]));
  const auto& out = p.access[D][P.output];
  const auto& in_d = q.access[D][Q.input];
  const auto& in_f = q.access[F][Q.input];
  CHECK(out.updates > 0);
  CHECK(in_d.reads > 0);
  const double dE = -(static_cast<double>(out.updates) * c.levels[D].update_pj + static_cast<double>(out.reads) * c.levels[D].read_pj) +
                    static_cast<double>(out.updates) * c.levels[F].write_pj + static_cast<double>(out.reads) * c.levels[F].read_pj -
                    static_cast<double>(in_d.reads) * c.levels[D].read_pj - static_cast<double>(in_f.fills) * c.levels[F].write_pj;
  CHECK(r1.energy_pj - r0.energy_pj == doctest::Approx(dE).epsilon(1e-9));
  CHECK(r1.energy_pj < r0.energy_pj);
  CHECK(r1.cycles <= r0.cycles);
  CHECK(r1.dram_words_saved[0] == static_cast<double>(out.updates + out.reads));
  CHECK(r1.dram_words_saved[1] == static_cast<double>(in_d.reads));
  CHECK(r1.dram_words_saved[2] == 0);
}

TEST_CASE("fadiff: repair splits an over-capacity fusion group at the edge that leaves the smaller part") {
  const Workload w = conv_chain();
  const Core& c = core("fadiff_small");  // 8 KB scratchpad
  const SearchSpace s(w, c);
  ExactNetworkEvaluator ev(s, false);
  const int F = 2;
  const double cap = static_cast<double>(c.levels[F].entries);
  std::mt19937_64 rng(3);
  std::vector<double> x(s.net().n_vars, 1.0);
  std::vector<uint8_t> fused(2);
  const std::vector<uint8_t> all{1, 1};
  int found = 0;
  for (int rep = 0; rep < 5000 && found < 3; ++rep) {
    decode_genes(s, random_genes(s, rng), x, fused);
    ev.evaluate(x, std::vector<uint8_t>{0, 0});  // capacity repair of each layer alone
    double occ[3];
    for (int v = 0; v < 3; ++v) {
      const CostResult cr = evaluate(compile_plan(w.einsums[v], c),
                                     flat_from_factors(s.net().layers[v], x.data() + s.net().var_begin[v]));
      REQUIRE(cr.valid());
      occ[v] = static_cast<double>(cr.level_occupancy[F]);
    }
    if (occ[0] + occ[1] + occ[2] <= cap) continue;  // want a group of three that does not fit
    if (occ[0] + occ[1] > cap && occ[1] + occ[2] > cap) continue;  // and a split that fixes it with one cut
    ++found;
    const auto r = ev.evaluate(x, all);
    REQUIRE(r.valid);
    CHECK(r.group_splits == 1);
    // The cut leaves the smaller largest part: edge 0 leaves {c2, c3}, edge 1 leaves {c1, c2}.
    const int expect = std::max(occ[0], occ[1] + occ[2]) <= std::max(occ[0] + occ[1], occ[2]) ? 0 : 1;
    CHECK(r.fused[expect] == 0);
    CHECK(r.fused[1 - expect] == 1);
    for (const auto& g : ev.groups(r.fused)) {
      double sum = 0;
      for (int v : g) sum += occ[v];
      CHECK(sum <= cap);
    }
  }
  CHECK(found == 3);
}

TEST_CASE("fadiff: optimize_network is deterministic for a seed and reports valid exact mappings") {
  const Workload w = conv_chain();
  const Core& c = core("fadiff_small");
  for (Method m : {Method::FADiff, Method::DosaStyle, Method::Genetic, Method::Bayesian}) {
    CAPTURE(to_string(m));
    const OptimizeOptions o = eval_budget(m == Method::Bayesian ? 60 : 800, 7);
    const OptimizeResult a = optimize_network(w, c, m, o);
    const OptimizeResult b = optimize_network(w, c, m, o);
    REQUIRE(a.found);
    CHECK(a.stopped_by == "evaluations");
    CHECK(a.evaluations >= o.max_evaluations);
    CHECK(a.evaluations <= o.max_evaluations + 2);  // a step's decode may finish past the budget
    CHECK(a.edp == b.edp);
    CHECK(a.fused == b.fused);
    CHECK(a.mappings == b.mappings);
    REQUIRE(a.trace.size() == b.trace.size());
    for (size_t i = 0; i < a.trace.size(); ++i) {
      CHECK(a.trace[i].evaluations == b.trace[i].evaluations);
      CHECK(a.trace[i].best_edp == b.trace[i].best_edp);
    }
    // The trace is monotone and ends at the reported EDP.
    for (size_t i = 1; i < a.trace.size(); ++i) CHECK(a.trace[i].best_edp <= a.trace[i - 1].best_edp);
    CHECK(a.trace.back().best_edp == a.edp);
    // Valid exact mappings; without fusion the reported cost is the exact model's sum, with fusion
    // it is lower by the removed DRAM traffic.
    double E, C;
    unfused_totals(a, w, c, E, C);
    if (std::count(a.fused.begin(), a.fused.end(), 1) == 0) {
      CHECK(a.energy_pj == doctest::Approx(E).epsilon(1e-12));
      CHECK(a.cycles == doctest::Approx(C).epsilon(1e-12));
    } else {
      CHECK(a.energy_pj < E);
      CHECK(a.dram_words_saved > 0);
    }
    // Another seed explores differently.
    const OptimizeResult d = optimize_network(w, c, m, eval_budget(m == Method::Bayesian ? 60 : 800, 8));
    CHECK(d.trace.front().best_edp != a.trace.front().best_edp);
  }
}

TEST_CASE("fadiff: not worse than DOSA-style under the same evaluation budget on a small network") {
  // Same seeds give both the same screened start points; FADiff then searches tiling and fusion
  // jointly through the straight-through estimator, DOSA-style rounds continuous factors.
  // Large Gemmini (512 KB scratchpad): FADiff fuses both edges and wins on every seed (measured
  // ratios 0.60-0.84 at 3000 evaluations). Small Gemmini (8 KB): no per-seed guarantee (seed 4 loses
  // by 12 %, unfused: the group capacity leaves little room and both methods end in different
  // local optima), so the check is on the geometric mean (measured 0.85).
  const Workload w = conv_chain();
  double log_ratio_small = 0;
  for (const std::string arch : {"fadiff_large", "fadiff_small"}) {
    for (uint64_t seed = 1; seed <= 5; ++seed) {
      CAPTURE(arch);
      CAPTURE(seed);
      const OptimizeResult f = optimize_network(w, core(arch), Method::FADiff, eval_budget(3000, seed));
      const OptimizeResult d = optimize_network(w, core(arch), Method::DosaStyle, eval_budget(3000, seed));
      CHECK(std::count(d.fused.begin(), d.fused.end(), 1) == 0);  // DOSA-style never fuses
      if (arch == "fadiff_large") {
        CHECK(f.edp <= d.edp);
        CHECK(std::count(f.fused.begin(), f.fused.end(), 1) > 0);
        CHECK(f.dram_words_saved > 0);
      } else {
        log_ratio_small += std::log(f.edp / d.edp) / 5;
      }
    }
  }
  CHECK(log_ratio_small < 0);
}

TEST_CASE("fadiff: GA and BO find valid mappings and improve on their first sample") {
  const Workload w = zoo_workload("resnet18");
  const Core& c = core("fadiff_large");
  for (Method m : {Method::Genetic, Method::Bayesian}) {
    CAPTURE(to_string(m));
    const OptimizeResult r = optimize_network(w, c, m, eval_budget(m == Method::Genetic ? 1000 : 60, 3));
    REQUIRE(r.found);
    CHECK(r.mappings.size() == 21);
    CHECK(r.trace.front().evaluations == 1);
    CHECK(r.edp < 0.5 * r.trace.front().best_edp);
    double E, C;
    unfused_totals(r, w, c, E, C);  // every mapping valid in the exact model
    CHECK(E > 0);
  }
}

TEST_CASE("fadiff: bad input is an InputError with a clear message") {
  const Workload w = conv_chain();
  const Core& c = core("fadiff_large");
  OptimizeOptions o;
  o.time_budget_s = 0;
  CHECK_THROWS_WITH_AS(optimize_network(w, c, Method::FADiff, o), doctest::Contains("time budget must be a positive"),
                       InputError);
  o.time_budget_s = std::nan("");
  CHECK_THROWS_AS(optimize_network(w, c, Method::Genetic, o), InputError);
  o.time_budget_s = 1;
  o.max_evaluations = -1;
  CHECK_THROWS_WITH_AS(optimize_network(w, c, Method::Bayesian, o), doctest::Contains("evaluation budget"), InputError);
  o.max_evaluations = 0;
  CHECK_THROWS_WITH_AS(parse_method("fadif"), doctest::Contains("did you mean 'fadiff'"), InputError);
  CHECK(parse_method("bo") == Method::Bayesian);
  CHECK_THROWS_WITH_AS(optimize_network(w, c, static_cast<Method>(9), o), doctest::Contains("unknown method"), InputError);
  // A scratchpad of one word cannot hold a weight and an input word at once: no mapping fits.
  Core tiny = c;
  tiny.levels[2].entries = 1;
  CHECK_THROWS_WITH_AS(optimize_network(w, tiny, Method::FADiff, o), doctest::Contains("is too small"), InputError);
  // DRAM that may not keep outputs: no structurally valid mapping in the space.
  Core nokeep = c;
  nokeep.levels[3].may_keep = role_bit(TensorRole::Input) | role_bit(TensorRole::Weight);
  CHECK_THROWS_WITH_AS(optimize_network(w, nokeep, Method::DosaStyle, o), doctest::Contains("no valid factorisation"),
                       InputError);
}
