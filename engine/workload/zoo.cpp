// The model zoo. Sources of the layer shapes:
//  - ResNet-18/50: torchvision/models/resnet.py (BasicBlock, Bottleneck "v1.5": stride on the 3x3
//    conv; layers [2,2,2,2] and [3,4,6,3]); He et al., "Deep Residual Learning", CVPR 2016, Table 1.
//  - VGG-16/19: torchvision/models/vgg.py cfgs "D" and "E"; Simonyan & Zisserman, ICLR 2015,
//    Table 1. At 224x224 the AdaptiveAvgPool2d((7,7)) is the identity and is omitted.
//  - MobileNetV1: Howard et al., arXiv:1704.04861, Table 1 (width 1.0, 224; the second-to-last
//    depthwise layer has stride 1, the table's "s2" there is a known typo).
//  - MobileNetV2: torchvision/models/mobilenetv2.py (inverted_residual_setting); Sandler et al.,
//    CVPR 2018, Table 2 (width 1.0).
//  - gpt3_6.7b: AccelForge examples/workloads/gpt3_6.7B.yaml (FFM paper era, a9062b43); Brown et
//    al. 2020 Table 2.1 (d_model 4096, 32 heads of 128, FFN 4*d_model).
//  - matmul_chain_<n>: FFM paper section 7.5 (M = 8192; (N;K) cycle).
//  - Xception: Chollet, "Xception", CVPR 2017, Fig. 5 (entry, 8x middle, exit flow; 299x299
//    input, the paper's own). Padding as Keras' applications/xception.py ("valid" stem convs,
//    "same" separable convs and 3x3/2 max pools).
//  - mobilebert_block: Sun et al., "MobileBERT", ACL 2020, Table 1 (embedding 128 with the
//    3-convolution to 512, one body: bottlenecks 512->128, 4 heads over 128, 4 stacked FFNs of
//    512), with queries and keys from a shared bottleneck and values from the 512-wide input as
//    in the released model (HF transformers MobileBertConfig: key_query_shared_bottleneck).
// Conventions (docs/workloads.md): convs use Timeloop cnn-layer semantics via make_conv (P,Q are
// output sizes; the input view's extent (P-1)*stride + R includes the padding), BatchNorm and
// ReLU are folded into the producing conv, residual adds are Elementwise Einsums, pooling is Pool,
// fully connected layers are convs with R=S=input size and P=Q=1.
#include "engine/workload/zoo.hpp"

#include <charconv>

#include "engine/common/error.hpp"

namespace mapfuse {
namespace {

// MobileBERT's on-device latency setting: Sun et al. 2020 quote 62 ms on a Pixel 4 for 128 tokens.
constexpr int64_t kMobileBertTokens = 128;

struct Act {
  std::string name;
  int64_t C, H, W;
};

class CnnBuilder {
 public:
  CnnBuilder(std::string name, int64_t batch) : N_(batch) { w_.name = std::move(name); }

  Act input(int64_t C, int64_t H, int64_t W) { return {"input", C, H, W}; }

  // k x k conv, `pad` on every side (Timeloop cnn-layer: P = (H + 2 pad - k) / stride + 1).
  Act conv(const std::string& name, const Act& x, int64_t K, int64_t k, int64_t stride, int64_t pad) {
    ConvShape s;
    s.N = N_;
    s.C = x.C;
    s.K = K;
    s.R = s.S = k;
    s.Wstride = s.Hstride = stride;
    s.P = (x.H + 2 * pad - k) / stride + 1;
    s.Q = (x.W + 2 * pad - k) / stride + 1;
    s.Wpad = s.Hpad = pad;
    w_.einsums.push_back(make_conv(name, s, x.name, name + ".weight", name));
    return {name, K, s.P, s.Q};
  }

