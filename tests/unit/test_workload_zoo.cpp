// Model zoo: structure and MAC totals against hand-derived layer-by-layer sums.
#include <doctest/doctest.h>

#include <algorithm>

#include "engine/common/error.hpp"
#include "engine/workload/tiles.hpp"
#include "engine/workload/zoo.hpp"

using namespace mapfuse;

namespace {
int64_t macs(const Workload& w) {
  int64_t s = 0;
  for (size_t i = 0; i < w.einsums.size(); ++i)
    if (w.einsums[i].op == OpKind::Mac) s += w.count(static_cast<int>(i)) * w.einsums[i].operations();
  return s;
}
int count_op(const Workload& w, OpKind k) {
  return static_cast<int>(std::count_if(w.einsums.begin(), w.einsums.end(), [&](const Einsum& e) { return e.op == k; }));
}
const Einsum& einsum(const Workload& w, std::string_view n) {
  const int i = w.einsum_index(n);
  REQUIRE_MESSAGE(i >= 0, n);
  return w.einsums[i];
}
// MACs of a k x k conv producing H x H x K from C channels.
constexpr int64_t conv(int64_t H, int64_t C, int64_t K, int64_t k) { return H * H * C * K * k * k; }
}  // namespace

TEST_CASE("workload zoo resnet18: DAG shape and 1.814 GMACs") {
  Workload w = zoo_workload("resnet18", {});
  // conv1 + 16 block convs + 3 downsamples + fc
  CHECK(count_op(w, OpKind::Mac) == 21);
  CHECK(count_op(w, OpKind::Elementwise) == 8);  // residual adds
  CHECK(count_op(w, OpKind::Pool) == 2);         // maxpool, avgpool
  const int64_t expected = conv(112, 3, 64, 7)                               // conv1
                           + 4 * conv(56, 64, 64, 3)                         // layer1
                           + conv(28, 64, 128, 3) + 3 * conv(28, 128, 128, 3) + conv(28, 64, 128, 1)
                           + conv(14, 128, 256, 3) + 3 * conv(14, 256, 256, 3) + conv(14, 128, 256, 1)
                           + conv(7, 256, 512, 3) + 3 * conv(7, 512, 512, 3) + conv(7, 256, 512, 1)
                           + 512 * 1000;                                     // fc
  CHECK(expected == 1814073344);
  CHECK(macs(w) == expected);
  // The first residual add joins the block output and the maxpool output (a real branch).
  const Einsum& add = einsum(w, "layer1.0.add");
  CHECK(add.tensors.size() == 3);
  CHECK(add.tensors[0].name == "layer1.0.conv2");
  CHECK(add.tensors[1].name == "maxpool");
  const TensorInfo& mp = w.tensors[w.tensor_index("maxpool")];
  CHECK(mp.consumers.size() == 2);
  CHECK(w.einsums[mp.producer].name == "maxpool");
  // Timeloop cnn-layer semantics: conv1's input view covers (112-1)*2 + 7 = 229 rows (padding).
  const Einsum& c1 = einsum(w, "conv1");
  int64_t ext[kMaxRanks];
  for (size_t r = 0; r < c1.ranks.size(); ++r) ext[r] = c1.ranks[r].size;
  CHECK(Einsum::dim_extent(c1.tensors[1].dims[2], ext) == 229);
  CHECK(c1.tensors[0].role == TensorRole::Weight);
  CHECK(c1.tensors[1].role == TensorRole::Input);
  CHECK(c1.tensors[2].role == TensorRole::Output);
  // Batch is a parameter.
  CHECK(macs(zoo_workload("resnet18", {4, 1})) == 4 * expected);
}

