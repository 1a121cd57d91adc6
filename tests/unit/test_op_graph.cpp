// The operator graph (GET-fusion's computational graph) of the ten networks in shared/data/get.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <ostream>

#include "engine/common/error.hpp"
#include "engine/workload/onnx_import.hpp"
#include "engine/workload/op_graph.hpp"
#include "engine/workload/zoo.hpp"
#include "test_support.hpp"

using namespace mapfuse;

namespace mapfuse {
inline std::ostream& operator<<(std::ostream& os, const Shape3& s) {
  return os << "(" << s.c << "," << s.h << "," << s.w << ")";
}
}  // namespace mapfuse

namespace {
std::string get_onnx(const std::string& net) { return test::shared_data("get/onnx/" + net + ".onnx"); }
std::map<std::string, int> op_histogram(const OpGraph& g) {
  std::map<std::string, int> h;
  for (const auto& n : g.nodes) ++h[n.op_type];
  return h;
}
}  // namespace

TEST_CASE("op_graph: node counts and weights of the ten GET networks") {
  struct Net {
    const char* file;
    int nodes;        // shared/data/get/README.md "ONNX nodes" minus Constant and static shape arithmetic
    int convs;
    int64_t weights;  // README "weight elements (ONNX, BN folded)"
  };
  // DeepLabV3: 188 ONNX nodes - 8 Constant - 2 Shape - 2 Slice - 2 Concat of shape values = 174
  // (note §6 counts 180 with the shape arithmetic; it reads no activation data).
  const Net nets[] = {{"efficientnet_b3", 386, 130, 12189584},
                      {"resnet152", 360, 155, 60117096},
                      {"deeplabv3_mobilenet_v3_large", 174, 70, 11011485},
                      {"mobilenet_v2", 100, 52, 3487816},
                      {"vgg16", 38, 13, 138357544},
                      {"resnet50", 122, 53, 25530472},
                      {"resnet18", 49, 20, 11684712},
                      {"squeezenet1_0", 65, 26, 1248424},
                      {"squeezenet1_1", 65, 26, 1235496},
                      {"efficientnet_b0", 239, 81, 5267540}};
  for (const auto& net : nets) {
    CAPTURE(net.file);
    const OpGraph g = load_op_graph(get_onnx(net.file));
    CHECK(g.size() == net.nodes);
    CHECK(op_histogram(g)["Conv"] == net.convs);
    CHECK(g.total_weight_elems() == net.weights);
    REQUIRE(g.network_inputs.size() == 1);
    // Topological labels, CSR consistency, exactly one network output.
    int outputs = 0;
    for (int v = 0; v < g.size(); ++v) {
      outputs += g.nodes[v].is_output;
      for (int p : g.preds(v)) CHECK(p < v);
      for (int s : g.succs(v)) CHECK(s > v);
      auto ie = g.in_edges(v);
      for (size_t k = 0; k < ie.size(); ++k) {
        CHECK(g.edges[ie[k]].to == v);
        CHECK(g.edges[ie[k]].from == g.preds(v)[k]);
        CHECK(g.edges[ie[k]].elems == g.nodes[g.preds(v)[k]].out.elems());
      }
    }
    CHECK(outputs == 1);
    CHECK(g.nodes.back().is_output);
  }
}

