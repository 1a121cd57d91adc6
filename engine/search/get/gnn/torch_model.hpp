#pragma once
// Private to the gnn/ folder's torch translation units (gnn_torch.cpp, explainers_torch.cpp):
// the classifier's tensors and the batched message passing the explainers run through it. Never
// include this from anywhere else: it pulls in libtorch.
#include <torch/torch.h>

#include <span>
#include <string>
#include <vector>

#include "engine/search/get/gnn/gnn.hpp"

namespace mapfuse::get::gnn {

struct TorchModule;
// Fills the table's ExplainerModel entries (explainers_torch.cpp); gnn_torch.cpp fills the rest.
void fill_explainer_entries(TorchModule& t);

// One torch thread per process (MPI ranks and OpenMP workers must not oversubscribe).
inline void one_thread() {
  static const bool done = [] {
    at::set_num_threads(1);
    return true;
  }();
  (void)done;
}

// A batch of graphs as one disconnected graph: messages along both directions of every edge.
struct Batch {
  torch::Tensor x, src, dst, graph;  // graph: per node, its sample's index
  int64_t graphs = 0, edges = 0;     // edges: undirected, before doubling
};

// `order` picks the samples; the undirected edges are numbered in that order (a mask of size
// `edges` applies to both directions).
Batch make_batch(std::span<const GraphSample> samples, std::span<const size_t> order);
// A single graph.
Batch make_batch(const GraphSample& s);

// The shared rule from an edge mask to explanation edges (note §5.2): edges with σ > 0.5, else
// the top max(1, ⌈fraction·E⌉); most important first (ties: the lower local index).
std::vector<int32_t> mask_to_edges(const float* mask, int64_t edges, std::span<const int32_t> edge_ids, double fraction);

// GraphConv layers (Morris et al.'s k-GNN, PyG GraphConv): h' = relu(W_r h + b + W_n Σ_j e_ji h_j),
// then the sum of node embeddings and a linear head to logits (invalid, valid).
struct Classifier::Impl {
  FusionScheme scheme = FusionScheme::Lbdf;
  ClassifierShape shape;
  std::vector<torch::Tensor> root_w, root_b, nbr_w;
  torch::Tensor head_w, head_b;

  std::vector<torch::Tensor> params() const;
  std::vector<std::string> names() const;
  std::vector<std::vector<int64_t>> dims() const;  // in params() order
  void init();                                      // PyTorch's Linear init: U(±1/sqrt(fan_in))
  void assign(const std::vector<torch::Tensor>& t);
  void requires_grad(bool on);
  // The final layer's node embeddings; edge_weight: one value per undirected edge or undefined (1).
  torch::Tensor embed(const Batch& b, const torch::Tensor& edge_weight = {}) const;
  // Sum readout of node embeddings per graph.
  static torch::Tensor readout(const Batch& b, const torch::Tensor& h);
  torch::Tensor head(const torch::Tensor& g) const { return torch::addmm(head_b, g, head_w.t()); }
  torch::Tensor forward(const Batch& b, const torch::Tensor& edge_weight = {}) const {
    return head(readout(b, embed(b, edge_weight)));
  }
};

}  // namespace mapfuse::get::gnn
