// GET-fusion's GNN (engine/search/get/gnn/): the classifier data carries F_β's verdicts, the
// shipped models classify held-out groups, training is deterministic, bad model files are
// rejected with the file named, and GNNExplainer returns edges of the group.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "engine/search/get/gnn/dataset.hpp"
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
  const OpGraph& g = network("squeezenet1_0");
  gnn::DatasetSpec spec;
  spec.groups_per_network = 10;
  const std::vector<gnn::GraphSample> all = samples_of(gnn::make_dataset({&g}, spec), {&g}, -1);
  gnn::TrainOptions opt;
  opt.epochs = 1;
  opt.shape.hidden = 8;
  const std::string path = (std::filesystem::temp_directory_path() / "mapfuse_test_gnn_bad.gnn").string();
  gnn::train_classifier(FusionScheme::Brr, all, {}, opt).save(path);
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
