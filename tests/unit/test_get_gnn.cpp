// GET-fusion's GNN (engine/search/get/gnn/): the classifier data carries F_β's verdicts, the
// shipped models classify held-out groups, training is deterministic, bad model files are
// rejected with the file named, and GNNExplainer, PGExplainer and RG-Explainer return edges of the
// group that Algorithm 1 turns into valid plans.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "engine/search/get/gnn/dataset.hpp"
#include "engine/search/get/gnn/explainers.hpp"
#include "engine/search/get/gnn/gnn.hpp"
#include "engine/search/get/gnn/model_file.hpp"
#include "engine/search/get/network.hpp"
#include "engine/search/get/partition.hpp"
#include "tests/unit/get_test_networks.hpp"
#include "tests/unit/test_support.hpp"

using namespace mapfuse;
using namespace mapfuse::get;

namespace {

const OpGraph& network(const std::string& name) { return test::get_network(name); }

std::vector<gnn::GraphSample> samples_of(const gnn::Dataset& d, const std::vector<const OpGraph*>& graphs, int split) {
  std::vector<gnn::GraphSample> out;
  std::vector<gnn::FeatureTable> tables;
  for (const OpGraph* g : graphs) tables.emplace_back(*g, d.scheme);
  for (const gnn::LabelledGroup& s : d.samples) {
    if (split >= 0 && s.split != split) continue;
    out.push_back(tables[s.network].sample(s.nodes, s.buffer_kb * 1024));
    out.back().label = s.valid ? 1 : 0;
  }
  return out;
}

// A small classifier trained for one epoch on SqueezeNet 1.0's groups: fast, not accurate.
gnn::Classifier tiny_classifier(FusionScheme scheme, int64_t groups, int hidden, uint64_t seed = 1) {
  const OpGraph& g = network("squeezenet1_0");
  gnn::DatasetSpec spec;
  spec.scheme = scheme;
  spec.groups_per_network = groups;
  const std::vector<gnn::GraphSample> all = samples_of(gnn::make_dataset({&g}, spec), {&g}, -1);
  gnn::TrainOptions opt;
  opt.epochs = 1;
  opt.shape.hidden = hidden;
  opt.seed = seed;
  return gnn::train_classifier(scheme, all, {}, opt);
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream b;
  b << in.rdbuf();
  return b.str();
}

}  // namespace

TEST_CASE("get.gnn: dataset labels are the partition search's F_β verdicts at every buffer size") {
  for (FusionScheme scheme : {FusionScheme::Lbdf, FusionScheme::Brr}) {
    CAPTURE(to_string(scheme));
    const OpGraph& g = network("resnet18");
    gnn::DatasetSpec spec;
    spec.scheme = scheme;
    spec.groups_per_network = 60;
    const gnn::Dataset d = gnn::make_dataset({&g}, spec);
    REQUIRE(d.samples.size() == 60 * gnn::kTrainingBuffersKb.size());
    std::set<Group> groups;
    int64_t valid = 0;
    for (size_t i = 0; i < d.samples.size(); ++i) {
      const gnn::LabelledGroup& s = d.samples[i];
      CHECK(s.buffer_kb == gnn::kTrainingBuffersKb[i % 5]);
      CHECK(s.nodes.size() >= 2);
      CHECK(static_cast<int32_t>(s.nodes.size()) <= spec.max_group_nodes);
      CHECK(std::is_sorted(s.nodes.begin(), s.nodes.end()));
      groups.insert(s.nodes);
      // The verdict of the search's own problem at that β (a different path: Problem + Evaluator).
      const NetworkProblem np = make_network_problem(g, scheme, static_cast<int64_t>(s.buffer_kb * 1024));
      Evaluator ev(np.problem);
      const get::GroupCost c = ev.cost(s.nodes);
      CHECK(s.valid == ev.valid(c));
      CHECK(s.buffer_need == c.buffer);
      valid += s.valid;
      // One split per group, shared by its buffer sizes.
      CHECK(s.split == d.samples[i - i % 5].split);
      if (scheme == FusionScheme::Lbdf && i % 5 > 0 && d.samples[i - 1].valid) CHECK(s.valid);  // F_β is β-free
      // A random plan's group is one weakly connected component.
      Workspace ws;
      std::vector<Group> comps;
      components(np.problem.dag, s.nodes, ws, comps);
      CHECK(comps.size() == 1);
    }
    CHECK(groups.size() == 60);
    // Both classes occur (otherwise the classifier has nothing to learn).
    CHECK(valid > 20);
    CHECK(valid < static_cast<int64_t>(d.samples.size()) - 20);
  }
}

