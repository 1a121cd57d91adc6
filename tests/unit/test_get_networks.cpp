// GET-fusion's searches on real networks priced by the LBDF/BRR group models
// (engine/search/get/network.hpp): every plan passes the models' own plan checks, no search beats
// the exact optimum, and the exact optimum equals brute force on a real 12-operator prefix.
#include <doctest/doctest.h>

#include <algorithm>
#include <limits>
#include <random>

#include "engine/search/get/exact.hpp"
#include "engine/search/get/network.hpp"
#include "engine/search/get/search.hpp"
#include "tests/unit/get_test_networks.hpp"
#include "tests/unit/test_support.hpp"

using namespace mapfuse;
using namespace mapfuse::get;

namespace {

const OpGraph& network(const std::string& name) { return test::get_network(name); }

PartitionPlan as_partition(const Plan& plan) {
  PartitionPlan out;
  for (const Group& g : plan.groups) out.emplace_back(g.begin(), g.end());
  return out;
}

}  // namespace

TEST_CASE("get.network: searches give plans the group models accept, never below the exact optimum") {
  const int64_t beta = 128 * 1024;
  for (const char* net : {"resnet18", "mobilenet_v2", "squeezenet1_0"})
    for (FusionScheme scheme : {FusionScheme::Lbdf, FusionScheme::Brr}) {
      CAPTURE(net);
      CAPTURE(to_string(scheme));
      const OpGraph& g = network(net);
      const GroupModelOptions mopt;
      const NetworkProblem np = make_network_problem(g, scheme, beta, mopt);
      // Fuseable = valid alone, the same rule as the models' own filter.
      const std::vector<char> fuseable = fuseable_nodes(g, scheme, beta, mopt);
      for (int v = 0; v < g.size(); ++v) CHECK(static_cast<bool>(np.problem.fuseable[v]) == static_cast<bool>(fuseable[v]));
      Evaluator ev(np.problem);
      const ExactResult opt = exact_optimum(np.problem, ev, {});
      REQUIRE(opt.optimal);
      GroupWorkspace ws(g);
      auto check = [&](const Plan& plan) {
        const PartitionPlan pp = as_partition(plan);
        const PlanCheck pc = check_plan(g, pp);
        CHECK_MESSAGE(pc.ok, pc.rule, " ", pc.detail);
        const PlanCost cost = plan_cost(g, pp, scheme, beta, mopt, ws);
        CHECK(cost.valid);
        CHECK(static_cast<double>(cost.dram_bytes) == plan.dram);
        CHECK(static_cast<double>(cost.mbu_bytes) == plan.mbu);
        CHECK(plan.dram >= opt.plan.dram);
        size_t covered = 0;
        for (const Group& grp : plan.groups) covered += grp.size();
        CHECK(covered == static_cast<size_t>(np.problem.fuseable_count));
      };
      check(opt.plan);
      // No valid plan is worse than all singletons, the optimum's trivial upper bound.
      const PlanCost singles = plan_cost(g, singleton_plan(fuseable), scheme, beta, mopt, ws);
      CHECK(opt.plan.dram <= static_cast<double>(singles.dram_bytes));
      SearchOptions so;
      so.budget = 300;
      const std::pair<SearchKind, SplitKind> runs[] = {
          {SearchKind::Random, SplitKind::Random}, {SearchKind::Local, SplitKind::Cut},
          {SearchKind::Nsga2, SplitKind::Occlusion}, {SearchKind::Local, SplitKind::Dp}};
      for (auto [kind, split] : runs) {
        auto expl = make_explainer(split);
        const SearchResult r = run_search(np.problem, kind, expl.get(), so);
        CHECK(r.plans == 300);
        check(r.best);
      }
    }
}

TEST_CASE("get.network: the LBDF weight bound never exceeds F_beta on random connected groups") {
  for (const char* net : {"efficientnet_b3", "resnet18", "deeplabv3_mobilenet_v3_large"}) {
    const OpGraph& g = network(net);
    OpGraphModel model(g, FusionScheme::Lbdf, 256 * 1024, {});
    std::mt19937_64 rng(7);
    int checked = 0;
    for (int trial = 0; trial < 300; ++trial) {
      // Grow a connected group from a random node by random neighbours.
      std::vector<int32_t> grp{static_cast<int32_t>(std::uniform_int_distribution<int>(0, g.size() - 1)(rng))};
      const int target = std::uniform_int_distribution<int>(1, 25)(rng);
      for (int step = 0; step < 4 * target && static_cast<int>(grp.size()) < target; ++step) {
        const int32_t v = grp[std::uniform_int_distribution<size_t>(0, grp.size() - 1)(rng)];
        std::vector<int32_t> nb(g.succs(v).begin(), g.succs(v).end());
        nb.insert(nb.end(), g.preds(v).begin(), g.preds(v).end());
        if (nb.empty()) continue;
        const int32_t w = nb[std::uniform_int_distribution<size_t>(0, nb.size() - 1)(rng)];
        if (std::find(grp.begin(), grp.end(), w) == grp.end()) grp.push_back(w);
      }
      std::sort(grp.begin(), grp.end());
      const get::GroupCost c = model.evaluate(grp);
      CHECK(model.monotone_buffer_bound(grp) <= c.buffer);
      ++checked;
    }
    CHECK(checked == 300);
  }
}

TEST_CASE("get.network: exact optimum equals brute force on ResNet-18's and SqueezeNet's first operators") {
  for (const char* net : {"resnet18", "squeezenet1_0"})
    for (FusionScheme scheme : {FusionScheme::Lbdf, FusionScheme::Brr}) {
      CAPTURE(net);
      CAPTURE(to_string(scheme));
      const OpGraph& g = network(net);
      // A prefix of a topological order is closed under predecessors: a sub-problem whose groups
      // are priced by the real model (consumers beyond the prefix count as outside readers).
      const int k = 13;
      std::vector<Edge> edges;
      for (const OpEdge& e : g.edges)
        if (e.to < k) edges.push_back({e.from, e.to});
      OpGraphModel model(g, scheme, 128 * 1024, {});
      const Problem p = make_problem(make_dag(k, edges), model, 128.0 * 1024);
      REQUIRE(p.genes.size() <= 18);
      double best = std::numeric_limits<double>::infinity();
      std::vector<uint8_t> cut(p.genes.size());
      Evaluator ev(p);
      GroupWorkspace ws(g);
      for (uint64_t mask = 0; mask < (uint64_t{1} << p.genes.size()); ++mask) {
        for (size_t b = 0; b < cut.size(); ++b) cut[b] = (mask >> b) & 1;
        const std::vector<Group> groups = decode(p, cut);
        PartitionPlan pp(groups.begin(), groups.end());
        if (!check_plan(g, pp).ok) continue;  // the models' own acyclicity check, independent of ours
        double dram = 0;
        bool ok = true;
        for (const Group& grp : groups) {
          const get::GroupCost c = model.evaluate(grp);
          ok = ok && c.supported && c.buffer < p.beta;
          dram += c.dram;
        }
        if (ok) best = std::min(best, dram);
      }
      const ExactResult r = exact_optimum(p, ev, {});
      REQUIRE(r.optimal);
      CHECK(r.plan.dram == best);
    }
}
