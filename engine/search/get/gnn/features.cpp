#include "engine/search/get/gnn/features.hpp"

#include <algorithm>
#include <cmath>

namespace mapfuse::get::gnn {

namespace {

constexpr OpClass kClasses[] = {OpClass::Conv,   OpClass::DepthwiseConv, OpClass::Gemm,   OpClass::Pool,
                                OpClass::GlobalPool, OpClass::Unary,     OpClass::Binary, OpClass::Concat,
                                OpClass::Pad,    OpClass::Resize,        OpClass::Reshape, OpClass::Softmax};
constexpr int kClassCount = static_cast<int>(std::size(kClasses));
// After the one-hot class: log2(1+x) of these, then the β-dependent ones (filled per sample).
constexpr const char* kShapeNames[] = {"c_in", "h_in", "w_in", "c_out", "h_out", "w_out", "k_h", "k_w",
                                       "stride", "inputs", "weight_bytes", "single_buffer_bytes"};
constexpr int kBase = kClassCount + static_cast<int>(std::size(kShapeNames)) + 1;  // + is_output
// Per sample: log2(β/KB) − 7, weights/β, F_β({v})/β, log2(F_β({v})/β), one input row, one output
// row and one output row of a 32-channel block (BRR's partial buffer) over β, the output map over β
// (ratios capped at 4: on a linear scale, so that the sum readout can add them up as F_β adds
// buffers), then whether v has no predecessor / no successor inside the group. Messages flow both ways, so
// without these a node cannot tell where the group starts (BRR rejects a group that starts with a
// pool, depthwise or element-wise op).
constexpr int kSampleFeatures = 10;

float log2p(double v) { return static_cast<float>(std::log2(1.0 + std::max(0.0, v))); }

}  // namespace

const std::string& feature_layout() {
  static const std::string s = [] {
    std::string out = "v3";
    for (OpClass c : kClasses) out += ",is_" + std::string(to_string(c));
    for (const char* n : kShapeNames) out += std::string(",log2p_") + n;
    out += ",is_output,log2_beta_kb_minus_7,weight_over_beta,single_buffer_over_beta,log2_single_buffer_over_beta,"
           "in_row_over_beta,out_row_over_beta,out_block_row_over_beta,out_map_over_beta,is_group_source,is_group_sink";
    return out;
  }();
  return s;
}

int feature_count() { return kBase + kSampleFeatures; }

FeatureTable::FeatureTable(const OpGraph& g, FusionScheme scheme, const GroupModelOptions& opt)
    : g_(&g), scheme_(scheme), kb_(opt.kb) {
  const int n = g.size();
  base_.assign(static_cast<size_t>(n) * kBase, 0.0f);
  weight_bytes_.resize(n);
  single_buffer_bytes_.resize(n);
  row_bytes_.resize(static_cast<size_t>(n) * 4);
  GroupWorkspace ws(g);
  for (int v = 0; v < n; ++v) {
    const OpNode& op = g.nodes[v];
    float* f = &base_[static_cast<size_t>(v) * kBase];
    for (int k = 0; k < kClassCount; ++k) f[k] = op.cls == kClasses[k] ? 1.0f : 0.0f;
    const Shape3 in = op.inputs.empty() ? Shape3{} : op.inputs.front().shape;
    // F_β({v}) does not depend on β under either scheme (only BRR's F_D does).
    const int one[1] = {v};
    const mapfuse::GroupCost c = group_cost(g, one, scheme, int64_t{1} << 40, opt, ws);
    weight_bytes_[v] = static_cast<double>(op.weight_elems) * opt.bytes_per_element;
    single_buffer_bytes_[v] = static_cast<double>(c.buffer_bytes);
    const double bpe = opt.bytes_per_element;
    double* r = &row_bytes_[static_cast<size_t>(v) * 4];
    r[0] = static_cast<double>(in.c * in.w) * bpe;
    r[1] = static_cast<double>(op.out.c * op.out.w) * bpe;
    r[2] = static_cast<double>(std::min<int64_t>(op.out.c, opt.brr_partition) * op.out.w) * bpe;
    r[3] = static_cast<double>(op.out.elems()) * bpe;
    const double shape[] = {static_cast<double>(in.c), static_cast<double>(in.h), static_cast<double>(in.w),
                            static_cast<double>(op.out.c), static_cast<double>(op.out.h), static_cast<double>(op.out.w),
                            static_cast<double>(op.kh), static_cast<double>(op.kw), static_cast<double>(op.sh),
                            static_cast<double>(op.inputs.size()), weight_bytes_[v], single_buffer_bytes_[v]};
    for (size_t k = 0; k < std::size(shape); ++k) f[kClassCount + k] = log2p(shape[k]);
    f[kBase - 1] = op.is_output ? 1.0f : 0.0f;
  }
}

GraphSample FeatureTable::sample(std::span<const int32_t> group, double beta_bytes) const {
  GraphSample s;
  s.nodes = static_cast<int32_t>(group.size());
  const int F = feature_count();
  s.x.resize(static_cast<size_t>(s.nodes) * F);
  const auto beta_kb = static_cast<float>(std::log2(beta_bytes / static_cast<double>(kb_)) - 7.0);
  for (int32_t k = 0; k < s.nodes; ++k) {
    const int32_t v = group[k];
    float* f = &s.x[static_cast<size_t>(k) * F];
    std::copy_n(&base_[static_cast<size_t>(v) * kBase], kBase, f);
    f[kBase] = beta_kb;
    f[kBase + 1] = static_cast<float>(std::min(4.0, weight_bytes_[v] / beta_bytes));
    f[kBase + 2] = static_cast<float>(std::min(4.0, single_buffer_bytes_[v] / beta_bytes));
    f[kBase + 3] = static_cast<float>(std::log2(std::max(1.0, single_buffer_bytes_[v]) / beta_bytes));
    for (int k2 = 0; k2 < 4; ++k2)
      f[kBase + 4 + k2] = static_cast<float>(std::min(4.0, row_bytes_[static_cast<size_t>(v) * 4 + k2] / beta_bytes));
    f[kBase + 8] = 1.0f;  // cleared below by an edge into v
    f[kBase + 9] = 1.0f;
  }
  for (int32_t k = 0; k < s.nodes; ++k) {
    const int v = group[k];
    const auto succ = g_->succs(v);
    const auto ids = g_->out_edges(v);
    for (size_t i = 0; i < succ.size(); ++i) {
      const auto it = std::lower_bound(group.begin(), group.end(), succ[i]);
      if (it == group.end() || *it != succ[i]) continue;
      s.src.push_back(k);
      s.dst.push_back(static_cast<int32_t>(it - group.begin()));
      s.edge_ids.push_back(ids[i]);
      s.x[static_cast<size_t>(k) * F + kBase + 9] = 0.0f;
      s.x[static_cast<size_t>(s.dst.back()) * F + kBase + 8] = 0.0f;
    }
  }
  return s;
}

}  // namespace mapfuse::get::gnn
