// GET-fusion studies: [[get]] entries cut into get_partition units (partitioners/study), their
// labels read back by the report, the Fig. 3 sampler (engine/search/get/sample) and the report's
// tables (results/get_report).
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "engine/common/error.hpp"
#include "engine/search/get/network.hpp"
#include "engine/search/get/sample.hpp"
#include "partitioners/study.hpp"
#include "results/get_report.hpp"
#include "test_support.hpp"

using namespace mapfuse;

namespace {

const std::string kGetStudy = R"(name = "g"
[[get]]
networks = ["resnet18", "mobilenet_v2"]
schemes = ["lbdf", "brr"]
buffer_kb = 128
searches = ["ls", "exact", "sample"]
splits = ["random", "dp"]
budget = [100, 200]
seeds = [1, 2]
[[get]]
networks = "resnet18"
buffer_kb = [128]
searches = ["exact"]
)";

std::vector<StudyLayer> no_layers(const StudyWorkload&) { return {}; }

InputError parse_error(const std::string& text) { return test::study_error(text, "g.toml"); }

std::string replace(const std::string& s, const std::string& from, const std::string& to) {
  return test::replace_once(s, from, to);
}

// A chain of n nodes whose group needs 10 bytes per node (no weights, always supported).
struct CountModel final : get::GroupModel {
  get::GroupCost evaluate(std::span<const int32_t> nodes) const override {
    return {10.0 * static_cast<double>(nodes.size()), 1.0, true};
  }
};

}  // namespace

TEST_CASE("get.study: [[get]] entries give one unit per setting, exact once per network, scheme and buffer") {
  const Study s = parse_study(kGetStudy, "g.toml");
  REQUIRE(s.get.size() == 2);
  CHECK(s.workloads.empty());
  CHECK(s.get[0].buffer_kb == std::vector<double>{128});
  CHECK(s.get[0].budgets == std::vector<int64_t>{100, 200});
  CHECK(s.get[1].networks == std::vector<std::string>{"resnet18"});
  const std::vector<WorkUnit> units = partition_study(s, &no_layers);
  // ls: 2 networks x 2 schemes x 2 splits x 2 budgets x 2 seeds = 32; sample: 2 x 2 x 2 budgets x
  // 2 seeds = 16 (no split); exact: 2 x 2 = 4 (no split, budget or seed); the second entry's exact
  // unit (resnet18, lbdf, 128 KB) is the first entry's and is not repeated.
  std::map<std::string, int> by_search;
  std::set<std::string> ids, labels;
  for (const WorkUnit& u : units) {
    CHECK(u.kind == "get_partition");
    CHECK(ids.insert(u.id).second);
    CHECK(labels.insert(u.label).second);
    const nlohmann::json p = nlohmann::json::parse(u.payload);
    ++by_search[p.at("search").get<std::string>()];
    // The label carries every varying parameter, and the report reads it back.
    GetLabel l;
    REQUIRE_MESSAGE(parse_get_label(u.label, l), u.label);
    CHECK(l.network == p.at("network").get<std::string>());
    CHECK(l.scheme == p.at("scheme").get<std::string>());
    CHECK(l.buffer_kb == p.at("buffer_kb").get<double>());
    CHECK(l.search == p.at("search").get<std::string>());
    CHECK(l.split == p.at("split").get<std::string>());
    CHECK(l.budget == p.at("budget").get<int64_t>());
    CHECK(l.seed == p.at("seed").get<uint64_t>());
  }
  CHECK(by_search["ls"] == 32);
  CHECK(by_search["sample"] == 16);
  CHECK(by_search["exact"] == 4);
  CHECK(units.size() == 52);
  // Deterministic: the same study gives the same units.
  const std::vector<WorkUnit> again = partition_study(parse_study(kGetStudy, "g.toml"), &no_layers);
  REQUIRE(again.size() == units.size());
  for (size_t i = 0; i < units.size(); ++i) CHECK(again[i].id == units[i].id);
  GetLabel l;
  CHECK(parse_get_label("get resnet18 lbdf 128KB ls+cut b2000 seed 3", l));
  CHECK(l.split == "cut");
  CHECK(l.seed == 3);
  CHECK_FALSE(parse_get_label("resnet18 @ fadiff_small fadiff seed 1", l));
  CHECK_FALSE(parse_get_label("get resnet18 lbdf 128 ls+cut b2000 seed 3", l));
}

