#pragma once
// GET-fusion's GNN validity classifier and GNNExplainer (docs/get.md, "GNN classifier"; note
// §5.1–5.2) behind a torch-free interface: only gnn_torch.cpp includes libtorch, and it is built
// into a module that loads on first use (torch_module.hpp), not at start-up. Everything runs
// on one thread (at::set_num_threads(1), so MPI or OpenMP workers do not oversubscribe) and is
// deterministic for a seed.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/cost/fusion_group.hpp"
#include "engine/search/get/explain.hpp"
#include "engine/search/get/gnn/features.hpp"

namespace mapfuse::get::gnn {

struct ClassifierShape {
  int layers = 4;     // k-GNN (GraphConv) layers, sum aggregation
  int hidden = 128;
};

struct TrainOptions {
  ClassifierShape shape;
  int epochs = 20;
  int batch = 64;       // graphs per step
  double lr = 1e-3;     // Adam
  uint64_t seed = 1;
};

struct Metrics {
  int64_t samples = 0;
  double accuracy = 0, precision = 0, recall = 0, f1 = 0;  // "positive" = invalid (what repair acts on)
};

class Classifier {
 public:
  Classifier();  // an untrained model of the default shape
  ~Classifier() = default;
  Classifier(Classifier&&) noexcept = default;
  Classifier& operator=(Classifier&&) noexcept = default;

  // Reads a model file (format in docs/get.md). Throws InputError naming the file when it is
  // missing or corrupt, was trained for another scheme than `expected`, or has another feature
  // layout than this build's.
  static Classifier load(const std::string& path, FusionScheme expected);
  // The model shipped in the binary (presets/get/gnn_<scheme>.gnn); InputError if absent.
  static Classifier shipped(FusionScheme scheme);
  // Parses a model from bytes; `source` names it in errors.
  static Classifier parse(std::string_view bytes, const std::string& source, FusionScheme expected);
  void save(const std::string& path) const;

  FusionScheme scheme() const;
  ClassifierShape shape() const;
  // P(valid) per sample.
  std::vector<double> predict(std::span<const GraphSample> samples) const;
  Metrics evaluate(std::span<const GraphSample> samples) const;
  // Every parameter, flattened in a fixed order (determinism checks).
  std::vector<float> parameters() const;
  // The checksum of the weights (the one its model file carries); explainers record it.
  std::string fingerprint() const;

  struct Impl;
  Impl& impl() const { return *impl_; }

 private:
  // Impl lives in the libtorch module (torch_module.hpp), which deletes it: the deleter travels
  // with the pointer, so this class needs no complete Impl.
  std::unique_ptr<Impl, void (*)(Impl*)> impl_;
};

struct TrainReport {
  std::vector<double> epoch_loss;
  Metrics train, validation;
  double seconds = 0;
};

// Trains a classifier for `scheme` on labelled samples (Adam, cross-entropy weighted by the
// inverse class frequency), keeping the epoch with the best validation accuracy.
Classifier train_classifier(FusionScheme scheme, std::span<const GraphSample> train,
                            std::span<const GraphSample> validation, const TrainOptions& opt,
                            TrainReport* report = nullptr);

// GNNExplainer ([PYG] defaults, note §5.2): a soft mask over the group's edges optimised with
// Adam (lr 0.01, 100 epochs) to keep the classifier's "invalid" verdict, with size 0.005·Σσ and
// entropy 1.0 penalties; edges with σ > 0.5, else the top max(1, ⌈0.2·E⌉), most important first.
struct GnnExplainerOptions {
  int epochs = 100;
  double lr = 0.01, edge_size = 0.005, edge_entropy = 1.0;
  double fraction = 0.2;
  uint64_t seed = 1;
};

// The explainer for a network: `features` must outlive it (and the OpGraph behind it). Its
// Dag node and edge ids are the OpGraph's (make_network_problem keeps them).
std::unique_ptr<Explainer> make_gnn_explainer(std::shared_ptr<const Classifier> model, const FeatureTable& features,
                                              const GnnExplainerOptions& opt = {});

// Testing hook: GNNExplainer's steps run the classifier in a dense form of its own (one N x N
// adjacency product per layer, gnn_torch.cpp). The largest difference between its two logits and
// the classifier's forward pass on sample `s` with undirected edge e weighted by edge_weight[e],
// relative to the largest logit (at least 1).
double dense_forward_gap(const Classifier& c, const GraphSample& s, std::span<const float> edge_weight);

}  // namespace mapfuse::get::gnn