TEST_CASE("get.gnn: the shipped classifiers exceed 95 % accuracy and F1 on their held-out test split") {
  for (FusionScheme scheme : {FusionScheme::Lbdf, FusionScheme::Brr}) {
    CAPTURE(to_string(scheme));
    const gnn::Classifier c = gnn::Classifier::shipped(scheme);
    CHECK(c.shape().layers == 4);
    CHECK(c.shape().hidden == 128);
    // The dataset `mapfuse get-train` made the model from (same default spec and seed), test split only.
    std::vector<const OpGraph*> graphs;
    for (const std::string& n : gnn::training_networks(scheme)) graphs.push_back(&network(n));
    gnn::DatasetSpec spec;
    spec.scheme = scheme;
    const gnn::Dataset d = gnn::make_dataset(graphs, spec);
    const std::vector<gnn::GraphSample> test = samples_of(d, graphs, 2);
    REQUIRE(test.size() > 300);
    const gnn::Metrics m = c.evaluate(test);
    MESSAGE(to_string(scheme), ": test accuracy ", m.accuracy, ", F1 ", m.f1, " on ", m.samples, " samples");
    CHECK(m.accuracy > 0.95);
    CHECK(m.f1 > 0.95);
  }
}

TEST_CASE("get.gnn: training is deterministic for a seed") {
  const OpGraph& g = network("squeezenet1_0");
  gnn::DatasetSpec spec;
  spec.groups_per_network = 40;
  const gnn::Dataset d = gnn::make_dataset({&g}, spec);
  const std::vector<gnn::GraphSample> all = samples_of(d, {&g}, -1);
  gnn::TrainOptions opt;
  opt.epochs = 2;
  opt.shape.hidden = 16;
  const gnn::Classifier a = gnn::train_classifier(FusionScheme::Lbdf, all, {}, opt);
  const gnn::Classifier b = gnn::train_classifier(FusionScheme::Lbdf, all, {}, opt);
  CHECK(a.parameters() == b.parameters());
  CHECK(a.predict(all) == b.predict(all));
  opt.seed = 2;
  const gnn::Classifier other = gnn::train_classifier(FusionScheme::Lbdf, all, {}, opt);
  CHECK(a.parameters() != other.parameters());
  // Save and load give the same weights back.
  const std::string path = (std::filesystem::temp_directory_path() / "mapfuse_test_gnn_roundtrip.gnn").string();
  a.save(path);
  CHECK(gnn::Classifier::load(path, FusionScheme::Lbdf).parameters() == a.parameters());
  std::filesystem::remove(path);
}