TEST_CASE("get.study: bad keys and values name the file, the line and the key") {
  auto check = [](const std::string& text, int line, const std::string& key, const std::string& what) {
    const InputError e = parse_error(text);
    CHECK(e.where().file == "g.toml");
    CHECK_MESSAGE(e.where().line == line, e.what());
    CHECK_MESSAGE(std::string(e.what()).find(key) != std::string::npos, e.what());
    CHECK_MESSAGE(std::string(e.what()).find(what) != std::string::npos, e.what());
  };
  check(replace(kGetStudy, "seeds = [1, 2]", "seeds = [1, 2]\nbudgte = 3"), 10, "budgte", "did you mean 'budget'");
  check(replace(kGetStudy, R"(schemes = ["lbdf", "brr"])", R"(schemes = ["lbdf", "bbr"])"), 4, "schemes", "did you mean 'brr'");
  check(replace(kGetStudy, "buffer_kb = 128\n", "buffer_kb = 0\n"), 5, "buffer_kb", "not a positive buffer size");
  check(replace(kGetStudy, R"(searches = ["ls", "exact", "sample"])", R"(searches = ["nsga"])"), 6, "searches",
        "did you mean 'nsga2'");
  check(replace(kGetStudy, R"(splits = ["random", "dp"])", R"(splits = ["gradcam"])"), 7, "splits", "unknown explainer 'gradcam'");
  check(replace(kGetStudy, "budget = [100, 200]", "budget = [0]"), 8, "budget", "integer >= 1");
  check(replace(kGetStudy, R"(splits = ["random", "dp"])", R"(splits = ["dp", "dp"])"), 7, "splits", "listed twice");
  check(replace(kGetStudy, R"(networks = ["resnet18", "mobilenet_v2"])", "networks = []"), 3, "networks", "empty");
  check(replace(kGetStudy, "name = \"g\"\n", "name = \"g\"\n[[workload]]\nspec = \"resnet18\"\n"), 2, "workload",
        "has no [[workload]]");
}

TEST_CASE("get.sample: the valid share of random groups on a chain, and its growth with the buffer") {
  const get::Dag chain = get::make_dag(3, {{0, 1}, {1, 2}});
  const CountModel m;
  // Each plan cuts each edge with probability q ~ U(0,1). Its groups of >= 2 nodes: {0,1,2} when
  // no edge is cut ((1-q)^2, needs 30 B), {0,1} or {1,2} when exactly one is (2q(1-q), 20 B).
  // E[(1-q)^2] = E[2q(1-q)] = 1/3, so 2/3 groups per plan and half of them fit 25 B.
  const get::GroupSample s = get::sample_group_validity(chain, m, 25, 20000, 7);
  CHECK(s.plans == 20000);
  CHECK(std::abs(static_cast<double>(s.groups) / 20000 - 2.0 / 3) < 0.01);
  CHECK(std::abs(s.share() - 0.5) < 0.01);
  CHECK(get::sample_group_validity(chain, m, 35, 2000, 7).share() == 1.0);   // every group fits
  CHECK(get::sample_group_validity(chain, m, 20, 2000, 7).share() == 0.0);   // strict: 20 B does not fit 20 B
  const get::GroupSample again = get::sample_group_validity(chain, m, 25, 20000, 7);
  CHECK(again.valid == s.valid);  // deterministic per seed

  // A real network: the same groups at every buffer size, so the share never falls as β grows.
  const OpGraph g = load_op_graph(test::shared_data("get/onnx/resnet18.onnx"));
  double last = -1;
  int64_t groups = -1;
  for (int kb : {128, 256, 512, 1024, 2048}) {
    const get::NetworkProblem np = get::make_network_problem(g, FusionScheme::Lbdf, kb * 1024);
    const get::GroupSample x = get::sample_group_validity(np.problem.dag, *np.model, kb * 1024.0, 200, 1);
    CAPTURE(kb);
    CHECK(x.share() >= last);
    if (groups >= 0) CHECK(x.groups == groups);
    groups = x.groups;
    last = x.share();
  }
  CHECK(last > 0);
}