TEST_CASE("op_graph: shapes and attributes (VGG16, DeepLabV3 Resize, EfficientNet SE)") {
  const OpGraph vgg = load_op_graph(get_onnx("vgg16"));
  // conv1_1 (0) -> relu (1) -> conv1_2 (2)
  const OpNode& c12 = vgg.nodes[2];
  CHECK(c12.op_type == "Conv");
  CHECK(c12.cls == OpClass::Conv);
  CHECK(c12.inputs.size() == 1);
  CHECK(c12.inputs[0].producer == 1);
  CHECK(c12.inputs[0].shape == Shape3{64, 224, 224});
  CHECK(c12.out == Shape3{64, 224, 224});
  CHECK(c12.kh == 3);
  CHECK(c12.kw == 3);
  CHECK(c12.sh == 1);
  CHECK(c12.pad_left + c12.pad_right == 2);
  CHECK(c12.weight_elems == 64 * 64 * 9 + 64);
  CHECK(c12.bias_elems == 64);
  CHECK(vgg.nodes[0].inputs[0].producer == -1);
  CHECK(vgg.nodes[0].inputs[0].net_input == 0);
  CHECK(vgg.nodes[0].inputs[0].shape == Shape3{3, 224, 224});
  // MaxPool 2x2 stride 2 after conv1_2's ReLU.
  CHECK(vgg.nodes[4].cls == OpClass::Pool);
  CHECK(vgg.nodes[4].kh == 2);
  CHECK(vgg.nodes[4].sh == 2);
  CHECK(vgg.nodes[4].out == Shape3{64, 112, 112});
  // Classifier: Flatten (a node) then Gemm 25088 -> 4096.
  const int fl = vgg.node_index(vgg.nodes[vgg.size() - 6].name);
  CHECK(vgg.nodes[fl].op_type == "Flatten");
  CHECK(vgg.nodes[fl].out == Shape3{25088, 1, 1});
  CHECK(vgg.nodes[fl + 1].cls == OpClass::Gemm);
  CHECK(vgg.nodes[fl + 1].weight_elems == 25088 * 4096 + 4096);

  const OpGraph dl = load_op_graph(get_onnx("deeplabv3_mobilenet_v3_large"));
  auto h = op_histogram(dl);
  CHECK(h["Resize"] == 2);
  CHECK(h["HardSigmoid"] == 28);
  CHECK(h["Concat"] == 1);  // the ASPP concat; the two on shape values are static
  CHECK(h.count("Shape") == 0);
  CHECK(dl.nodes.back().op_type == "Resize");
  CHECK(dl.nodes.back().out == Shape3{21, 513, 513});
  CHECK(dl.nodes.back().inputs[0].shape == Shape3{21, 33, 33});  // output stride 16

  // EfficientNet-B3's first SE block: x -> GAP -> Conv -> SiLU -> Conv -> Sigmoid -> Mul(s, x).
  const OpGraph eb = load_op_graph(get_onnx("efficientnet_b3"));
  int se_mul = -1;
  for (int v = 0; v < eb.size() && se_mul < 0; ++v)
    if (eb.nodes[v].cls == OpClass::Binary && eb.nodes[v].op_type == "Mul" &&
        !(eb.nodes[v].inputs[0].shape == eb.nodes[v].inputs[1].shape))
      se_mul = v;
  REQUIRE(se_mul >= 0);
  const auto& m = eb.nodes[se_mul];
  CHECK(m.inputs[0].shape == Shape3{40, 1, 1});  // torch exports the scale first
  CHECK(m.inputs[1].shape == Shape3{40, 150, 150});
  CHECK(eb.nodes[m.inputs[0].producer].op_type == "Sigmoid");
  CHECK(eb.nodes[m.inputs[1].producer].op_type == "Mul");  // SiLU = x * sigmoid(x)
  // Depthwise convs are classified as such.
  CHECK(eb.nodes[1].op_type == "Sigmoid");
  CHECK(eb.nodes[3].cls == OpClass::DepthwiseConv);
  CHECK(eb.nodes[3].groups == 40);

  // Without reshape nodes, VGG16's Gemm reads the AveragePool output directly.
  OpGraphOptions o;
  o.keep_reshapes = false;
  const OpGraph vgg2 = load_op_graph(get_onnx("vgg16"), o);
  CHECK(vgg2.size() == 37);
  CHECK(vgg2.nodes[fl].cls == OpClass::Gemm);
  CHECK(vgg2.nodes[fl].inputs[0].producer == fl - 1);
}

