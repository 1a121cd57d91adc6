#pragma once
// What GET-fusion's GNN sees of a fusion group (docs/get.md, "GNN classifier"; note §5.1): the
// group's operators as nodes with a fixed feature vector each (operator class, input/output shape,
// weights, the buffer size β as a per-node feature) and its internal tensors as undirected edges.
// No torch here: this is the layout the model files are checked against.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/cost/fusion_group.hpp"
#include "engine/search/get/plan.hpp"
#include "engine/workload/op_graph.hpp"

namespace mapfuse::get::gnn {

// The names of the features in order, joined by ','; a model file stores it and the loader
// refuses a model whose layout differs (a model of another feature version).
const std::string& feature_layout();
int feature_count();

// One group at one β as the GNN sees it. Node k is group[k]; edge e joins src[e] and dst[e]
// (local indices; messages flow both ways) and is the Dag/OpGraph edge edge_ids[e].
struct GraphSample {
  int32_t nodes = 0;
  std::vector<float> x;  // nodes × feature_count(), row-major
  std::vector<int32_t> src, dst, edge_ids;
  int8_t label = -1;  // 1 valid (F_β < β and supported), 0 invalid, -1 not labelled
};

// Per-operator features of one network under one scheme, computed once (the single-operator
// buffer need F_β({v}) is one of them, the note's "cheap hint").
class FeatureTable {
 public:
  FeatureTable(const OpGraph& g, FusionScheme scheme, const GroupModelOptions& opt = {});
  const OpGraph& graph() const { return *g_; }
  FusionScheme scheme() const { return scheme_; }
  // The group's sample at buffer β (bytes); edges = every OpGraph edge with both ends in it.
  GraphSample sample(std::span<const int32_t> sorted_group, double beta_bytes) const;

 private:
  const OpGraph* g_;
  FusionScheme scheme_;
  int64_t kb_;
  std::vector<float> base_;           // per node: the β-free features
  std::vector<double> weight_bytes_, single_buffer_bytes_;
  std::vector<double> row_bytes_;  // per node: input row, output row, 32-channel output row, output map
};

}  // namespace mapfuse::get::gnn