TEST_CASE("same_mapping_problem: ResNet-18's repeated layers, names aside, and what tells problems apart") {
  const Workload w = zoo_workload("resnet18", {});
  std::vector<const Einsum*> distinct;
  for (const Einsum& e : w.einsums)
    if (e.op == OpKind::Mac &&
        std::none_of(distinct.begin(), distinct.end(), [&](const Einsum* d) { return same_mapping_problem(*d, e); }))
      distinct.push_back(&e);
  CHECK(distinct.size() == 12);  // conv1, 4 x layer1, per stage its first conv, the rest, downsample; fc
  const Einsum& a = einsum(w, "layer1.0.conv1");
  CHECK(same_mapping_problem(a, einsum(w, "layer1.1.conv2")));
  CHECK_FALSE(same_mapping_problem(a, einsum(w, "layer2.0.conv1")));  // stride 2, other sizes
  Einsum b = a;
  b.name = "other";
  b.tensors[0].name = "w2";
  b.tensors[1].offset = {0, 0, -3, -3};
  CHECK(same_mapping_problem(a, b));  // names and offsets: the cost model does not read them
  b = a;
  b.ranks[0].name = "X";  // constraints and dataflows name ranks
  CHECK_FALSE(same_mapping_problem(a, b));
  b = a;
  b.tensors[1].dims[2][0].coeff = 2;  // another stride
  CHECK_FALSE(same_mapping_problem(a, b));
  b = a;
  b.tensors[0].bits_per_value = 16;
  CHECK_FALSE(same_mapping_problem(a, b));
  b = a;
  b.op = OpKind::Pool;
  CHECK_FALSE(same_mapping_problem(a, b));
}

TEST_CASE("workload zoo resnet50: 4.089 GMACs as DOSA's layer counts give") {
  Workload w = zoo_workload("resnet50", {});
  CHECK(count_op(w, OpKind::Mac) == 54);          // 53 convs + fc
  CHECK(count_op(w, OpKind::Elementwise) == 16);  // one add per bottleneck
  // Bottleneck (torchvision v1.5, stride on the 3x3): per stage l with width c at size H.
  // First block: conv1 1x1 at the input resolution (the stride is on conv2), strided 1x1 downsample.
  auto stage = [](int n, int64_t H, int64_t Hin, int64_t cin, int64_t c) {
    return conv(Hin, cin, c, 1) + conv(H, c, c, 3) + conv(H, c, 4 * c, 1) + conv(H, cin, 4 * c, 1) +
           (n - 1) * (conv(H, 4 * c, c, 1) + conv(H, c, c, 3) + conv(H, c, 4 * c, 1));
  };
  const int64_t expected = conv(112, 3, 64, 7) + stage(3, 56, 56, 64, 64) + stage(4, 28, 56, 256, 128) +
                           stage(6, 14, 28, 512, 256) + stage(3, 7, 14, 1024, 512) + 2048 * 1000;
  CHECK(expected == 4089184256);
  CHECK(macs(w) == expected);
  CHECK(einsum(w, "layer2.0.conv2").ranks[2].size == 28);  // P after the strided 3x3
}

TEST_CASE("workload zoo vgg16 and vgg19: 15.47 and 19.63 GMACs") {
  const int64_t fc = 512 * 7 * 7 * 4096 + 4096 * 4096 + 4096 * 1000;
  const int64_t v16 = conv(224, 3, 64, 3) + conv(224, 64, 64, 3) + conv(112, 64, 128, 3) +
                      conv(112, 128, 128, 3) + conv(56, 128, 256, 3) + 2 * conv(56, 256, 256, 3) +
                      conv(28, 256, 512, 3) + 2 * conv(28, 512, 512, 3) + 3 * conv(14, 512, 512, 3) + fc;
  const int64_t v19 = v16 + conv(56, 256, 256, 3) + conv(28, 512, 512, 3) + conv(14, 512, 512, 3);
  CHECK(v16 == 15470264320);
  Workload w16 = zoo_workload("vgg16", {});
  CHECK(count_op(w16, OpKind::Mac) == 16);
  CHECK(count_op(w16, OpKind::Pool) == 5);
  CHECK(macs(w16) == v16);
  Workload w19 = zoo_workload("vgg19", {});
  CHECK(count_op(w19, OpKind::Mac) == 19);
  CHECK(macs(w19) == v19);
  CHECK(v19 == 19632062464);
}