  Act dwconv(const std::string& name, const Act& x, int64_t k, int64_t stride, int64_t pad) {
    ConvShape s;
    s.N = N_;
    s.C = x.C;
    s.R = s.S = k;
    s.Wstride = s.Hstride = stride;
    s.P = (x.H + 2 * pad - k) / stride + 1;
    s.Q = (x.W + 2 * pad - k) / stride + 1;
    s.Wpad = s.Hpad = pad;
    w_.einsums.push_back(make_depthwise_conv(name, s, x.name, name + ".weight", name));
    return {name, x.C, s.P, s.Q};
  }

  // Depthwise-separable conv (Xception's SeparableConv2D, depth multiplier 1): a k x k depthwise
  // conv `<name>.dw` then a 1x1 pointwise conv `<name>.pw`.
  Act sepconv(const std::string& name, const Act& x, int64_t K, int64_t k, int64_t pad) {
    return conv(name + ".pw", dwconv(name + ".dw", x, k, 1, pad), K, 1, 1, 0);
  }

  // Fully connected layer over the whole input (R = H, S = W, P = Q = 1).
  Act fc(const std::string& name, const Act& x, int64_t K) {
    ConvShape s;
    s.N = N_;
    s.C = x.C;
    s.K = K;
    s.R = x.H;
    s.S = x.W;
    w_.einsums.push_back(make_conv(name, s, x.name, name + ".weight", name));
    return {name, K, 1, 1};
  }

  // Max pooling (k x k window; global average pooling when k covers the input).
  Act pool(const std::string& name, const Act& x, int64_t k, int64_t stride, int64_t pad) {
    const int64_t P = (x.H + 2 * pad - k) / stride + 1, Q = (x.W + 2 * pad - k) / stride + 1;
    Einsum e;
    e.name = name;
    e.op = OpKind::Pool;
    e.ranks = {{"R", k}, {"S", k}, {"P", P}, {"Q", Q}, {"C", x.C}, {"N", N_}};
    enum { R, S, Pr, Qr, C, N };
    e.tensors = {
        {x.name, TensorRole::Input, {{{N, 1}}, {{C, 1}}, {{R, 1}, {Pr, stride}}, {{S, 1}, {Qr, stride}}}, 8},
        {name, TensorRole::Output, {{{N, 1}}, {{C, 1}}, {{Pr, 1}}, {{Qr, 1}}}, 8},
    };
    if (pad > 0) e.tensors[0].offset = {0, 0, -pad, -pad};
    w_.einsums.push_back(std::move(e));
    return {name, x.C, P, Q};
  }
  Act global_pool(const std::string& name, const Act& x) { return pool(name, x, x.H, 1, 0); }

  // Residual add: out[n,c,h,w] = a[n,c,h,w] + b[n,c,h,w].
  Act add(const std::string& name, const Act& a, const Act& b) {
    Einsum e;
    e.name = name;
    e.op = OpKind::Elementwise;
    e.ranks = {{"N", N_}, {"C", a.C}, {"H", a.H}, {"W", a.W}};
    const std::vector<Projection> id = {{{0, 1}}, {{1, 1}}, {{2, 1}}, {{3, 1}}};
    e.tensors = {{a.name, TensorRole::Input, id, 8}, {b.name, TensorRole::Input, id, 8},
                 {name, TensorRole::Output, id, 8}};
    w_.einsums.push_back(std::move(e));
    return {name, a.C, a.H, a.W};
  }

  Workload done() {
    finalize(w_);
    return std::move(w_);
  }