TEST_CASE("get.gnn: bad model files are InputErrors naming the file") {
  const std::string path = (std::filesystem::temp_directory_path() / "mapfuse_test_gnn_bad.gnn").string();
  tiny_classifier(FusionScheme::Brr, 10, 8).save(path);
  const std::string good = slurp(path);
  auto expect = [&](const std::string& bytes, FusionScheme scheme, const std::string& what) {
    CAPTURE(what);
    try {
      gnn::Classifier::parse(bytes, "m.gnn", scheme);
      FAIL("accepted");
    } catch (const InputError& e) {
      CHECK(e.where().file == "m.gnn");
      CHECK_MESSAGE(std::string(e.what()).find(what) != std::string::npos, e.what());
    }
  };
  CHECK(gnn::Classifier::parse(good, "m.gnn", FusionScheme::Brr).shape().hidden == 8);
  expect(good, FusionScheme::Lbdf, "trained for the brr scheme; this run needs a lbdf model");
  expect("PK\x03\x04 a zip", FusionScheme::Brr, "not a mapfuse GNN model file");
  expect(good.substr(0, good.size() - 7), FusionScheme::Brr, "truncated or padded weights");
  std::string flipped = good;
  flipped[flipped.size() - 3] ^= 0x10;
  expect(flipped, FusionScheme::Brr, "fail their checksum");
  std::string layout = good;
  const size_t at = layout.find("features v3,");
  REQUIRE(at != std::string::npos);
  layout.replace(at, 12, "features v2,");
  expect(layout, FusionScheme::Brr, "differs from this build's");
  std::string shape = good;
  shape.replace(shape.find("hidden 8\n"), 9, "hidden 9\n");
  expect(shape, FusionScheme::Brr, "expects 'layer0.root.weight' of size 9x");
  try {
    gnn::Classifier::load("/nonexistent/m.gnn", FusionScheme::Brr);
    FAIL("accepted");
  } catch (const InputError& e) {
    CHECK(e.where().file == "/nonexistent/m.gnn");
  }
  std::filesystem::remove(path);
}

TEST_CASE("get.gnn: GNNExplainer's dense forward pass is the classifier's") {
  // GNNExplainer runs the classifier as dense adjacency products (100 passes per explanation); the
  // logits must be the classifier's for any edge weights, both directions of every edge included.
  for (FusionScheme scheme : {FusionScheme::Lbdf, FusionScheme::Brr}) {
    CAPTURE(to_string(scheme));
    const gnn::Classifier c = gnn::Classifier::shipped(scheme);
    const OpGraph& g = network("mobilenet_v2");
    gnn::DatasetSpec spec;
    spec.scheme = scheme;
    spec.groups_per_network = 30;
    const std::vector<gnn::GraphSample> samples = samples_of(gnn::make_dataset({&g}, spec), {&g}, -1);
    std::mt19937_64 rng(7);
    std::uniform_real_distribution<float> u(0.0f, 1.0f);
    int with_edges = 0;
    for (const gnn::GraphSample& s : samples) {
      if (s.src.empty()) continue;
      ++with_edges;
      std::vector<float> w(s.src.size());
      for (float& x : w) x = u(rng);
      CHECK(gnn::dense_forward_gap(c, s, w) < 1e-5);
      // Weights 1 on all edges: the classifier's plain verdict.
      std::fill(w.begin(), w.end(), 1.0f);
      CHECK(gnn::dense_forward_gap(c, s, w) < 1e-5);
    }
    CHECK(with_edges > 20);
  }
  const gnn::Classifier c = gnn::Classifier::shipped(FusionScheme::Lbdf);
  gnn::GraphSample s;
  s.nodes = 2;
  s.x.assign(static_cast<size_t>(2 * gnn::feature_count()), 0.5f);
  s.src = {0};
  s.dst = {1};
  const std::vector<float> two = {0.5f, 0.5f};
  CHECK_THROWS_AS(gnn::dense_forward_gap(c, s, two), std::invalid_argument);
}