TEST_CASE("workload zoo mobilenet_v1 and mobilenet_v2: 0.569 and 0.301 GMACs") {
  // MobileNetV1 (Howard et al. Table 1): depthwise 3x3 + pointwise per row.
  auto dwpw = [](int64_t Hout, int64_t C, int64_t K) { return Hout * Hout * C * 9 + Hout * Hout * C * K; };
  const int64_t v1 = conv(112, 3, 32, 3) + dwpw(112, 32, 64) + dwpw(56, 64, 128) + dwpw(56, 128, 128) +
                     dwpw(28, 128, 256) + dwpw(28, 256, 256) + dwpw(14, 256, 512) + 5 * dwpw(14, 512, 512) +
                     dwpw(7, 512, 1024) + dwpw(7, 1024, 1024) + 1024 * 1000;
  CHECK(v1 == 568740352);
  Workload w1 = zoo_workload("mobilenet_v1", {});
  CHECK(macs(w1) == v1);
  CHECK(count_op(w1, OpKind::Mac) == 28);
  CHECK(einsum(w1, "conv1.dw").rank_index("K") == -1);  // depthwise: no K rank

  // MobileNetV2 (torchvision): expand 1x1 (t=6), depthwise 3x3 (stride on the first block),
  // project 1x1; residual when stride 1 and channels match.
  int64_t v2 = conv(112, 3, 32, 3);
  int64_t H = 112, cin = 32, adds = 0;
  struct S { int64_t t, c, n, s; };
  for (S st : {S{1, 16, 1, 1}, S{6, 24, 2, 2}, S{6, 32, 3, 2}, S{6, 64, 4, 2}, S{6, 96, 3, 1}, S{6, 160, 3, 2},
               S{6, 320, 1, 1}})
    for (int i = 0; i < st.n; ++i) {
      const int64_t s = i == 0 ? st.s : 1, hid = cin * st.t, Ho = H / s;
      if (st.t != 1) v2 += H * H * cin * hid;
      v2 += Ho * Ho * hid * 9 + Ho * Ho * hid * st.c;
      adds += (s == 1 && cin == st.c);
      H = Ho;
      cin = st.c;
    }
  v2 += 7 * 7 * 320 * 1280 + 1280 * 1000;
  CHECK(v2 == 300774272);
  Workload w2 = zoo_workload("mobilenet_v2", {});
  CHECK(macs(w2) == v2);
  CHECK(count_op(w2, OpKind::Elementwise) == adds);
  CHECK(adds == 10);
  CHECK(count_op(w2, OpKind::Mac) == 53);  // 52 convs + classifier
}

TEST_CASE("workload zoo xception: Chollet's Fig. 5 at 299x299, 8.357 G MACs") {
  // Separable conv = depthwise 3x3 + pointwise 1x1 at output size H.
  auto sep = [](int64_t H, int64_t C, int64_t K) { return H * H * C * 9 + H * H * C * K; };
  const int64_t entry = conv(149, 3, 32, 3) + conv(147, 32, 64, 3) +                    // stem (valid)
                        sep(147, 64, 128) + sep(147, 128, 128) + conv(74, 64, 128, 1) +   // block 2
                        sep(74, 128, 256) + sep(74, 256, 256) + conv(37, 128, 256, 1) +   // block 3
                        sep(37, 256, 728) + sep(37, 728, 728) + conv(19, 256, 728, 1);    // block 4
  const int64_t middle = 8 * 3 * sep(19, 728, 728);
  const int64_t exit = sep(19, 728, 728) + sep(19, 728, 1024) + conv(10, 728, 1024, 1) +  // block 13
                       sep(10, 1024, 1536) + sep(10, 1536, 2048) + 2048 * 1000;          // block 14, fc
  CHECK(entry == 2692927032);
  CHECK(middle == 4648547904);
  CHECK(entry + middle + exit == 8357403496);  // the paper's "8.4 G" multiply-adds
  Workload w = zoo_workload("xception", {});
  CHECK(macs(w) == entry + middle + exit);
  CHECK(w.einsums.size() == 92);
  CHECK(count_op(w, OpKind::Mac) == 75);          // 2 stem + 4 residual + 34 separable x 2 + fc
  CHECK(count_op(w, OpKind::Elementwise) == 12);  // 4 shortcut adds + 8 middle-flow adds
  CHECK(count_op(w, OpKind::Pool) == 5);          // 4 max pools + global average pool
  auto size = [&](std::string_view n, std::string_view r) {
    const Einsum& e = einsum(w, n);
    return e.ranks[e.rank_index(r)].size;
  };
  CHECK(size("block1_conv1", "P") == 149);
  CHECK(size("block2_sepconv1.dw", "P") == 147);
  CHECK(size("block2_sepconv1.dw", "C") == 64);
  CHECK(size("block2_sepconv1.pw", "K") == 128);
  CHECK(size("block2_pool", "P") == 74);
  CHECK(size("block3_pool", "P") == 37);
  CHECK(size("block4_pool", "P") == 19);
  CHECK(size("block13_pool", "P") == 10);
  CHECK(size("block13_sepconv2.pw", "K") == 1024);
  CHECK(size("block14_sepconv2.pw", "C") == 1536);
  CHECK(size("block14_sepconv2.pw", "K") == 2048);
  CHECK(size("avg_pool", "R") == 10);
  // The shortcut joins the strided 1x1 conv of the block's input with the pooled main path; the
  // middle-flow add reads the previous block's add.
  const Einsum& a2 = einsum(w, "block2_add");
  CHECK(a2.tensors[0].name == "block2_pool");
  CHECK(a2.tensors[1].name == "block2_residual");
  CHECK(einsum(w, "block2_residual").tensors[1].name == "block1_conv2");
  CHECK(einsum(w, "block5_add").tensors[1].name == "block4_add");
  CHECK(w.tensors[w.tensor_index("block4_add")].consumers.size() == 2);
  CHECK(w.tensors[w.tensor_index("block12_add")].consumers.size() == 2);  // block13 sepconv + residual
  // "same" 3x3/2 pooling: output row 73 of block2_pool reads rows 145..147, the last one padding.
  const Einsum& pool = einsum(w, "block2_pool");
  CHECK(pool.tensors[0].offset == std::vector<int64_t>{0, 0, -1, -1});
}

