// ONNX importer on the real Stream/ZigZag models (weights stripped) and on broken files.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "engine/common/error.hpp"
#include "engine/workload/onnx_import.hpp"
#include "engine/workload/zoo.hpp"
#include "test_support.hpp"

using namespace mapfuse;

namespace {
std::string model(const std::string& f) { return test::shared_data("stream/exploration_258f5310/workload/" + f); }
int64_t macs(const Workload& w) {
  int64_t s = 0;
  for (const auto& e : w.einsums)
    if (e.op == OpKind::Mac) s += e.operations();
  return s;
}
// Conv Einsums are the Mac Einsums with a kernel rank R.
int convs(const Workload& w) {
  return static_cast<int>(std::count_if(w.einsums.begin(), w.einsums.end(), [](const Einsum& e) {
    return e.op == OpKind::Mac && e.rank_index("R") >= 0;
  }));
}
int count_op(const Workload& w, OpKind k) {
  return static_cast<int>(std::count_if(w.einsums.begin(), w.einsums.end(), [&](const Einsum& e) { return e.op == k; }));
}
std::string tmp_file(const std::string& name, const std::string& bytes) {
  const auto p = std::filesystem::temp_directory_path() / ("mapfuse_test_workload_" + name);
  std::ofstream(p, std::ios::binary) << bytes;
  return p.string();
}
std::string slurp(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}
constexpr int64_t conv(int64_t H, int64_t C, int64_t K, int64_t k) { return H * H * C * K * k * k; }
}  // namespace

TEST_CASE("workload onnx resnet18: equals the zoo's conv/FC MACs") {
  Workload w = import_onnx(model("resnet18.onnx"));
  CHECK(w.name == "resnet18");
  CHECK(convs(w) == 20);
  CHECK(count_op(w, OpKind::Mac) == 21);          // + the Gemm
  CHECK(count_op(w, OpKind::Elementwise) == 8);   // residual Adds (ReLUs folded)
  CHECK(count_op(w, OpKind::Pool) == 2);
  CHECK(macs(w) == 1814073344);
  CHECK(macs(w) == macs(zoo_workload("resnet18", {})));
  // The first conv: 7x7/2 with pads 3 -> P = Q = 112.
  const Einsum& c1 = w.einsums[0];
  CHECK(c1.ranks[c1.rank_index("P")].size == 112);
  CHECK(c1.ranks[c1.rank_index("R")].size == 7);
  // Residual add joins two branches; the Gemm reads the pooled tensor through Flatten.
  const int add = w.einsum_index("/layer1/layer1.0/Add");
  REQUIRE(add >= 0);
  CHECK(w.einsums[add].tensors.size() == 3);
  const Einsum& fc = w.einsums.back();
  CHECK(fc.tensors[0].name == "/avgpool/GlobalAveragePool_output_0");
  CHECK(fc.tensors[0].dims.size() == 4);  // indexes the 4-D pool output, not the flattened view
  // Without folding, each of the 17 ReLUs becomes an Elementwise Einsum.
  Workload nf = import_onnx(model("resnet18.onnx"), OnnxOptions{false});
  CHECK(nf.einsums.size() == w.einsums.size() + 17);
  CHECK(macs(nf) == macs(w));
}

TEST_CASE("workload onnx mobilenetv2: depthwise convs, equals the zoo") {
  Workload w = import_onnx(model("mobilenetv2.onnx"));
  CHECK(convs(w) == 52);
  const int dw = static_cast<int>(std::count_if(w.einsums.begin(), w.einsums.end(), [](const Einsum& e) {
    return e.op == OpKind::Mac && e.rank_index("R") >= 0 && e.rank_index("K") < 0;
  }));
  CHECK(dw == 17);
  CHECK(count_op(w, OpKind::Elementwise) == 10);
  CHECK(macs(w) == 300774272);
  CHECK(macs(w) == macs(zoo_workload("mobilenet_v2", {})));
}

TEST_CASE("workload onnx squeezenet (quantized QLinearConv, Concat): 349.2 MMACs") {
  Workload w = import_onnx(model("squeezenet.onnx"));
  CHECK(convs(w) == 26);
  CHECK(count_op(w, OpKind::Copy) == 8);  // Concats
  // SqueezeNet 1.1: conv1 3x3/2 64ch (224 -> 111); fire(H, Cin, squeeze, expand).
  auto fire = [](int64_t H, int64_t C, int64_t s, int64_t e) { return H * H * (C * s + s * e + 9 * s * e); };
  const int64_t expected = conv(111, 3, 64, 3) + fire(55, 64, 16, 64) + fire(55, 128, 16, 64) +
                           fire(27, 128, 32, 128) + fire(27, 256, 32, 128) + fire(13, 256, 48, 192) +
                           fire(13, 384, 48, 192) + fire(13, 384, 64, 256) + fire(13, 512, 64, 256) +
                           conv(13, 512, 1000, 1);
  CHECK(macs(w) == expected);
  CHECK(expected == 349151936);
  // A concat output feeds the next fire module.
  const TensorInfo& t = w.tensors[w.tensor_index("fire2/concat_1")];
  CHECK(w.einsums[t.producer].op == OpKind::Copy);
  CHECK(t.consumers.size() == 1);
}