TEST_CASE("get.gnn: GNNExplainer ranks edges inside the invalid group, deterministically") {
  const OpGraph& g = network("resnet18");
  const int64_t beta = 128 * 1024;
  const NetworkProblem np = make_network_problem(g, FusionScheme::Lbdf, beta);
  Evaluator ev(np.problem);
  const gnn::FeatureTable features(g, FusionScheme::Lbdf);
  auto model = std::make_shared<const gnn::Classifier>(gnn::Classifier::shipped(FusionScheme::Lbdf));
  auto explainer = gnn::make_gnn_explainer(model, features);
  CHECK(explainer->name() == "gnne");
  // The fuseable nodes of the first residual stage, one group: invalid at 128 KB.
  Group group;
  for (int v = 0; v < 12; ++v)
    if (np.problem.fuseable[v]) group.push_back(v);
  std::vector<Group> comps;
  Workspace ws;
  components(np.problem.dag, group, ws, comps);
  REQUIRE(!comps.empty());
  group = comps.front();
  REQUIRE(group.size() >= 4);
  REQUIRE(!ev.valid(group));
  const Explanation e = explainer->explain(group, ev, ws);
  REQUIRE(!e.edges.empty());
  std::set<int32_t> seen;
  int inner = 0;
  for (int32_t v : group)
    for (int32_t id : np.problem.dag.out(v)) inner += std::binary_search(group.begin(), group.end(), np.problem.dag.edges[id].to);
  for (int32_t id : e.edges) {
    const Edge& edge = np.problem.dag.edges[id];
    CHECK(std::binary_search(group.begin(), group.end(), edge.from));
    CHECK(std::binary_search(group.begin(), group.end(), edge.to));
    CHECK(seen.insert(id).second);
  }
  CHECK(static_cast<int>(e.edges.size()) <= inner);
  CHECK(explainer->explain(group, ev, ws).edges == e.edges);
  // Algorithm 1 fed by it repairs groups in a real search: a valid plan (checked by the search).
  PartitionSpec spec;
  spec.mode = PartitionMode::Rs;
  spec.split = SplitKind::Gnne;
  spec.budget = 20;
  const PartitionOutcome out = partition_network(g, spec);
  CHECK(out.rectify_defined);
  CHECK(out.rectify.distinct > 0);
  CHECK(!out.best.groups.empty());
}

namespace {

// The fuseable nodes of ResNet-18's first residual stage as one group: invalid at 128 KB (LBDF).
Group first_stage_group(const Problem& p) {
  Group group;
  for (int v = 0; v < 12; ++v)
    if (p.fuseable[v]) group.push_back(v);
  std::vector<Group> comps;
  Workspace ws;
  components(p.dag, group, ws, comps);
  return comps.empty() ? Group{} : comps.front();
}

// Invalid groups of one network at several β, as get-train-explainer collects them.
std::vector<gnn::GroupAtBuffer> invalid_groups(const gnn::FeatureTable& table, int64_t groups) {
  gnn::DatasetSpec spec;
  spec.scheme = table.scheme();
  spec.groups_per_network = groups;
  const gnn::Dataset d = gnn::make_dataset({&table.graph()}, spec);
  std::vector<gnn::GroupAtBuffer> out;
  for (const gnn::LabelledGroup& s : d.samples)
    if (!s.valid) out.push_back({&table, s.nodes, s.buffer_kb * 1024});
  return out;
}

}  // namespace