TEST_CASE("workload zoo mobilebert_block: Table 1's embedding + first body at 128 tokens, 136.3 M MACs") {
  const int64_t T = 128;
  const int64_t embedding = T * 3 * 128 * 512;                 // 3-convolution 384 -> 512
  const int64_t bottlenecks = 2 * T * 512 * 128;               // layer input and shared Q/K input
  const int64_t qkv = 2 * T * 128 * 128 + T * 512 * 128;       // Q, K from 128; V from 512
  const int64_t attention = 2 * 4 * T * T * 32;                // scores and context, 4 heads of 32
  const int64_t out = T * 128 * 128;                           // attention output 128 -> 128
  const int64_t ffn = 4 * 2 * T * 128 * 512;                   // 4 stacked FFNs 128 -> 512 -> 128
  const int64_t up = T * 128 * 512;                            // output bottleneck 128 -> 512
  const int64_t total = embedding + bottlenecks + qkv + attention + out + ffn + up;
  CHECK(total == 136314880);
  Workload w = zoo_workload("mobilebert_block", {});
  CHECK(macs(w) == total);
  CHECK(w.einsums.size() == 25);
  CHECK(count_op(w, OpKind::Mac) == 18);
  CHECK(count_op(w, OpKind::Elementwise) == 6);  // attention add, 4 FFN adds, output add
  CHECK(count_op(w, OpKind::Softmax) == 1);
  CHECK(einsum(w, "attention.value").tensors[0].name == "embedding");
  CHECK(einsum(w, "attention.value").ranks[4].size == 512);
  CHECK(einsum(w, "attention.key").tensors[0].name == "bottleneck.attention");
  CHECK(einsum(w, "attention.scores").tensors[1].role == TensorRole::Weight);  // key, as gpt3_6.7b
  CHECK(w.tensors[w.tensor_index("embedding")].consumers.size() == 4);       // 2 bottlenecks, V, output add
  CHECK(einsum(w, "attention.add").tensors[1].name == "bottleneck.input");
  CHECK(einsum(w, "output.add").tensors[1].name == "embedding");
  CHECK(einsum(w, "ffn.3.intermediate").tensors[0].name == "ffn.2.add");
  // The 3-convolution reads tokens m-1..m+1: 130 rows with the padding.
  const Einsum& emb = einsum(w, "embedding");
  int64_t ext[kMaxRanks];
  for (size_t r = 0; r < emb.ranks.size(); ++r) ext[r] = emb.ranks[r].size;
  CHECK(Einsum::dim_extent(emb.tensors[0].dims[0], ext) == 130);
  // Stream's row tiling cuts every layer by tokens (M), so fused stacks go token by token.
  for (const Einsum& e : w.einsums) CHECK_MESSAGE(row_rank(e) == e.rank_index("M"), e.name);
  CHECK_THROWS_AS(zoo_workload("mobilebert_block", {2, 1}), InputError);
}

