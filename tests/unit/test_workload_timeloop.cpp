// Timeloop/DOSA problem YAML.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "engine/common/error.hpp"
#include "engine/workload/timeloop_problem.hpp"
#include "engine/workload/zoo.hpp"
#include "test_support.hpp"

using namespace mapfuse;

namespace {
std::string dosa(const std::string& rel) { return test::shared_data("dosa/workloads/dosa/" + rel); }
std::string tmp_yaml(const std::string& name, const std::string& text) {
  const auto p = std::filesystem::temp_directory_path() / ("mapfuse_test_workload_" + name + ".yaml");
  std::ofstream(p) << text;
  return p.string();
}
int64_t size(const Einsum& e, const char* r) { return e.ranks[e.rank_index(r)].size; }
}  // namespace

TEST_CASE("workload timeloop problem: flat and instance cnn-layer, dw-cnn-layer") {
  // Flat keys (DOSA resnet50): conv1 7x7/2, C3 K64 P=Q=112.
  Einsum e = import_timeloop_problem(dosa("resnet50/_outputs_input.2.yaml"));
  CHECK(e.name == "_outputs_input.2");
  CHECK(size(e, "R") == 7);
  CHECK(size(e, "P") == 112);
  CHECK(size(e, "C") == 3);
  CHECK(size(e, "K") == 64);
  CHECK(e.operations() == int64_t{7} * 7 * 112 * 112 * 3 * 64);
  CHECK(e.tensors[1].name == "Inputs");
  CHECK(e.tensors[1].dims[2].size() == 2);
  CHECK(e.tensors[1].dims[2][1].coeff == 2);  // P * Wstride
  // Instance form (mm): P=1024, C=K=1024.
  Einsum mm = import_timeloop_problem(dosa("mm/mm_0.yaml"));
  CHECK(mm.operations() == int64_t{1024} * 1024 * 1024);
  // dw-cnn-layer: no K rank; weights [C,R,S]-sized.
  Einsum dw = import_timeloop_problem(dosa("conv_dw/conv_dw_1.yaml"));
  CHECK(dw.rank_index("K") == -1);
  CHECK(dw.operations() == int64_t{64} * 224 * 224 * 9);
  CHECK(dw.tensor_volume(0) == 64 * 9);
  // Wstride: 0 (DOSA conv_1d) drops the P term from the input projection, as Timeloop would.
  Einsum c1d = import_timeloop_problem(dosa("conv_1d/conv_1d_0.yaml"));
  CHECK(c1d.tensors[1].dims[2].size() == 1);
  // A custom shape map (bert element-wise layer).
  Einsum ews = import_timeloop_problem(dosa("bert/mm_1_ews.yaml"));
  CHECK(ews.ranks.size() == 1);
  CHECK(ews.operations() == 128);
  CHECK(ews.tensors.back().role == TensorRole::Output);
}

TEST_CASE("workload timeloop dir: DOSA resnet50 with layer counts = 4.089 GMACs") {
  Workload w = import_timeloop_dir(dosa("resnet50"));
  CHECK(w.einsums.size() == 24);  // unique_layers.yaml
  CHECK(w.counts.size() == 24);
  CHECK(w.operations() == 4089184256);
  int64_t zoo50 = 0;
  for (const auto& e : zoo_workload("resnet50", {}).einsums)
    if (e.op == OpKind::Mac) zoo50 += e.operations();
  CHECK(w.operations() == zoo50);
  // {count, name} format: _outputs_input.80 appears 5 times.
  CHECK(w.count(w.einsum_index("_outputs_input.80")) == 5);
  // Layers are independent: tensors are prefixed with the layer name.
  CHECK(w.tensor_index("_outputs_input.80.Inputs") >= 0);
  // `key: n` count format (alexnet) and layers.yaml without counts (vgg16: all 16 layers).
  Workload a = import_timeloop_dir(dosa("alexnet"));
  CHECK(a.operations() == 714188480);
  Workload v = import_timeloop_dir(dosa("vgg16"));
  CHECK(v.einsums.size() == 16);
  int64_t zoo_macs = 0;
  for (const auto& e : zoo_workload("vgg16", {}).einsums)
    if (e.op == OpKind::Mac) zoo_macs += e.operations();
  CHECK(v.operations() == zoo_macs);
  // rnnt: `count: 52 # 26 * 2` with a comment.
  Workload r = import_timeloop_dir(dosa("rnnt"));
  CHECK(r.count(r.einsum_index("encoder_pre_rnn_layer")) == 52);
  CHECK(r.operations() == 266636288);
}

TEST_CASE("workload timeloop errors name file, line and key") {
  auto expect = [](const std::string& path, int line, const std::string& text) {
    try {
      import_timeloop_problem(path);
      FAIL("expected InputError");
    } catch (const InputError& e) {
      CHECK(e.where().file == path);
      if (line > 0) CHECK(e.where().line == line);
      CHECK_MESSAGE(std::string(e.what()).find(text) != std::string::npos, std::string(e.what()));
    }
  };
  expect(dosa("conv_3d/conv_3d_0.yaml"), 3, "malformed YAML");  // upstream file is malformed
  expect(tmp_yaml("neg", "problem:\n  shape: cnn-layer\n  instance:\n    C: 4\n    K: -2\n"), 5,
         "not positive");
  expect(tmp_yaml("typo", "problem:\n  C: 4\n  Kk: 2\n"), 3, "did you mean 'K'");
  expect(tmp_yaml("notint", "problem:\n  C: four\n"), 2, "not an integer");
  expect(tmp_yaml("shape", "problem:\n  shape: cnn-layr\n  C: 4\n"), 2, "did you mean 'cnn-layer'");
  expect(tmp_yaml("noproblem", "layers: []\n"), 1, "problem");
  expect("/nonexistent/x.yaml", 0, "no such file");
  CHECK_THROWS_AS(import_timeloop_dir(dosa("ansor")), InputError);  // lists files that are absent
}