TEST_CASE("get.gnn: PGExplainer and RG-Explainer rank edges inside the invalid group, deterministically") {
  const OpGraph& g = network("resnet18");
  const NetworkProblem np = make_network_problem(g, FusionScheme::Lbdf, 128 * 1024);
  Evaluator ev(np.problem);
  const gnn::FeatureTable features(g, FusionScheme::Lbdf);
  auto classifier = std::make_shared<const gnn::Classifier>(gnn::Classifier::shipped(FusionScheme::Lbdf));
  const Group group = first_stage_group(np.problem);
  REQUIRE(group.size() >= 4);
  REQUIRE(!ev.valid(group));
  Workspace ws;
  int inner = 0;
  for (int32_t v : group)
    for (int32_t id : np.problem.dag.out(v)) inner += std::binary_search(group.begin(), group.end(), np.problem.dag.edges[id].to);
  for (gnn::ModelKind kind : {gnn::ModelKind::Pg, gnn::ModelKind::Rg}) {
    CAPTURE(gnn::to_string(kind));
    auto model = std::make_shared<const gnn::ExplainerModel>(gnn::ExplainerModel::shipped(kind, *classifier));
    CHECK(model->kind() == kind);
    auto explainer = kind == gnn::ModelKind::Pg ? gnn::make_pg_explainer(classifier, model, features)
                                                : gnn::make_rg_explainer(classifier, model, features);
    CHECK(explainer->name() == (kind == gnn::ModelKind::Pg ? "pg" : "rg"));
    const Explanation e = explainer->explain(group, ev, ws);
    REQUIRE(!e.edges.empty());
    CHECK(e.split.empty());
    CHECK(static_cast<int>(e.edges.size()) <= inner);
    std::set<int32_t> seen, touched;
    for (int32_t id : e.edges) {
      const Edge& edge = np.problem.dag.edges[id];
      CHECK(std::binary_search(group.begin(), group.end(), edge.from));
      CHECK(std::binary_search(group.begin(), group.end(), edge.to));
      CHECK(seen.insert(id).second);
      touched.insert(edge.from);
      touched.insert(edge.to);
    }
    if (kind == gnn::ModelKind::Rg) {
      // RG grows one connected node set and returns every edge inside it.
      const Group set(touched.begin(), touched.end());
      std::vector<Group> comps;
      components(np.problem.dag, set, ws, comps);
      CHECK(comps.size() == 1);
      int induced = 0;
      for (int32_t v : set)
        for (int32_t id : np.problem.dag.out(v)) induced += touched.count(np.problem.dag.edges[id].to) > 0;
      CHECK(induced == static_cast<int>(e.edges.size()));
      CHECK(set.size() <= 20);
      // Ranked by when their later end joined the connected set: every prefix of the list is connected.
      std::set<int32_t> reached = {np.problem.dag.edges[e.edges[0]].from, np.problem.dag.edges[e.edges[0]].to};
      for (size_t k = 1; k < e.edges.size(); ++k) {
        const Edge& edge = np.problem.dag.edges[e.edges[k]];
        CHECK((reached.count(edge.from) + reached.count(edge.to)) > 0);
        reached.insert(edge.from);
        reached.insert(edge.to);
      }
    }
    CHECK(explainer->explain(group, ev, ws).edges == e.edges);
  }
}

TEST_CASE("get.gnn: Algorithm 1 with PGExplainer or RG-Explainer yields only valid groups") {
  for (FusionScheme scheme : {FusionScheme::Lbdf, FusionScheme::Brr}) {
    for (SplitKind split : {SplitKind::Pg, SplitKind::Rg}) {
      CAPTURE(to_string(scheme));
      CAPTURE(to_string(split));
      const OpGraph& g = network("resnet18");
      PartitionSpec spec;
      spec.scheme = scheme;
      spec.mode = PartitionMode::Rs;
      spec.split = split;
      spec.budget = 15;
      const PartitionOutcome out = partition_network(g, spec);
      CHECK(out.rectify_defined);
      CHECK(out.rectify.distinct > 0);
      REQUIRE(!out.best.groups.empty());
      const NetworkProblem np = make_network_problem(g, scheme, 128 * 1024);
      Evaluator ev(np.problem);
      std::string why;
      CHECK_MESSAGE(is_valid_plan(np.problem, ev, out.best.groups, &why), why);
      for (const Group& grp : out.best.groups) CHECK(ev.valid(grp));
      // Same seed, same run.
      const PartitionOutcome again = partition_network(g, spec);
      CHECK(again.best.groups == out.best.groups);
      CHECK(again.rectify.distinct_rectified == out.rectify.distinct_rectified);
    }
  }
}