TEST_CASE("workload zoo gpt3_6.7b: 10 Einsums named and shaped as in AccelForge") {
  Workload w = zoo_workload("gpt3_6.7b", {});
  std::vector<std::string> names;
  for (const auto& e : w.einsums) names.push_back(e.name);
  CHECK(names == std::vector<std::string>{"I", "V", "K", "Q", "QK", "QK_softmax", "AV", "Z", "FFA", "FFB"});
  CHECK(einsum(w, "I").op == OpKind::Copy);
  CHECK(einsum(w, "QK_softmax").op == OpKind::Softmax);
  const int64_t T = 8192, D = 4096;
  CHECK(einsum(w, "V").operations() == T * D * D);             // 1.37e11
  CHECK(einsum(w, "QK").operations() == T * T * 32 * 128);     // 2.75e11
  CHECK(einsum(w, "AV").operations() == T * T * 32 * 128);
  CHECK(einsum(w, "FFA").operations() == T * D * 16384);       // 5.50e11
  CHECK(macs(w) == 4 * T * D * D + 2 * T * T * D + 2 * T * D * 16384);
  CHECK(macs(w) == 2199023255552);  // ~2.2e12 (timeloop_ffm.md 2.6)
  // Tensor names, ranks and roles.
  const Einsum& qk = einsum(w, "QK");
  CHECK(qk.tensors[0].name == "Q");
  CHECK(qk.tensors[0].role == TensorRole::Input);
  CHECK(qk.tensors[1].name == "K");
  CHECK(qk.tensors[1].role == TensorRole::Weight);
  CHECK(qk.tensors[1].dims[1][0].rank == qk.rank_index("P"));  // K[b,p,h,e]
  CHECK(einsum(w, "AV").tensors[1].name == "V");
  CHECK(einsum(w, "AV").tensors[1].role == TensorRole::Weight);
  CHECK(einsum(w, "V").tensors[1].name == "WV");
  CHECK(einsum(w, "V").tensors[1].dims.size() == 3);  // WV[h,e,d]
  CHECK(w.tensors[w.tensor_index("I")].consumers.size() == 3);
  CHECK(w.tensors[w.tensor_index("V")].consumers.size() == 1);
  // FFM paper setting: batch 64, 4096 tokens -> 5.28e13 linear + 8.80e12 attention MACs.
  Workload p = zoo_workload("gpt3_6.7b", {64, 4096});
  const int64_t linear = int64_t{201326592} * 64 * 4096, attention = int64_t{2} * 64 * 4096 * 4096 * 32 * 128;
  CHECK(macs(p) == linear + attention);
}

TEST_CASE("workload zoo matmul_chain_<n>: FFM shape cycle, T<i> -> T<i+1>") {
  Workload w = zoo_workload("matmul_chain_6", {});
  REQUIRE(w.einsums.size() == 6);
  const int64_t N[] = {16384, 4096, 4096, 16384, 16384, 4096}, K[] = {16384, 16384, 4096, 4096, 16384, 16384};
  int64_t total = 0;
  for (int i = 0; i < 6; ++i) {
    const Einsum& e = w.einsums[i];
    CHECK(e.name == "MM" + std::to_string(i));
    CHECK(e.ranks[e.rank_index("M")].size == 8192);
    CHECK(e.ranks[e.rank_index("N")].size == N[i]);
    CHECK(e.ranks[e.rank_index("K")].size == K[i]);
    CHECK(e.tensors[0].name == "T" + std::to_string(i));
    CHECK(e.tensors[2].name == "T" + std::to_string(i + 1));
    total += 8192 * N[i] * K[i];
  }
  CHECK(macs(w) == total);
  CHECK(w.tensors[w.tensor_index("T3")].producer == 2);
  CHECK(zoo_workload("matmul_chain_1", {}).einsums.size() == 1);
  CHECK(zoo_workload("matmul_chain_64", {}).einsums.size() == 64);
  CHECK_THROWS_AS(zoo_workload("matmul_chain_0", {}), InputError);
  CHECK_THROWS_AS(zoo_workload("matmul_chain_x", {}), InputError);
}

TEST_CASE("workload zoo: every name finalizes, unknown names and bad parameters throw") {
  for (const auto& n : zoo_names()) {
    const std::string name = n == "matmul_chain_<n>" ? "matmul_chain_4" : n;
    Workload w = zoo_workload(name, {});
    CHECK_MESSAGE(!w.tensors.empty(), name);  // finalize() built the tensor table
  }
  try {
    zoo_workload("resnet51", {});
    FAIL("expected InputError");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("did you mean 'resnet50'") != std::string::npos);
  }
  CHECK_THROWS_AS(zoo_workload("resnet18", {0, 1}), InputError);
  CHECK_THROWS_AS(zoo_workload("gpt3_6.7b", {1, -5}), InputError);
}