TEST_CASE("op_graph: unsupported operator names the node and the operator") {
  std::ifstream in(get_onnx("resnet18"), std::ios::binary);
  std::string bytes{std::istreambuf_iterator<char>(in), {}};
  for (size_t p = bytes.find("Relu"); p != std::string::npos; p = bytes.find("Relu", p)) bytes[p + 3] = 'x';
  const auto path = (std::filesystem::temp_directory_path() / "mapfuse_test_op_graph_relx.onnx").string();
  std::ofstream(path, std::ios::binary) << bytes;
  try {
    load_op_graph(path);
    FAIL("expected InputError");
  } catch (const InputError& e) {
    const std::string w = e.what();
    CHECK(e.where().file == path);
    CHECK_MESSAGE(w.find("unsupported ONNX operator 'Relx' (did you mean 'Relu'?)") != std::string::npos, w);
    CHECK_MESSAGE(w.find("(Relx)") != std::string::npos, w);
  }
  CHECK_THROWS_AS(load_op_graph("/nonexistent/x.onnx"), InputError);
}

TEST_CASE("op_graph: the Einsum importer's keep_all_ops gives one Einsum per operator node") {
  OnnxOptions keep;
  keep.keep_all_ops = true;
  for (const char* net : {"resnet18", "mobilenet_v2", "vgg16", "squeezenet1_0", "efficientnet_b0"}) {
    CAPTURE(net);
    const OpGraph g = load_op_graph(get_onnx(net));
    const Workload w = import_onnx(get_onnx(net), keep);
    CHECK(static_cast<int>(w.einsums.size()) == g.size());
    // The default import is unchanged (data README: activations folded, Flatten a view).
    const Workload d = import_onnx(get_onnx(net));
    CHECK(static_cast<int>(d.einsums.size()) < g.size());
  }
  CHECK(import_onnx(get_onnx("resnet18")).einsums.size() == 31);
  CHECK(import_onnx(get_onnx("vgg16")).einsums.size() == 22);
  // DeepLabV3: the ASPP pooling branch's 1x1 -> 33x33 Resize is a broadcast and imports; the
  // final 33 -> 513 bilinear upsample has no affine projection and is refused by name.
  try {
    import_onnx(get_onnx("deeplabv3_mobilenet_v3_large"), keep);
    FAIL("expected InputError");
  } catch (const InputError& e) {
    const std::string w = e.what();
    CHECK_MESSAGE(w.find("node '/m/Resize' (Resize)") != std::string::npos, w);
    CHECK_MESSAGE(w.find("from 33 to 513") != std::string::npos, w);
  }
}

TEST_CASE("op_graph: other torchvision operators (Split, channel shuffle, Pad, Slice, Resize, MatMul, LayerNorm)") {
  // tests/fixtures/get/torchvision_ops.textproto, x (8,16,16).
  const OpGraph g = load_op_graph(test::source_dir("tests/fixtures/get/torchvision_ops.onnx"));
  const char* ops[] = {"Pad",     "Conv",      "HardSwish", "Split",  "Relu",   "Concat",
                       "Reshape", "Transpose", "Reshape",   "Slice",  "Resize", "GlobalAveragePool",
                       "Flatten", "MatMul",    "LayerNormalization", "Softmax"};
  REQUIRE(g.size() == 16);
  for (int v = 0; v < 16; ++v) CHECK(g.nodes[v].op_type == ops[v]);
  CHECK(g.nodes[0].cls == OpClass::Pad);
  CHECK(g.nodes[0].out == Shape3{8, 18, 18});
  CHECK(g.nodes[0].weight_elems == 0);  // the pads are an attribute, not weights
  CHECK(g.nodes[1].inputs[0].shape == Shape3{8, 18, 18});
  CHECK(g.nodes[1].out == Shape3{16, 16, 16});
  CHECK(g.nodes[1].weight_elems == 16 * 8 * 9);
  CHECK(g.nodes[2].cls == OpClass::Unary);
  // Split: one node whose two outputs feed the ReLU and the Concat.
  CHECK(g.nodes[3].cls == OpClass::Reshape);
  CHECK(g.nodes[4].inputs[0].producer == 3);
  CHECK(g.nodes[5].inputs.size() == 2);
  CHECK(g.nodes[5].inputs[0].producer == 4);
  CHECK(g.nodes[5].inputs[1].producer == 3);
  CHECK(g.nodes[5].inputs[1].shape == Shape3{8, 16, 16});
  CHECK(g.nodes[5].out == Shape3{16, 16, 16});
  CHECK(g.nodes[9].out == Shape3{8, 16, 16});
  CHECK(g.nodes[10].cls == OpClass::Resize);
  CHECK(g.nodes[10].out == Shape3{8, 32, 32});
  CHECK(g.nodes[10].weight_elems == 0);  // scales
  CHECK(g.nodes[13].cls == OpClass::Gemm);
  CHECK(g.nodes[13].inputs[0].shape == Shape3{8, 1, 1});
  CHECK(g.nodes[13].out == Shape3{4, 1, 1});
  CHECK(g.nodes[14].weight_elems == 8);
  CHECK(g.nodes[15].is_output);
  CHECK(g.total_weight_elems() == 1152 + 32 + 8);
  CHECK(g.edges.size() == 16);  // a chain of 15 plus Split -> Concat
}

