// Cross-method pricing (engine/search/fadiff/cross.hpp): GET-fusion groups mapped onto the FADiff
// workload's layer edges, and priced by FADiff's exact network evaluator on a fixed mapping.
#include <doctest/doctest.h>

#include <random>
#include <string>
#include <vector>

#include "engine/common/error.hpp"
#include "engine/cost/model.hpp"
#include "engine/search/fadiff/baselines.hpp"
#include "engine/search/fadiff/cross.hpp"
#include "engine/search/fadiff/optimize.hpp"
#include "engine/workload/zoo.hpp"

#include "conv_chain.hpp"
#include "test_support.hpp"

using namespace mapfuse;

namespace {

// x -> a (Conv "c1", its Relu folded) -> b ("c2") -> c (an unnamed ONNX Conv: Einsum "Conv:t3").
Workload chain() { return test::conv_chain3("Conv:t3"); }

// The same network as GET sees it: c1, its Relu r1, c2, and the unnamed conv named by its output.
OpGraph chain_graph() {
  OpGraph g;
  g.name = "chain3";
  g.network_inputs.push_back({16, 14, 14});
  auto node = [&](const char* name, const char* op, OpClass cls, Shape3 out) {
    OpNode n;
    n.name = name;
    n.op_type = op;
    n.cls = cls;
    n.out = out;
    const int p = g.size() - 1;
    n.inputs = {p < 0 ? OpInput{-1, 0, g.network_inputs[0]} : OpInput{p, -1, g.nodes[p].out}};
    g.nodes.push_back(n);
  };
  node("c1", "Conv", OpClass::Conv, {32, 14, 14});
  node("r1", "Relu", OpClass::Unary, {32, 14, 14});
  node("c2", "Conv", OpClass::Conv, {64, 14, 14});
  node("t3", "Conv", OpClass::Conv, {16, 7, 7});
  finalize(g);
  return g;
}

}  // namespace

TEST_CASE("get cross: GET groups become exactly the FADiff edges inside one group") {
  const Workload w = chain();
  const OpGraph g = chain_graph();
  const SearchSpace s(w, test::preset_core("fadiff_large"));
  REQUIRE(s.n_edges() == 2);  // c1 -> c2, c2 -> Conv:t3
  CHECK(op_node_of_einsum(g, "c2") == 2);
  CHECK(op_node_of_einsum(g, "Conv:t3") == 3);
  CHECK_THROWS_AS(op_node_of_einsum(g, "c9"), InputError);
  using G = std::vector<std::vector<int32_t>>;
  CHECK(fused_edges_of_groups(s.net(), g, G{{0, 1, 2}, {3}}) == std::vector<uint8_t>{1, 0});  // {a,b}: a->b
  CHECK(fused_edges_of_groups(s.net(), g, G{{0, 1}, {2, 3}}) == std::vector<uint8_t>{0, 1});
  CHECK(fused_edges_of_groups(s.net(), g, G{{0, 1, 2, 3}}) == std::vector<uint8_t>{1, 1});
  CHECK(fused_edges_of_groups(s.net(), g, G{{0}, {1}, {2}, {3}}) == std::vector<uint8_t>{0, 0});
  CHECK(fused_edges_of_groups(s.net(), g, G{{1}, {3}}) == std::vector<uint8_t>{0, 0});  // c1, c2 in no group
  CHECK_THROWS_AS(fused_edges_of_groups(s.net(), g, G{{0, 7}}), InputError);
}

TEST_CASE("get cross: pricing a fusion on a fixed mapping matches the evaluator and the exact model's DRAM") {
  const Workload w = chain();
  const OpGraph g = chain_graph();
  const Core& c = test::preset_core("fadiff_large");
  const SearchSpace s(w, c);
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> U(0, 1);
  std::vector<double> genes(s.n_genes()), x(s.net().n_vars, 1.0);
  for (double& v : genes) v = U(rng);
  std::vector<uint8_t> ignored(2);
  decode_genes(s, genes, x, ignored);
  using G = std::vector<std::vector<int32_t>>;
  const FusionPrice none = price_fusion(s, x, fused_edges_of_groups(s.net(), g, G{{0}, {1}, {2}, {3}}), false);
  const FusionPrice ab = price_fusion(s, x, fused_edges_of_groups(s.net(), g, G{{0, 1, 2}, {3}}), false);
  ExactNetworkEvaluator ev(s, false);
  std::vector<double> x0 = x, x1 = x;
  const std::vector<uint8_t> zero{0, 0}, first{1, 0};
  const auto r0 = ev.evaluate(x0, zero);
  const auto r1 = ev.evaluate(x1, first);
  CHECK(ab.energy_pj == r1.energy_pj);
  CHECK(ab.cycles == r1.cycles);
  CHECK(ab.fused == std::vector<uint8_t>{1, 0});
  CHECK(ab.fused_edges == 1);
  CHECK(ab.groups.size() == 2);
  CHECK(none.energy_pj == r0.energy_pj);
  CHECK(none.cycles == r0.cycles);
  CHECK(none.fused_edges == 0);
  CHECK(none.groups.size() == 3);
  // Unfused DRAM traffic is the exact model's, layer by layer; fusing a->b removes a's writes and
  // drains and b's reads of a from it.
  const int D = static_cast<int>(c.levels.size()) - 1;
  double dram = 0;
  int64_t a_out = 0, b_in = 0;
  for (int v = 0; v < 3; ++v) {
    const RelaxedLayer& L = s.net().layers[v];
    const CostResult r = evaluate(compile_plan(w.einsums[v], c), flat_from_factors(L, x.data() + s.net().var_begin[v]));
    REQUIRE(r.valid());
    for (int t = 0; t < L.n_tensors; ++t) dram += static_cast<double>(r.access[D][t].total());
    if (v == 0) a_out = r.access[D][L.output].updates + r.access[D][L.output].reads;
    if (v == 1) b_in = r.access[D][L.input].reads;
  }
  CHECK(a_out > 0);
  CHECK(b_in > 0);
  CHECK(none.dram_words == dram);
  CHECK(ab.dram_words == dram - static_cast<double>(a_out + b_in));
}

TEST_CASE("get cross: FADiff's own point re-priced under its own fusion gives its reported cost") {
  const Workload w = chain();
  const Core& c = test::preset_core("fadiff_large");
  OptimizeOptions o;
  o.time_budget_s = 600;
  o.max_evaluations = 300;
  o.seed = 5;
  const OptimizeResult r = optimize_network(w, c, Method::FADiff, o);
  REQUIRE(r.found);
  const SearchSpace s(w, c);
  REQUIRE(r.factors.size() == static_cast<size_t>(s.net().n_vars));
  const FusionPrice p = price_fusion(s, r.factors, r.fused);
  CHECK(p.energy_pj == doctest::Approx(r.energy_pj).epsilon(1e-12));
  CHECK(p.cycles == doctest::Approx(r.cycles).epsilon(1e-12));
  CHECK(p.groups == r.groups);
  CHECK_THROWS_AS(price_fusion(s, r.factors, std::vector<uint8_t>{1}), InputError);
}