 private:
  int64_t N_;
  Workload w_;
};

Workload resnet(const std::string& name, bool bottleneck, const std::vector<int>& blocks, int64_t N) {
  CnnBuilder b(name, N);
  Act x = b.input(3, 224, 224);
  x = b.conv("conv1", x, 64, 7, 2, 3);      // 112x112
  x = b.pool("maxpool", x, 3, 2, 1);        // 56x56
  const int64_t expansion = bottleneck ? 4 : 1;
  int64_t inplanes = 64;
  for (int l = 0; l < 4; ++l) {
    const int64_t planes = int64_t{64} << l;
    for (int i = 0; i < blocks[l]; ++i) {
      const int64_t stride = (l > 0 && i == 0) ? 2 : 1;
      const std::string p = "layer" + std::to_string(l + 1) + "." + std::to_string(i);
      Act identity = x, out;
      if (bottleneck) {
        out = b.conv(p + ".conv1", x, planes, 1, 1, 0);
        out = b.conv(p + ".conv2", out, planes, 3, stride, 1);
        out = b.conv(p + ".conv3", out, planes * expansion, 1, 1, 0);
      } else {
        out = b.conv(p + ".conv1", x, planes, 3, stride, 1);
        out = b.conv(p + ".conv2", out, planes, 3, 1, 1);
      }
      if (stride != 1 || inplanes != planes * expansion)
        identity = b.conv(p + ".downsample", x, planes * expansion, 1, stride, 0);
      x = b.add(p + ".add", out, identity);
      inplanes = planes * expansion;
    }
  }
  x = b.global_pool("avgpool", x);
  b.fc("fc", x, 1000);
  return b.done();
}

Workload vgg(const std::string& name, const std::vector<int>& cfg, int64_t N) {
  CnnBuilder b(name, N);
  Act x = b.input(3, 224, 224);
  int conv = 0, pool = 0;
  for (int c : cfg) {
    if (c == 0) x = b.pool("pool" + std::to_string(++pool), x, 2, 2, 0);
    else x = b.conv("conv" + std::to_string(++conv), x, c, 3, 1, 1);
  }
  x = b.fc("fc1", x, 4096);  // 512x7x7 -> 4096
  x = b.fc("fc2", x, 4096);
  b.fc("fc3", x, 1000);
  return b.done();
}

Workload mobilenet_v1(int64_t N) {
  CnnBuilder b("mobilenet_v1", N);
  Act x = b.input(3, 224, 224);
  x = b.conv("conv0", x, 32, 3, 2, 1);  // 112x112x32
  struct L { int64_t stride, out; };
  const L layers[] = {{1, 64},  {2, 128}, {1, 128}, {2, 256}, {1, 256}, {2, 512}, {1, 512},
                      {1, 512}, {1, 512}, {1, 512}, {1, 512}, {2, 1024}, {1, 1024}};
  int i = 0;
  for (const L& l : layers) {
    ++i;
    x = b.dwconv("conv" + std::to_string(i) + ".dw", x, 3, l.stride, 1);
    x = b.conv("conv" + std::to_string(i) + ".pw", x, l.out, 1, 1, 0);
  }
  x = b.global_pool("avgpool", x);
  b.fc("fc", x, 1000);
  return b.done();
}

Workload mobilenet_v2(int64_t N) {
  CnnBuilder b("mobilenet_v2", N);
  Act x = b.input(3, 224, 224);
  x = b.conv("features.0", x, 32, 3, 2, 1);
  struct S { int64_t t, c, n, s; };
  const S setting[] = {{1, 16, 1, 1}, {6, 24, 2, 2}, {6, 32, 3, 2}, {6, 64, 4, 2},
                       {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
  int f = 1;
  for (const S& st : setting)
    for (int i = 0; i < st.n; ++i, ++f) {
      const int64_t stride = i == 0 ? st.s : 1;
      const std::string p = "features." + std::to_string(f);
      Act in = x, h = x;
      if (st.t != 1) h = b.conv(p + ".expand", h, in.C * st.t, 1, 1, 0);
      h = b.dwconv(p + ".dw", h, 3, stride, 1);
      h = b.conv(p + ".project", h, st.c, 1, 1, 0);
      x = (stride == 1 && in.C == st.c) ? b.add(p + ".add", h, in) : h;
    }
  x = b.conv("features.18", x, 1280, 1, 1, 0);
  x = b.global_pool("avgpool", x);
  b.fc("classifier", x, 1000);
  return b.done();
}

// An Einsum from its parts, and a tensor access whose every dimension is one rank (the
// transformer builders' shapes).
Einsum einsum_of(std::string name, OpKind op, std::vector<Rank> ranks, std::vector<TensorAccess> tensors) {
  Einsum e;
  e.name = std::move(name);
  e.op = op;
  e.ranks = std::move(ranks);
  e.tensors = std::move(tensors);
  return e;
}
TensorAccess rank_access(std::string name, TensorRole role, const std::vector<int>& dims) {
  TensorAccess t{std::move(name), role, {}, 8};
  for (int d : dims) t.dims.push_back({{d, 1}});
  return t;
}

// Keras names (block<i>_sepconv<j>, block<i>_pool); the 1x1/2 shortcut convs are
// block<i>_residual and the adds block<i>_add. BatchNorm and the ReLUs fold (not modelled).
Workload xception(int64_t N) {
  CnnBuilder b("xception", N);
  Act x = b.input(3, 299, 299);
  x = b.conv("block1_conv1", x, 32, 3, 2, 0);  // 149x149
  x = b.conv("block1_conv2", x, 64, 3, 1, 0);  // 147x147
  // Entry flow blocks 2-4 and exit block 13: two separable convs, a 3x3/2 max pool, a 1x1/2
  // shortcut conv. "same" padding of 3x3/2 pads one row in total; pad 1 gives the same sizes
  // (147 -> 74 -> 37 -> 19 -> 10).
  auto down = [&](int block, const Act& in, int64_t K1, int64_t K2) {
    const std::string p = "block" + std::to_string(block);
    Act h = b.sepconv(p + "_sepconv1", in, K1, 3, 1);
    h = b.sepconv(p + "_sepconv2", h, K2, 3, 1);
    h = b.pool(p + "_pool", h, 3, 2, 1);
    return b.add(p + "_add", h, b.conv(p + "_residual", in, K2, 1, 2, 0));
  };
  x = down(2, x, 128, 128);  // 74x74
  x = down(3, x, 256, 256);  // 37x37
  x = down(4, x, 728, 728);  // 19x19
  for (int block = 5; block <= 12; ++block) {  // middle flow, 8 times
    const std::string p = "block" + std::to_string(block);
    Act h = x;
    for (int j = 1; j <= 3; ++j) h = b.sepconv(p + "_sepconv" + std::to_string(j), h, 728, 3, 1);
    x = b.add(p + "_add", h, x);
  }
  x = down(13, x, 728, 1024);  // 10x10
  x = b.sepconv("block14_sepconv1", x, 1536, 3, 1);
  x = b.sepconv("block14_sepconv2", x, 2048, 3, 1);
  x = b.global_pool("avg_pool", x);
  b.fc("predictions", x, 1000);
  return b.done();
}

// The first MobileBERT layer (embedding + one body) at batch 1 over `T` tokens. Hidden states are
// [token, feature] matrices (a row is a token, so Stream's row tiling cuts tokens); the attention
// tensors are [batch, head, token, feature] as the ONNX export has them. The word-embedding lookup
// is the input; NoNorm, the position/type embedding adds and the ReLUs fold (not modelled).
Workload mobilebert_block(int64_t T) {
  constexpr int64_t kEmbed = 128, kHidden = 512, kBottleneck = 128, kHeads = 4, kHeadDim = 32, kFfn = 512;
  Workload w;
  w.name = "mobilebert_block";
  auto push = [&](std::string name, OpKind op, std::vector<Rank> ranks, std::vector<TensorAccess> tensors) {
    w.einsums.push_back(einsum_of(std::move(name), op, std::move(ranks), std::move(tensors)));
  };
  const auto T_ = rank_access;
  const auto In = TensorRole::Input, Wt = TensorRole::Weight, Out = TensorRole::Output;
  // out[m, n] = in[m, k] * <out>.weight[k, n]
  auto linear = [&](const std::string& out, const std::string& in, int64_t K, int64_t N) {
    w.einsums.push_back(make_matmul(out, T, N, K, in, out + ".weight", out));
  };
  auto add = [&](const std::string& out, const std::string& a, const std::string& b, int64_t N) {
    enum { m, n };
    push(out, OpKind::Elementwise, {{"M", T}, {"N", N}},
         {T_(a, In, {m, n}), T_(b, In, {m, n}), T_(out, Out, {m, n})});
  };
  {  // The 3-convolution: each token's embedding concatenated with its neighbours' (zero at the
     // ends), 384 -> 512: a kernel-3 conv over the tokens with one row of padding.
    enum { m, n, r, c };
    TensorAccess x = T_("input", In, {m, c});
    x.dims[0].push_back({r, 1});
    x.offset = {-1, 0};
    push("embedding", OpKind::Mac, {{"M", T}, {"N", kHidden}, {"R", 3}, {"C", kEmbed}},
         {std::move(x), T_("embedding.weight", Wt, {r, c, n}), T_("embedding", Out, {m, n})});
  }
  linear("bottleneck.input", "embedding", kHidden, kBottleneck);
  linear("bottleneck.attention", "embedding", kHidden, kBottleneck);
  // X[b,h,m,e] = in[m,d] * WX[h,e,d]: queries and keys from the shared bottleneck, values from
  // the 512-wide layer input.
  for (const char* n : {"query", "key", "value"}) {
    enum { b, h, m, e, d };
    const bool value = std::string_view(n) == "value";
    const std::string name = std::string("attention.") + n;
    push(name, OpKind::Mac,
         {{"B", 1}, {"H", kHeads}, {"M", T}, {"E", kHeadDim}, {"D", value ? kHidden : kBottleneck}},
         {T_(value ? "embedding" : "bottleneck.attention", In, {m, d}), T_(name + ".weight", Wt, {h, e, d}),
          T_(name, Out, {b, h, m, e})});
  }
  {  // scores[b,h,m,p] = query[b,h,m,e] * key[b,h,p,e]   (key in the weight role, as gpt3_6.7b)
    enum { b, h, m, p, e };
    push("attention.scores", OpKind::Mac, {{"B", 1}, {"H", kHeads}, {"M", T}, {"P", T}, {"E", kHeadDim}},
         {T_("attention.query", In, {b, h, m, e}), T_("attention.key", Wt, {b, h, p, e}),
          T_("attention.scores", Out, {b, h, m, p})});
  }
  {
    enum { b, h, m, p };
    push("attention.softmax", OpKind::Softmax, {{"B", 1}, {"H", kHeads}, {"M", T}, {"P", T}},
         {T_("attention.scores", In, {b, h, m, p}), T_("attention.softmax", Out, {b, h, m, p})});
  }
  {  // context[b,h,m,f] = softmax[b,h,m,p] * value[b,h,p,f]
    enum { b, h, m, p, f };
    push("attention.context", OpKind::Mac, {{"B", 1}, {"H", kHeads}, {"M", T}, {"P", T}, {"F", kHeadDim}},
         {T_("attention.softmax", In, {b, h, m, p}), T_("attention.value", Wt, {b, h, p, f}),
          T_("attention.context", Out, {b, h, m, f})});
  }
  {  // output[m,n] = context[b,h,m,f] * Wo[h,f,n]
    enum { b, m, n, h, f };
    push("attention.output", OpKind::Mac,
         {{"B", 1}, {"M", T}, {"N", kBottleneck}, {"H", kHeads}, {"F", kHeadDim}},
         {T_("attention.context", In, {b, h, m, f}), T_("attention.output.weight", Wt, {h, f, n}),
          T_("attention.output", Out, {m, n})});
  }
  add("attention.add", "attention.output", "bottleneck.input", kBottleneck);
  // Four stacked FFNs 128 -> 512 -> 128, each with its residual add (the fourth is HF's
  // intermediate/output pair).
  std::string h = "attention.add";
  for (int i = 0; i < 4; ++i) {
    const std::string p = "ffn." + std::to_string(i);
    linear(p + ".intermediate", h, kBottleneck, kFfn);
    linear(p + ".output", p + ".intermediate", kFfn, kBottleneck);
    add(p + ".add", p + ".output", h, kBottleneck);
    h = p + ".add";
  }
  linear("output.bottleneck", h, kBottleneck, kHidden);  // back to 512
  add("output.add", "output.bottleneck", "embedding", kHidden);
  finalize(w);
  return w;
}

// One GPT-3 6.7B decoder layer as in AccelForge's gpt3_6.7B.yaml (rank and tensor names kept).
Workload gpt3_6_7b(int64_t B, int64_t T) {
  const int64_t H = 32, E = 128, D = 4096, C = 16384, G = 4096;
  Workload w;
  w.name = "gpt3_6.7b";
  auto einsum = [&](std::string name, OpKind op, std::vector<Rank> ranks,
                    std::vector<TensorAccess> tensors) {
    w.einsums.push_back(einsum_of(std::move(name), op, std::move(ranks), std::move(tensors)));
  };
  const auto T_ = rank_access;
  const auto In = TensorRole::Input, Wt = TensorRole::Weight, Out = TensorRole::Output;
  {  // I[b,m,d] = I_in[b,m,d]
    enum { b, m, d };
    einsum("I", OpKind::Copy, {{"B", B}, {"M", T}, {"D", D}},
           {T_("I_in", In, {b, m, d}), T_("I", Out, {b, m, d})});
  }
  for (const char* n : {"V", "K", "Q"}) {  // X[b,m,h,e] = I[b,m,d] * WX[h,e,d]
    enum { b, m, h, e, d };
    einsum(n, OpKind::Mac, {{"B", B}, {"M", T}, {"H", H}, {"E", E}, {"D", D}},
           {T_("I", In, {b, m, d}), T_(std::string("W") + n, Wt, {h, e, d}), T_(n, Out, {b, m, h, e})});
  }
  {  // QK[b,m,p,h] = Q[b,m,h,e] * K[b,p,h,e]   (K takes the weight role)
    enum { b, m, p, h, e };
    einsum("QK", OpKind::Mac, {{"B", B}, {"M", T}, {"P", T}, {"H", H}, {"E", E}},
           {T_("Q", In, {b, m, h, e}), T_("K", Wt, {b, p, h, e}), T_("QK", Out, {b, m, p, h})});
  }
  {
    enum { b, m, p, h };
    einsum("QK_softmax", OpKind::Softmax, {{"B", B}, {"M", T}, {"P", T}, {"H", H}},
           {T_("QK", In, {b, m, p, h}), T_("QK_softmax", Out, {b, m, p, h})});
  }
  {  // AV[b,m,h,f] = QK_softmax[b,m,p,h] * V[b,p,h,f]   (V takes the weight role)
    enum { b, m, p, h, f };
    einsum("AV", OpKind::Mac, {{"B", B}, {"M", T}, {"P", T}, {"H", H}, {"F", E}},
           {T_("QK_softmax", In, {b, m, p, h}), T_("V", Wt, {b, p, h, f}), T_("AV", Out, {b, m, h, f})});
  }
  {  // Z[b,m,g] = AV[b,m,h,f] * WZ[h,f,g]
    enum { b, m, h, f, g };
    einsum("Z", OpKind::Mac, {{"B", B}, {"M", T}, {"H", H}, {"F", E}, {"G", G}},
           {T_("AV", In, {b, m, h, f}), T_("WZ", Wt, {h, f, g}), T_("Z", Out, {b, m, g})});
  }
  {  // FFA[b,m,c] = Z[b,m,g] * WFFA[g,c]
    enum { b, m, g, c };
    einsum("FFA", OpKind::Mac, {{"B", B}, {"M", T}, {"G", G}, {"C", C}},
           {T_("Z", In, {b, m, g}), T_("WFFA", Wt, {g, c}), T_("FFA", Out, {b, m, c})});
  }
  {  // FFB[b,m,j] = FFA[b,m,c] * WFFB[c,j]
    enum { b, m, c, j };
    einsum("FFB", OpKind::Mac, {{"B", B}, {"M", T}, {"C", C}, {"J", D}},
           {T_("FFA", In, {b, m, c}), T_("WFFB", Wt, {c, j}), T_("FFB", Out, {b, m, j})});
  }
  finalize(w);
  return w;
}

// FFM section 7.5: M = 8192 and (N; K) cycling (16384;16384) -> (4096;16384) -> (4096;4096) ->
// (16384;4096). Einsum MM<i> computes T<i+1>[m,n] = T<i>[m,k] * W<i>[k,n].
Workload matmul_chain(int n) {
  static const int64_t NK[4][2] = {{16384, 16384}, {4096, 16384}, {4096, 4096}, {16384, 4096}};
  Workload w;
  w.name = "matmul_chain_" + std::to_string(n);
  for (int i = 0; i < n; ++i) {
    const auto& nk = NK[i % 4];
    w.einsums.push_back(make_matmul("MM" + std::to_string(i), 8192, nk[0], nk[1], "T" + std::to_string(i),
                                    "W" + std::to_string(i), "T" + std::to_string(i + 1)));
  }
  finalize(w);
  return w;
}

}  // namespace

std::vector<std::string> zoo_names() {
  return {"resnet18", "resnet50", "vgg16", "vgg19", "mobilenet_v1", "mobilenet_v2", "xception",
          "mobilebert_block", "gpt3_6.7b", "matmul_chain_<n>"};
}

Workload zoo_workload(std::string_view name, const ZooParams& p) {
  if (p.batch <= 0)
    throw InputError({}, "batch", "batch size " + std::to_string(p.batch) + " is not positive; expected >= 1");
  if (p.tokens <= 0)
    throw InputError({}, "tokens", "token count " + std::to_string(p.tokens) + " is not positive; expected >= 1");
  const int64_t N = p.batch;
  if (name == "resnet18") return resnet("resnet18", false, {2, 2, 2, 2}, N);
  if (name == "resnet50") return resnet("resnet50", true, {3, 4, 6, 3}, N);
  // VGG configurations "D" and "E" (0 = 2x2 max pool).
  if (name == "vgg16")
    return vgg("vgg16", {64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0}, N);
  if (name == "vgg19")
    return vgg("vgg19", {64, 64, 0, 128, 128, 0, 256, 256, 256, 256, 0, 512, 512, 512, 512, 0, 512, 512,
                         512, 512, 0},
               N);
  if (name == "mobilenet_v1") return mobilenet_v1(N);
  if (name == "mobilenet_v2") return mobilenet_v2(N);
  if (name == "xception") return xception(N);
  if (name == "mobilebert_block") {
    if (p.batch != 1)
      throw InputError({}, "batch", "mobilebert_block is one sequence (batch 1); got batch " + std::to_string(p.batch));
    return mobilebert_block(kMobileBertTokens);
  }
  if (name == "gpt3_6.7b") return gpt3_6_7b(p.batch, p.tokens);
  constexpr std::string_view chain = "matmul_chain_";
  if (name.substr(0, chain.size()) == chain) {
    std::string_view num = name.substr(chain.size());
    int n = 0;
    auto [ptr, ec] = std::from_chars(num.data(), num.data() + num.size(), n);
    if (num.empty() || ec != std::errc() || ptr != num.data() + num.size() || n < 1 || n > 100000)
      throw InputError({}, "workload", "'" + std::string(name) +
                                           "': the chain length must be an integer >= 1, e.g. matmul_chain_8");
    return matmul_chain(n);
  }
  std::string all;
  for (const auto& z : zoo_names()) all += (all.empty() ? "" : ", ") + z;
  throw InputError({}, "workload", "unknown zoo workload '" + std::string(name) + "'" +
                                       did_you_mean(name, zoo_names()) + "; the zoo has " + all);
}

}  // namespace mapfuse