TEST_CASE("get.report: tables with mean and spread over seeds, the true optimum and the paper's cells") {
  StudyFile f;
  auto add = [&](const std::string& label, std::vector<UnitResult::Metric> metrics) {
    UnitResult r;
    r.unit_id = stable_id(label);
    r.kind = "get_partition";
    r.label = label;
    r.metrics = std::move(metrics);
    f.results.push_back(r);
  };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  add("get mobilenet_v2 lbdf 128KB ls+random b2000 seed 1",
      {{"nodes", 100}, {"fuseable_nodes", 91}, {"dram_mb", 8.0}, {"mbu_kb", 100}, {"rectify_rate", nan}});
  add("get mobilenet_v2 lbdf 128KB ls+random b2000 seed 2",
      {{"nodes", 100}, {"fuseable_nodes", 91}, {"dram_mb", 9.0}, {"mbu_kb", 120}, {"rectify_rate", nan}});
  add("get mobilenet_v2 lbdf 128KB ls+dp b2000 seed 1", {{"dram_mb", 7.774}, {"mbu_kb", 110}, {"rectify_rate", 1.0}});
  add("get mobilenet_v2 lbdf 128KB ls+dp b2000 seed 2", {{"dram_mb", 7.774}, {"mbu_kb", 110}, {"rectify_rate", 0.5}});
  add("get mobilenet_v2 lbdf 128KB exact",
      {{"nodes", 100}, {"fuseable_nodes", 91}, {"dram_mb", 7.774}, {"mbu_kb", 111}, {"optimal", 1}});
  add("get mobilenet_v2 lbdf 128KB sample b100 seed 1", {{"valid_share", 0.25}});
  add("get mobilenet_v2 lbdf 128KB sample b100 seed 2", {{"valid_share", 0.35}});
  add("get mobilenet_v2 lbdf 256KB sample b100 seed 1", {{"valid_share", 0.5}});
  add("get mobilenet_v2 lbdf 128KB ls+random b1000 seed 1", {{"dram_mb", 10.0}});
  const std::string md = get_report_markdown(f);
  INFO(md);
  // LS + random over two seeds: mean 8.5, sample sd sqrt(0.5) = 0.707; MBU mean 110 KB.
  CHECK(md.find("| LS baseline (random split) | 8.500 ± 0.707 · 110.0 |") != std::string::npos);
  CHECK(md.find("| LS Algorithm 1 + dp | 7.774 ± 0.000 · 110.0 · 75.0 % |") != std::string::npos);
  CHECK(md.find("| true optimum | 7.774 · 111.0 |") != std::string::npos);
  CHECK(md.find("| fuseable / operators | 91 / 100 |") != std::string::npos);
  // The paper's Table III cells for MobileNetV2 under LBDF (note §7.3).
  CHECK(md.find("(the paper's Table III)") != std::string::npos);
  CHECK(md.find("| paper LS | 9.803 |") != std::string::npos);
  CHECK(md.find("| paper LS+RG | 8.823 |") != std::string::npos);
  // Fig. 3: 30 % ± 7.1 at 128 KB, 50 % at 256 KB.
  CHECK(md.find("| mobilenet_v2 LBDF | 30.0 ± 7.1 | 50.0 ± 0.0 |") != std::string::npos);
  // Fig. 5: the random split at 1000 and 2000 plans.
  CHECK(md.find("| mobilenet_v2 LBDF 128 KB LS + random | 10.000 ± 0.000 | 8.500 ± 0.707 |") != std::string::npos);
  CHECK(get_report_markdown(StudyFile{}).empty());
  // Every paper cell: 36 of Table II (12 rows x 3 networks), 40 each of Tables III and IV.
  CHECK(paper_get_cells().size() == 116);
}