TEST_CASE("get.gnn: PGExplainer and RG-Explainer training is deterministic for a seed") {
  const gnn::FeatureTable table(network("squeezenet1_0"), FusionScheme::Lbdf);
  auto classifier = std::make_shared<const gnn::Classifier>(tiny_classifier(FusionScheme::Lbdf, 20, 16));
  const std::vector<gnn::GroupAtBuffer> invalid = invalid_groups(table, 20);
  REQUIRE(invalid.size() >= 10);
  gnn::PgTrainOptions po;
  po.epochs = 6;
  po.batch = 8;
  gnn::ExplainerTrainReport rep;
  const gnn::ExplainerModel pa = gnn::train_pg_explainer(classifier, invalid, po, &rep);
  const gnn::ExplainerModel pb = gnn::train_pg_explainer(classifier, invalid, po);
  CHECK(pa.parameters() == pb.parameters());
  REQUIRE(rep.epoch_loss.size() == 6);
  // The size and entropy penalties are learnt down: the loss falls from the first epoch to the last.
  CHECK(rep.epoch_loss.back() < rep.epoch_loss.front());
  po.seed = 2;
  CHECK(gnn::train_pg_explainer(classifier, invalid, po).parameters() != pa.parameters());
  // RG on MobileNetV2's invalid groups. One policy step per epoch (batch 16): the first step's
  // rollouts sample a barely trained policy, so they end at different sets (later the policy soon
  // stops with p > 0.99 where these small groups' episodes stop, and every rollout agrees).
  const gnn::FeatureTable mbv2(network("mobilenet_v2"), FusionScheme::Lbdf);
  std::vector<gnn::GroupAtBuffer> rg_groups = invalid_groups(mbv2, 20);
  REQUIRE(rg_groups.size() >= 16);
  rg_groups.resize(16);
  gnn::RgTrainOptions ro;
  ro.epochs = 2;
  ro.batch = 16;
  ro.locator_iterations = 5;
  ro.locator_groups = 4;
  ro.max_size = 4;
  ro.pretrain_list_epochs = 1;  // the full RG: supervised pre-training and 5 rollouts per action
  ro.pretrain_set_epochs = 1;
  REQUIRE(ro.n_rollouts == 5);
  const std::span<const gnn::GroupAtBuffer> invalid_rg(rg_groups);
  const gnn::ExplainerModel ra = gnn::train_rg_explainer(classifier, invalid_rg, ro, &rep);
  CHECK(rep.epoch_loss.size() == 2);
  CHECK(rep.pretrain_loss.size() == 2);
  CHECK(rep.pretrain_targets > 0);
  CHECK(gnn::train_rg_explainer(classifier, invalid_rg, ro).parameters() == ra.parameters());
  // The rollouts and the pre-training each change what is learnt.
  gnn::RgTrainOptions no_rollouts = ro;
  no_rollouts.n_rollouts = 0;
  CHECK(gnn::train_rg_explainer(classifier, invalid_rg, no_rollouts).parameters() != ra.parameters());
  gnn::RgTrainOptions no_pretraining = ro;
  no_pretraining.pretrain_list_epochs = no_pretraining.pretrain_set_epochs = 0;
  CHECK(gnn::train_rg_explainer(classifier, invalid_rg, no_pretraining).parameters() != ra.parameters());
  ro.seed = 2;
  CHECK(gnn::train_rg_explainer(classifier, invalid_rg, ro).parameters() != ra.parameters());
  // Save and load give the same weights back, for the classifier they were trained against.
  const std::string path = (std::filesystem::temp_directory_path() / "mapfuse_test_rg_roundtrip.gnn").string();
  ra.save(path);
  CHECK(gnn::ExplainerModel::load(path, gnn::ModelKind::Rg, *classifier).parameters() == ra.parameters());
  std::filesystem::remove(path);
}