TEST_CASE("op_graph: the zoo's Xception as GET's operator graph (one node per Einsum)") {
  const OpGraph g = op_graph_from_workload(zoo_workload("xception"));
  REQUIRE(g.size() == 92);
  std::map<OpClass, int> n;
  for (const OpNode& v : g.nodes) ++n[v.cls];
  CHECK(n[OpClass::Conv] == 40);           // 2 stem + 4 shortcut + 34 pointwise
  CHECK(n[OpClass::DepthwiseConv] == 34);  // one per separable conv
  CHECK(n[OpClass::Pool] == 4);
  CHECK(n[OpClass::GlobalPool] == 1);
  CHECK(n[OpClass::Binary] == 12);
  CHECK(n[OpClass::Gemm] == 1);
  // Every node but the first reads its predecessor's output; the 12 adds read a second one.
  CHECK(g.edges.size() == 91 + 12);
  REQUIRE(g.network_inputs.size() == 1);
  CHECK(g.network_inputs[0] == Shape3{3, 299, 299});
  const OpNode& c1 = g.nodes[g.node_index("block1_conv1")];
  CHECK(c1.out == Shape3{32, 149, 149});
  CHECK((c1.kh == 3 && c1.sh == 2 && c1.pad_top == 0 && c1.pad_bottom == 0));
  CHECK(c1.weight_elems == 32 * 3 * 3 * 3);
  // "same" 3x3/2 pool of 147 rows: one padding row above (the zoo's place) and one below.
  const OpNode& pool = g.nodes[g.node_index("block2_pool")];
  CHECK(pool.out == Shape3{128, 74, 74});
  CHECK((pool.kh == 3 && pool.sh == 2 && pool.pad_top == 1 && pool.pad_bottom == 1));
  const OpNode& dw = g.nodes[g.node_index("block14_sepconv1.dw")];
  CHECK((dw.depthwise && dw.groups == 1024 && dw.weight_elems == 1024 * 9));
  const OpNode& add = g.nodes[g.node_index("block2_add")];
  REQUIRE(add.inputs.size() == 2);
  CHECK(add.inputs[0].producer == g.node_index("block2_pool"));
  CHECK(add.inputs[1].producer == g.node_index("block2_residual"));
  const OpNode& fc = g.nodes[g.node_index("predictions")];
  CHECK((fc.out == Shape3{1000, 1, 1} && fc.weight_elems == 2048 * 1000 && fc.is_output));
  CHECK(!add.is_output);
  // A transformer is not a CNN graph: the first non-[N,C,H,W] tensor is named.
  try {
    op_graph_from_workload(zoo_workload("mobilebert_block"));
    FAIL("expected InputError");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("'embedding'") != std::string::npos);
  }
}
