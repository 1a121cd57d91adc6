// load_workload dispatch and the TOML workload format.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "engine/common/error.hpp"
#include "engine/workload/load.hpp"
#include "test_support.hpp"

using namespace mapfuse;

namespace {
std::string tmp_toml(const std::string& name, const std::string& text) {
  const auto p = std::filesystem::temp_directory_path() / ("mapfuse_test_workload_" + name + ".toml");
  std::ofstream(p) << text;
  return p.string();
}
const char* kTwoConvs = R"(name = "two_convs"
[[einsum]]
name = "conv1"
ranks = { P = 16, R = 3, C = 8, K = 4 }
tensors = [
  { name = "W1", role = "weight", dims = ["r", "c", "k"] },
  { name = "I", role = "input", dims = ["c", "p*2 + r"] },
  { name = "A", role = "output", dims = ["k", "p"] },
]
[[einsum]]
name = "relu"
op = "elementwise"
count = 2
ranks = { P = 16, K = 4 }
tensors = [
  { name = "A", role = "input", dims = ["k", "p"] },
  { name = "B", role = "output", dims = ["K", "P"], bits = 16 },
]
)";
void expect_error(const std::string& text, const std::string& name, int line, const std::string& what) {
  const std::string path = tmp_toml(name, text);
  try {
    load_workload(path);
    FAIL("expected InputError");
  } catch (const InputError& e) {
    CHECK(e.where().file == path);
    if (line > 0) CHECK(e.where().line == line);
    CHECK_MESSAGE(std::string(e.what()).find(what) != std::string::npos, std::string(e.what()));
  }
}
}  // namespace

TEST_CASE("workload toml: projections, ops, roles, counts") {
  Workload w = load_workload(tmp_toml("ok", kTwoConvs));
  CHECK(w.name == "two_convs");
  REQUIRE(w.einsums.size() == 2);
  const Einsum& c = w.einsums[0];
  // Ranks in order of first use: R, C, K (weights), P (inputs).
  CHECK(c.ranks[0].name == "R");
  CHECK(c.ranks[3].name == "P");
  CHECK(c.operations() == 16 * 3 * 8 * 4);
  int64_t ext[kMaxRanks];
  for (size_t r = 0; r < c.ranks.size(); ++r) ext[r] = c.ranks[r].size;
  CHECK(Einsum::dim_extent(c.tensors[1].dims[1], ext) == 2 * 15 + 3);  // p*2 + r
  CHECK(w.einsums[1].op == OpKind::Elementwise);
  CHECK(w.einsums[1].tensors[1].bits_per_value == 16);
  CHECK(w.counts == std::vector<int64_t>{1, 2});
  CHECK(w.operations() == 16 * 3 * 8 * 4 + 2 * 16 * 4);
  CHECK(w.tensors[w.tensor_index("A")].producer == 0);
}

TEST_CASE("workload toml errors: unknown keys, sizes, ranks, cycles") {
  std::string t = kTwoConvs;
  expect_error(std::string(t).replace(t.find("tensors = ["), 11, "tensorz = ["), "typo", 5, "did you mean 'tensors'");
  expect_error(std::string(t).replace(t.find("P = 16, R"), 6, "P = 0"), "zero", 4, "not positive");
  expect_error(std::string(t).replace(t.find("P = 16, R"), 6, "P = -3"), "neg", 4, "not positive");
  expect_error(std::string(t).replace(t.find("\"p*2 + r\""), 9, "\"q*2 + r\""), "rank", 0, "unknown rank 'q'");
  expect_error(std::string(t).replace(t.find("\"p*2 + r\""), 9, "\"p*-2\""), "proj", 0, "p*-2");
  expect_error(std::string(t).replace(t.find("role = \"weight\""), 15, "role = \"wieght\""), "role", 0,
               "did you mean 'weight'");
  expect_error(std::string(t).replace(t.find("\"elementwise\""), 13, "\"elementwize\""), "op", 0,
               "did you mean 'elementwise'");
  expect_error("name = \"x\"\n[[einsum]\n", "syntax", 2, "malformed TOML");
  // A -> B -> A: a cycle.
  const char* cyc = R"([[einsum]]
name = "e1"
ranks = { X = 4 }
tensors = [ { name = "A", role = "input", dims = ["x"] }, { name = "B", role = "output", dims = ["x"] } ]
[[einsum]]
name = "e2"
ranks = { X = 4 }
tensors = [ { name = "B", role = "input", dims = ["x"] }, { name = "A", role = "output", dims = ["x"] } ]
)";
  expect_error(cyc, "cycle", 0, "cycle through: e1, e2");
}

TEST_CASE("workload load_workload: zoo names, files, directories, suggestions") {
  CHECK(load_workload("resnet18").name == "resnet18");
  CHECK(load_workload("gpt3_6.7b", {2, 128}).einsums[0].ranks[0].size == 2);
  CHECK(load_workload(test::shared_data("stream/exploration_258f5310/workload/fsrcnn.onnx")).einsums.size() == 8);
  Workload y = load_workload(test::shared_data("dosa/workloads/dosa/mm/mm_0.yaml"));
  CHECK(y.einsums.size() == 1);
  CHECK(y.operations() == int64_t{1024} * 1024 * 1024);
  CHECK(load_workload(test::shared_data("dosa/workloads/dosa/resnet50")).operations() == 4089184256);
  try {
    load_workload("mobilenet2");
    FAIL("expected InputError");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("did you mean 'mobilenet_v2'") != std::string::npos);
  }
  CHECK_THROWS_WITH_AS(load_workload("/nonexistent/net.onnx"), doctest::Contains("no such file"), InputError);
  const std::string txt = tmp_toml("wrong_ext", "x");
  const std::string other = txt.substr(0, txt.size() - 5) + ".txt";
  std::filesystem::copy_file(txt, other, std::filesystem::copy_options::overwrite_existing);
  CHECK_THROWS_WITH_AS(load_workload(other), doctest::Contains("unknown workload file type"), InputError);
}