TEST_CASE("get.gnn: RG-Explainer's Monte-Carlo rollout rewards on a hand-checkable episode") {
  // A deterministic stand-in policy: the i-th prefix asked for gets i mod 5 more nodes, so the r-th
  // of the 5 rollouts of a state adds r nodes; and R(S) = −|S|. So the rollouts of a state of L nodes end at L … L + 4 nodes
  // and their mean reward is −(L + 2).
  gnn::RgSets asked;
  const auto complete = [&](const gnn::RgSets& prefixes) {
    asked.insert(asked.end(), prefixes.begin(), prefixes.end());
    gnn::RgSets out;
    for (size_t i = 0; i < prefixes.size(); ++i) {
      std::vector<int32_t> s = prefixes[i];
      for (size_t r = 0; r < i % 5; ++r) s.push_back(100 + static_cast<int32_t>(s.size()));
      out.push_back(s);
    }
    return out;
  };
  const auto size_reward = [](const gnn::RgSets& sets) {
    std::vector<double> out;
    for (const auto& s : sets) out.push_back(-static_cast<double>(s.size()));
    return out;
  };
  const std::vector<int32_t> episode = {7, 3, 9, 4};
  // Seed 7, then three adds and STOP: four actions. The adds led to {7,3}, {7,3,9} and {7,3,9,4},
  // none terminal (the last is followed by STOP); STOP ended the episode, so it gets R(final) = −4.
  CHECK(gnn::rg_step_rewards(episode, true, 5, complete, size_reward) == std::vector<double>{-4, -5, -6, -4});
  REQUIRE(asked.size() == 15);
  for (size_t i = 0; i < 15; ++i) {
    CAPTURE(i);
    CHECK(asked[i] == std::vector<int32_t>(episode.begin(), episode.begin() + 2 + static_cast<ptrdiff_t>(i / 5)));
  }
  // Without STOP the episode ended at max_size or an empty boundary: its last add is terminal.
  asked.clear();
  CHECK(gnn::rg_step_rewards(episode, false, 5, complete, size_reward) == std::vector<double>{-4, -5, -4});
  CHECK(asked.size() == 10);
  // One rollout per state: the stand-in adds 0, 1, 2 nodes to the 1st, 2nd, 3rd prefix asked.
  CHECK(gnn::rg_step_rewards(episode, true, 1, complete, size_reward) == std::vector<double>{-2, -4, -6, -4});
  // n_rollouts = 0: every action gets the final reward and nothing is rolled out.
  asked.clear();
  CHECK(gnn::rg_step_rewards(episode, true, 0, complete, size_reward) == std::vector<double>{-4, -4, -4, -4});
  CHECK(asked.empty());
  // A seed alone that stopped at once has no action; a seed and STOP has one.
  CHECK(gnn::rg_step_rewards(std::vector<int32_t>{5}, false, 5, complete, size_reward).empty());
  CHECK(gnn::rg_step_rewards(std::vector<int32_t>{5, 6}, true, 5, complete, size_reward) ==
        std::vector<double>{-4, -2});
}

TEST_CASE("get.gnn: RG-Explainer's supervised pre-training lowers its loss") {
  const gnn::FeatureTable table(network("squeezenet1_0"), FusionScheme::Lbdf);
  auto classifier = std::make_shared<const gnn::Classifier>(tiny_classifier(FusionScheme::Lbdf, 20, 16));
  const std::vector<gnn::GroupAtBuffer> invalid = invalid_groups(table, 20);
  gnn::RgTrainOptions ro;
  ro.epochs = 0;  // pre-training only
  ro.locator_iterations = 5;
  ro.locator_groups = 4;
  ro.pretrain_list_epochs = 4;
  ro.pretrain_set_epochs = 4;
  ro.pretrain_min_nodes = 3;
  ro.pretrain_batch = 8;
  gnn::ExplainerTrainReport rep;
  gnn::train_rg_explainer(classifier, invalid, ro, &rep);
  REQUIRE(rep.pretrain_targets >= 5);
  REQUIRE(rep.pretrain_loss.size() == 8);
  CAPTURE(rep.pretrain_loss);
  // Mean −log π of the taught actions: falls over the "list" epochs and over the "set" epochs.
  CHECK(rep.pretrain_loss[3] < 0.8 * rep.pretrain_loss[0]);
  CHECK(rep.pretrain_loss[7] < rep.pretrain_loss[4]);
  CHECK(rep.epoch_loss.empty());
}