TEST_CASE("workload onnx fsrcnn: 8 convs at 540x960") {
  Workload w = import_onnx(model("fsrcnn.onnx"));
  CHECK(convs(w) == 8);
  // Per output pixel: 5x5 1->56, 1x1 56->12, 4x 3x3 12->12, 1x1 12->56, 3x3 56->16.
  const int64_t per_pixel = 25 * 56 + 56 * 12 + 4 * 9 * 12 * 12 + 12 * 56 + 9 * 56 * 16;
  CHECK(macs(w) == int64_t{540} * 960 * per_pixel);
  CHECK(macs(w) == 8290252800);
}

TEST_CASE("workload onnx inception_v2: 69 convs, 4-way concats, BN folded") {
  Workload w = import_onnx(model("inception_v2.onnx"));
  CHECK(convs(w) == 69);
  CHECK(count_op(w, OpKind::Mac) == 70);
  CHECK(count_op(w, OpKind::Softmax) == 1);
  CHECK(count_op(w, OpKind::Pool) == 13);
  CHECK(count_op(w, OpKind::Elementwise) == 0);  // BN Mul/Add by constants fold into the convs
  // 10 Concats: 4 inputs need two chained Copy Einsums (at most 3 inputs per Einsum).
  CHECK(count_op(w, OpKind::Copy) >= 10);
  CHECK(w.einsums[0].operations() == conv(112, 3, 64, 7));  // conv1/7x7_s2
  CHECK(w.einsums[w.einsum_index("Conv:conv2/3x3_1")].operations() == conv(56, 64, 192, 3));
  CHECK(macs(w) == 2018851840);
}

TEST_CASE("workload onnx attention head: MatMul through Transpose, Softmax") {
  Workload w = import_onnx(test::shared_data("stream/head_28fb9011/testing/workload/attention_head.onnx"));
  REQUIRE(w.einsums.size() == 6);
  const Einsum& s = w.einsums[w.einsum_index("MatMul:scores")];
  CHECK(s.operations() == 128 * 128 * 64);
  CHECK(s.tensors[1].name == "K");                          // the transposed K, read in place
  CHECK(s.tensors[1].role == TensorRole::Weight);           // second operand: weight role
  CHECK(s.tensors[1].dims[0][0].rank == s.rank_index("N")); // K[n, k] after the transpose
  CHECK(count_op(w, OpKind::Softmax) == 1);
  CHECK(macs(w) == 3 * 128 * 512 * 64 + 2 * 128 * 128 * 64);
}

TEST_CASE("workload onnx errors: missing, truncated, corrupt, empty, unsupported") {
  auto expect = [](const std::string& path, const std::string& text) {
    try {
      import_onnx(path);
      FAIL("expected InputError for " << path);
    } catch (const InputError& e) {
      CHECK(e.where().file == path);
      CHECK_MESSAGE(std::string(e.what()).find(text) != std::string::npos, std::string(e.what()));
    }
  };
  expect("/nonexistent/model.onnx", "no such file");
  const std::string bytes = slurp(model("resnet18.onnx"));
  REQUIRE(bytes.size() == 18600);
  expect(tmp_file("truncated.onnx", bytes.substr(0, bytes.size() / 2)), "truncated");
  std::string corrupt = bytes;
  for (size_t i = 0; i < 64; ++i) corrupt[i] = static_cast<char>(0xff);
  expect(tmp_file("corrupt.onnx", corrupt), "not a valid ONNX model");
  expect(tmp_file("text.onnx", "this is not a protobuf\n"), "ONNX");
  expect(tmp_file("empty.onnx", ""), "no graph nodes");
  expect(std::filesystem::temp_directory_path().string(), "directory");
  // Unsupported operator: the node and the operator are named.
  // Unsupported operator (every "Relu" renamed "Relx", which keeps the protobuf valid): the
  // operator is named with a suggestion.
  std::string relx = bytes;
  for (size_t p = relx.find("Relu"); p != std::string::npos; p = relx.find("Relu", p)) relx[p + 3] = 'x';
  expect(tmp_file("relx.onnx", relx), "unsupported ONNX operator 'Relx' (did you mean 'Relu'?)");
}
