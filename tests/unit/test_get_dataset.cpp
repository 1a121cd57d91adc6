// GET-fusion's classifier data as a study (docs/get.md, "Dataset generation as a study"): the
// drawing and labelling halves, shard by shard, give make_dataset's samples; [[get_dataset]]
// entries become one unit per (scheme, network, shard); the rows land in the study file's
// /get_dataset in that order whatever order the units arrive in. tests/cli/get_dataset.sh runs
// the units through `mapfuse run` on 1 rank and `mpirun -np 2` and trains from the file.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

#include "engine/common/error.hpp"
#include "engine/search/get/gnn/dataset.hpp"
#include "partitioners/study.hpp"
#include "results/get_dataset_h5.hpp"
#include "results/hdf5_writer.hpp"
#include "tests/unit/get_test_networks.hpp"
#include "tests/unit/test_support.hpp"

using namespace mapfuse;
using namespace mapfuse::get;

namespace {

std::vector<StudyLayer> no_layers(const StudyWorkload&) { return {}; }

}  // namespace

TEST_CASE("get.dataset: labelling shards of replayed draws gives make_dataset's samples in order") {
  const std::vector<const OpGraph*> graphs = {&test::get_network("squeezenet1_0"), &test::get_network("resnet18")};
  gnn::DatasetSpec spec;
  spec.scheme = FusionScheme::Brr;
  spec.groups_per_network = 30;
  spec.seed = 7;
  const gnn::Dataset whole = gnn::make_dataset(graphs, spec);
  REQUIRE(whole.samples.size() == 2 * 30 * 5);
  std::vector<gnn::LabelledGroup> sharded;
  for (size_t k = 0; k < graphs.size(); ++k) {
    // A unit of network k sees only the networks up to k: their draws are the same.
    const std::vector<const OpGraph*> upto(graphs.begin(), graphs.begin() + static_cast<std::ptrdiff_t>(k) + 1);
    const std::vector<gnn::DrawnGroups> drawn = gnn::draw_groups(upto, spec);
    REQUIRE(drawn.size() == k + 1);
    const size_t n = drawn[k].groups.size();
    for (size_t shard = 0; shard < 4; ++shard) {  // 4 shards of 30: 7, 8, 7, 8 groups
      auto s = gnn::label_groups(*graphs[k], static_cast<int32_t>(k), drawn[k], n * shard / 4, n * (shard + 1) / 4, spec);
      CHECK(s.size() == 5 * (n * (shard + 1) / 4 - n * shard / 4));
      sharded.insert(sharded.end(), s.begin(), s.end());
    }
  }
  REQUIRE(sharded.size() == whole.samples.size());
  for (size_t i = 0; i < sharded.size(); ++i) {
    const gnn::LabelledGroup &a = sharded[i], &b = whole.samples[i];
    CAPTURE(i);
    CHECK(a.network == b.network);
    CHECK(a.nodes == b.nodes);
    CHECK(a.buffer_kb == b.buffer_kb);
    CHECK(a.buffer_need == b.buffer_need);
    CHECK(a.valid == b.valid);
    CHECK(a.supported == b.supported);
    CHECK(a.split == b.split);
  }
  // The draws do depend on the seed, and network 1's on network 0's draws (one random stream).
  gnn::DatasetSpec other = spec;
  other.seed = 8;
  CHECK(gnn::draw_groups(graphs, other)[1].groups != gnn::draw_groups(graphs, spec)[1].groups);
  CHECK(gnn::draw_groups({graphs[1]}, spec)[0].groups != gnn::draw_groups(graphs, spec)[1].groups);
}

TEST_CASE("get.dataset: [[get_dataset]] gives a unit per scheme, network and shard; rows reach /get_dataset in order") {
  const Study s = parse_study(R"(name = "d"
[[get_dataset]]
schemes = ["lbdf", "brr"]
groups = 12
shards = 2
)", "d.toml");
  const std::vector<WorkUnit> units = partition_study(s, &no_layers);
  // LBDF trains on 6 networks, BRR on 4; two shards each.
  REQUIRE(units.size() == (6 + 4) * 2);
  const WorkUnit& last = units[11];
  CHECK(last.kind == "get_dataset");
  CHECK(last.label == "get_dataset lbdf efficientnet_b3 shard 1/2 seed 1");
  const nlohmann::json p = nlohmann::json::parse(last.payload);
  CHECK(p.at("networks") == gnn::training_networks(FusionScheme::Lbdf));  // every network before its own
  CHECK(p.at("shard") == 1);
  CHECK(nlohmann::json::parse(units[0].payload).at("networks").size() == 1);
  // Rows of units arriving out of order are written in (scheme, network, shard) order.
  std::vector<UnitResult> results;
  for (int k : {1, 0}) {
    for (int shard : {1, 0}) {
      GetDatasetRow r{"lbdf", "n" + std::to_string(k), k, shard, shard, 128, 1000.0 * k + shard, true, shard == 1, "a;b"};
      UnitResult u;
      u.unit_id = "u" + std::to_string(3 - k) + std::to_string(3 - shard);  // the file orders units by id
      u.kind = "get_dataset";
      u.label = u.unit_id;
      u.data = get_dataset_rows_to_json({r, r});
      results.push_back(u);
    }
  }
  const std::string path = (std::filesystem::temp_directory_path() / "mapfuse_test_get_dataset.h5").string();
  StudyMeta meta;
  meta.name = "d";
  write_study_h5(path, meta, results);
  const std::vector<GetDatasetRow> rows = read_get_dataset_h5(path);
  std::filesystem::remove(path);
  REQUIRE(rows.size() == 8);
  for (size_t i = 0; i < rows.size(); ++i) {
    CAPTURE(i);
    CHECK(rows[i].network_index == static_cast<int32_t>(i / 4));
    CHECK(rows[i].shard == static_cast<int32_t>(i / 2 % 2));
    CHECK(rows[i].network == "n" + std::to_string(i / 4));
    CHECK(rows[i].buffer_need_bytes == 1000.0 * static_cast<double>(i / 4) + static_cast<double>(i / 2 % 2));
    CHECK(rows[i].valid == (rows[i].shard == 1));
    CHECK(rows[i].group == "a;b");
  }
  CHECK_THROWS_AS(parse_study("name = \"d\"\n[[get_dataset]]\nschemes = [\"lbfd\"]\n", "d.toml"), InputError);
  CHECK_THROWS_AS(parse_study("name = \"d\"\n[[get_dataset]]\ngroups = -1\n", "d.toml"), InputError);
}