TEST_CASE("get.gnn: bad PGExplainer and RG-Explainer files are InputErrors naming the file") {
  const gnn::FeatureTable table(network("squeezenet1_0"), FusionScheme::Brr);
  auto classifier = std::make_shared<const gnn::Classifier>(tiny_classifier(FusionScheme::Brr, 10, 8));
  const gnn::Classifier other = tiny_classifier(FusionScheme::Brr, 10, 8, 2);
  gnn::PgTrainOptions po;
  po.epochs = 1;
  const std::string path = (std::filesystem::temp_directory_path() / "mapfuse_test_pg_bad.gnn").string();
  gnn::train_pg_explainer(classifier, invalid_groups(table, 10), po).save(path);
  const std::string good = slurp(path);
  const std::string dir = (std::filesystem::temp_directory_path() / "mapfuse_test_pg_bad_c.gnn").string();
  classifier->save(dir);
  const std::string classifier_bytes = slurp(dir);
  std::filesystem::remove(dir);
  auto expect = [&](const std::string& bytes, gnn::ModelKind kind, const gnn::Classifier& c, const std::string& what) {
    CAPTURE(what);
    try {
      gnn::ExplainerModel::parse(bytes, "m.gnn", kind, c);
      FAIL("accepted");
    } catch (const InputError& e) {
      CHECK(e.where().file == "m.gnn");
      CHECK_MESSAGE(std::string(e.what()).find(what) != std::string::npos, e.what());
    }
  };
  CHECK(gnn::ExplainerModel::parse(good, "m.gnn", gnn::ModelKind::Pg, *classifier).kind() == gnn::ModelKind::Pg);
  expect(good, gnn::ModelKind::Rg, *classifier, "this is a PGExplainer model ('mapfuse-pg 1'); expected a RG-Explainer");
  expect(classifier_bytes, gnn::ModelKind::Pg, *classifier, "this is a GNN classifier model");
  expect("PK\x03\x04 a zip", gnn::ModelKind::Pg, *classifier, "not a mapfuse PGExplainer model file");
  expect(good, gnn::ModelKind::Pg, other, "trained against the classifier with weights " + classifier->fingerprint());
  expect(good.substr(0, good.size() - 5), gnn::ModelKind::Pg, *classifier, "truncated or padded weights");
  std::string flipped = good;
  flipped[flipped.size() - 2] ^= 0x08;
  expect(flipped, gnn::ModelKind::Pg, *classifier, "fail their checksum");
  std::string scheme = good;
  scheme.replace(scheme.find("scheme brr"), 10, "scheme lbd");
  expect(scheme, gnn::ModelKind::Pg, *classifier, "unknown scheme 'lbd'");
  std::string layout = good;
  layout.replace(layout.find("features v3,"), 12, "features v2,");
  expect(layout, gnn::ModelKind::Pg, *classifier, "differs from this build's");
  std::string hidden = good;
  hidden.replace(hidden.find("hidden 8\n"), 9, "hidden 9\n");
  expect(hidden, gnn::ModelKind::Pg, *classifier, "trained against a 4-layer, 9-hidden classifier");
  // A classifier for the other scheme: the file's scheme is checked against it.
  const gnn::Classifier lbdf = gnn::Classifier::shipped(FusionScheme::Lbdf);
  expect(good, gnn::ModelKind::Pg, lbdf, "trained for the brr scheme; this run needs a lbdf model");
  try {
    gnn::ExplainerModel::load("/nonexistent/pg.gnn", gnn::ModelKind::Pg, *classifier);
    FAIL("accepted");
  } catch (const InputError& e) {
    CHECK(e.where().file == "/nonexistent/pg.gnn");
  }
  std::filesystem::remove(path);
}
