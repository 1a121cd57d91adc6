// One of the two translation units that include libtorch (~11 s and 1.1 GB each to compile; the
// other is explainers_torch.cpp), both built into the module libmapfuse_torch.so
// (torch_module.hpp): the GraphConv classifier, its training and GNNExplainer, and the module's
// table.
#include "engine/search/get/gnn/torch_model.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <numeric>
#include <random>
#include <sstream>
#include <stdexcept>

#include "engine/common/embedded.hpp"
#include "engine/common/error.hpp"
#include "engine/search/get/gnn/gnn.hpp"
#include "engine/search/get/gnn/model_file.hpp"
#include "engine/search/get/gnn/torch_module.hpp"

namespace mapfuse::get::gnn {

Batch make_batch(std::span<const GraphSample> samples, std::span<const size_t> order) {
  const int F = feature_count();
  std::vector<float> x;
  std::vector<int64_t> src, dst, graph;
  int64_t offset = 0;
  for (size_t k = 0; k < order.size(); ++k) {
    const GraphSample& s = samples[order[k]];
    x.insert(x.end(), s.x.begin(), s.x.end());
    for (size_t e = 0; e < s.src.size(); ++e) src.push_back(offset + s.src[e]), dst.push_back(offset + s.dst[e]);
    graph.insert(graph.end(), s.nodes, static_cast<int64_t>(k));
    offset += s.nodes;
  }
  Batch b;
  b.edges = static_cast<int64_t>(src.size());
  // Reverse direction second, so an edge mask m of size E applies as cat(m, m).
  std::vector<int64_t> s2 = src, d2 = dst;
  s2.insert(s2.end(), dst.begin(), dst.end());
  d2.insert(d2.end(), src.begin(), src.end());
  b.x = torch::from_blob(x.data(), {offset, F}, torch::kFloat32).clone();
  b.src = torch::tensor(s2, torch::kInt64);
  b.dst = torch::tensor(d2, torch::kInt64);
  b.graph = torch::tensor(graph, torch::kInt64);
  b.graphs = static_cast<int64_t>(order.size());
  return b;
}

std::vector<int32_t> mask_to_edges(const float* m, int64_t E, std::span<const int32_t> edge_ids, double fraction) {
  std::vector<int64_t> rank(E);
  std::iota(rank.begin(), rank.end(), int64_t{0});
  std::stable_sort(rank.begin(), rank.end(), [&](int64_t a, int64_t c) { return m[a] > m[c]; });
  int64_t k = std::count_if(m, m + E, [](float v) { return v > 0.5f; });
  if (k == 0) k = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(fraction * static_cast<double>(E))));
  std::vector<int32_t> out;
  for (int64_t i = 0; i < k && i < E; ++i) out.push_back(edge_ids[rank[i]]);
  return out;
}

Batch make_batch(const GraphSample& s) {
  const size_t all[1] = {0};
  return make_batch(std::span<const GraphSample>(&s, 1), all);
}

std::vector<torch::Tensor> Classifier::Impl::params() const {
  std::vector<torch::Tensor> p;
  for (size_t l = 0; l < root_w.size(); ++l) p.insert(p.end(), {root_w[l], root_b[l], nbr_w[l]});
  p.insert(p.end(), {head_w, head_b});
  return p;
}

std::vector<std::string> Classifier::Impl::names() const {
  std::vector<std::string> n;
  for (int l = 0; l < shape.layers; ++l)
    for (const char* part : {".root.weight", ".root.bias", ".neighbour.weight"})
      n.push_back("layer" + std::to_string(l) + part);
  n.insert(n.end(), {"head.weight", "head.bias"});
  return n;
}

std::vector<std::vector<int64_t>> Classifier::Impl::dims() const {
  std::vector<std::vector<int64_t>> d;
  int64_t in = feature_count();
  for (int l = 0; l < shape.layers; ++l) {
    d.push_back({shape.hidden, in});
    d.push_back({shape.hidden});
    d.push_back({shape.hidden, in});
    in = shape.hidden;
  }
  d.push_back({2, shape.hidden});
  d.push_back({2});
  return d;
}

void Classifier::Impl::init() {
  root_w.clear(), root_b.clear(), nbr_w.clear();
  const auto d = dims();
  std::vector<torch::Tensor> t;
  for (const auto& s : d) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(s.size() == 2 ? s[1] : d[t.size() - 1][1]));
    t.push_back(torch::empty(s).uniform_(-bound, bound));
  }
  assign(t);
}

void Classifier::Impl::assign(const std::vector<torch::Tensor>& t) {
  size_t k = 0;
  root_w.clear(), root_b.clear(), nbr_w.clear();
  for (int l = 0; l < shape.layers; ++l) {
    root_w.push_back(t[k++]);
    root_b.push_back(t[k++]);
    nbr_w.push_back(t[k++]);
  }
  head_w = t[k++];
  head_b = t[k++];
}

void Classifier::Impl::requires_grad(bool on) {
  for (auto& p : params()) p.requires_grad_(on);
}

torch::Tensor Classifier::Impl::embed(const Batch& b, const torch::Tensor& edge_weight) const {
  torch::Tensor h = b.x;
  const torch::Tensor w2 = edge_weight.defined() ? torch::cat({edge_weight, edge_weight}).unsqueeze(1) : torch::Tensor();
  for (int l = 0; l < shape.layers; ++l) {
    torch::Tensor msg = h.index_select(0, b.src);
    if (w2.defined()) msg = msg * w2;
    const torch::Tensor agg = torch::zeros({h.size(0), h.size(1)}).index_add(0, b.dst, msg);
    h = torch::relu(torch::addmm(root_b[l], h, root_w[l].t()) + agg.mm(nbr_w[l].t()));
  }
  return h;
}

torch::Tensor Classifier::Impl::readout(const Batch& b, const torch::Tensor& h) {
  return torch::zeros({b.graphs, h.size(1)}).index_add(0, b.graph, h);
}

namespace {
Classifier::Impl* new_classifier() {
  one_thread();
  return new Classifier::Impl();
}
void delete_classifier(Classifier::Impl* p) { delete p; }
}  // namespace

Classifier::Classifier() : impl_(new_classifier(), &delete_classifier) {}

FusionScheme Classifier::scheme() const { return impl_->scheme; }
ClassifierShape Classifier::shape() const { return impl_->shape; }

Classifier Classifier::parse(std::string_view bytes, const std::string& source, FusionScheme expected) {
  const ModelFile m = parse_model_file(bytes, source, expected);
  Classifier c;
  c.impl_->scheme = m.scheme;
  c.impl_->shape = {m.layers, m.hidden};
  if (m.layers < 1 || m.layers > 16 || m.hidden < 1 || m.hidden > 4096)
    throw InputError({source, 0, 0}, "", "layers must be in [1, 16] and hidden in [1, 4096]");
  const auto dims = c.impl_->dims();
  const auto names = c.impl_->names();
  if (m.tensors.size() != dims.size())
    throw InputError({source, 0, 0}, "",
                     fmt::format("{} tensors; a {}-layer model has {}", m.tensors.size(), m.layers, dims.size()));
  std::vector<torch::Tensor> t;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (m.tensors[i].name != names[i] || m.tensors[i].dims != dims[i])
      throw InputError({source, 0, 0}, "",
                       fmt::format("tensor {} is '{}' of size {}; a {}-layer, {}-hidden model over {} features "
                                   "expects '{}' of size {}",
                                   i, m.tensors[i].name, fmt::join(m.tensors[i].dims, "x"), m.layers, m.hidden,
                                   feature_count(), names[i], fmt::join(dims[i], "x")));
    t.push_back(torch::from_blob(const_cast<float*>(m.tensors[i].data.data()), dims[i], torch::kFloat32).clone());
  }
  c.impl_->assign(t);
  return c;
}

Classifier Classifier::load(const std::string& path, FusionScheme expected) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError({path, 0, 0}, "--gnn-model", "cannot open the GNN model file");
  std::ostringstream buf;
  buf << in.rdbuf();
  return parse(buf.str(), path, expected);
}

Classifier Classifier::shipped(FusionScheme scheme) {
  const std::string stem = "gnn_" + std::string(to_string(scheme));
  for (const EmbeddedFile& f : embedded_gnn_models())
    if (f.name == stem) return parse(f.text, "presets/get/" + stem + ".gnn (built in)", scheme);
  throw InputError({}, "--gnn-model",
                   fmt::format("no {} GNN model is built into this mapfuse (presets/get/{}.gnn); train one with "
                               "`mapfuse get-train --scheme {} --out presets/get` and rebuild, or pass --gnn-model",
                               to_string(scheme), stem, to_string(scheme)));
}

void Classifier::save(const std::string& path) const {
  ModelFile m;
  m.scheme = impl_->scheme;
  m.layers = impl_->shape.layers;
  m.hidden = impl_->shape.hidden;
  m.layout = feature_layout();
  const auto names = impl_->names();
  const auto params = impl_->params();
  for (size_t i = 0; i < params.size(); ++i) {
    const torch::Tensor t = params[i].detach().contiguous();
    m.tensors.push_back({names[i], t.sizes().vec(), std::vector<float>(t.data_ptr<float>(), t.data_ptr<float>() + t.numel())});
  }
  std::ofstream out(path, std::ios::binary);
  const std::string bytes = serialize(m);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw InputError({path, 0, 0}, "--out", "cannot write the GNN model file");
}

std::vector<float> Classifier::parameters() const {
  std::vector<float> out;
  for (const torch::Tensor& p : impl_->params()) {
    const torch::Tensor t = p.detach().contiguous();
    out.insert(out.end(), t.data_ptr<float>(), t.data_ptr<float>() + t.numel());
  }
  return out;
}

std::string Classifier::fingerprint() const { return weights_fingerprint(parameters()); }

std::vector<double> Classifier::predict(std::span<const GraphSample> samples) const {
  torch::NoGradGuard no_grad;
  std::vector<double> p;
  p.reserve(samples.size());
  std::vector<size_t> order;
  for (size_t at = 0; at < samples.size(); at += 256) {
    order.resize(std::min<size_t>(256, samples.size() - at));
    std::iota(order.begin(), order.end(), at);
    const torch::Tensor prob = torch::softmax(impl_->forward(make_batch(samples, order)), 1).select(1, 1).contiguous();
    p.insert(p.end(), prob.data_ptr<float>(), prob.data_ptr<float>() + prob.numel());
  }
  return p;
}

Metrics Classifier::evaluate(std::span<const GraphSample> samples) const {
  const std::vector<double> p = predict(samples);
  int64_t tp = 0, fp = 0, fn = 0, right = 0;
  for (size_t i = 0; i < samples.size(); ++i) {
    const bool said_invalid = p[i] < 0.5, invalid = samples[i].label == 0;
    right += said_invalid == invalid;
    tp += said_invalid && invalid;
    fp += said_invalid && !invalid;
    fn += !said_invalid && invalid;
  }
  Metrics m;
  m.samples = static_cast<int64_t>(samples.size());
  if (m.samples == 0) return m;
  m.accuracy = static_cast<double>(right) / static_cast<double>(m.samples);
  m.precision = tp + fp ? static_cast<double>(tp) / static_cast<double>(tp + fp) : 0;
  m.recall = tp + fn ? static_cast<double>(tp) / static_cast<double>(tp + fn) : 0;
  m.f1 = m.precision + m.recall > 0 ? 2 * m.precision * m.recall / (m.precision + m.recall) : 0;
  return m;
}

Classifier train_classifier(FusionScheme scheme, std::span<const GraphSample> train,
                            std::span<const GraphSample> validation, const TrainOptions& opt, TrainReport* report) {
  if (train.empty()) throw InputError({}, "--groups", "no training samples");
  if (opt.epochs < 1 || opt.batch < 1 || !(opt.lr > 0))
    throw InputError({}, "--epochs", "epochs, batch and learning rate must be positive");
  const auto t0 = std::chrono::steady_clock::now();
  Classifier c;
  c.impl().scheme = scheme;
  c.impl().shape = opt.shape;
  torch::manual_seed(opt.seed);
  c.impl().init();
  c.impl().requires_grad(true);
  int64_t valid = 0;
  for (const GraphSample& s : train) valid += s.label == 1;
  const auto n = static_cast<double>(train.size());
  const double w_valid = valid ? n / (2.0 * static_cast<double>(valid)) : 1.0;
  const double w_invalid = valid < static_cast<int64_t>(n) ? n / (2.0 * (n - static_cast<double>(valid))) : 1.0;
  const torch::Tensor weight = torch::tensor({w_invalid, w_valid}, torch::kFloat32);
  torch::optim::Adam adam(c.impl().params(), torch::optim::AdamOptions(opt.lr));
  std::mt19937_64 rng(opt.seed);
  std::vector<size_t> order(train.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::vector<torch::Tensor> best;
  double best_acc = -1;
  TrainReport r;
  for (int epoch = 0; epoch < opt.epochs; ++epoch) {
    std::shuffle(order.begin(), order.end(), rng);
    double total = 0;
    for (size_t at = 0; at < order.size(); at += static_cast<size_t>(opt.batch)) {
      const std::span<const size_t> idx(order.data() + at, std::min<size_t>(opt.batch, order.size() - at));
      const Batch b = make_batch(train, idx);
      std::vector<int64_t> labels;
      for (size_t i : idx) labels.push_back(train[i].label == 1 ? 1 : 0);
      const torch::Tensor loss =
          torch::nn::functional::cross_entropy(c.impl().forward(b), torch::tensor(labels, torch::kInt64),
                                               torch::nn::functional::CrossEntropyFuncOptions().weight(weight));
      adam.zero_grad();
      loss.backward();
      adam.step();
      total += loss.item<double>() * static_cast<double>(idx.size());
    }
    r.epoch_loss.push_back(total / n);
    // Model selection on the validation split (the training split when there is none).
    const double acc = c.evaluate(validation.empty() ? train : validation).accuracy;
    if (acc > best_acc) {
      best_acc = acc;
      best.clear();
      for (const torch::Tensor& p : c.impl().params()) best.push_back(p.detach().clone());
    }
  }
  c.impl().assign(best);
  r.train = c.evaluate(train);
  r.validation = c.evaluate(validation);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (report) *report = std::move(r);
  return c;
}

namespace {

// The classifier's forward pass on one small graph, for the 100 passes of an explanation: the
// masked messages as one dense N x N adjacency product per layer and the transposed weights made
// once. The same function as Classifier::Impl::forward (sums in another order), in 4 operations
// per layer instead of 10: with graphs of about ten nodes, torch's per-operation overhead, not the
// arithmetic, is what a step costs. Used for groups of at most kDenseNodes nodes.
inline constexpr int32_t kDenseNodes = 24;

class DenseNet {
 public:
  DenseNet(const Classifier::Impl& net, const Batch& b) : net_(net), x_(b.x), n_(b.x.size(0)) {
    pos_ = b.dst * n_ + b.src;  // both directions: a mask of size E applies as cat(m, m)
    for (size_t l = 0; l < net.root_w.size(); ++l) {
      root_t_.push_back(net.root_w[l].t().contiguous());
      nbr_t_.push_back(net.nbr_w[l].t().contiguous());
    }
    head_t_ = net.head_w.t().contiguous();
  }
  torch::Tensor forward(const torch::Tensor& edge_weight) const {
    const torch::Tensor a =
        torch::zeros({n_ * n_}).index_add(0, pos_, torch::cat({edge_weight, edge_weight})).view({n_, n_});
    torch::Tensor h = x_;
    for (size_t l = 0; l < root_t_.size(); ++l)
      h = torch::relu(torch::addmm(torch::addmm(net_.root_b[l], h, root_t_[l]), a.mm(h), nbr_t_[l]));
    return torch::addmm(net_.head_b, h.sum(0, true), head_t_);
  }

 private:
  const Classifier::Impl& net_;
  torch::Tensor x_, pos_, head_t_;
  std::vector<torch::Tensor> root_t_, nbr_t_;
  int64_t n_;
};

class GnnExplainer final : public Explainer {
 public:
  GnnExplainer(std::shared_ptr<const Classifier> model, const FeatureTable& features, const GnnExplainerOptions& opt)
      : model_(std::move(model)), features_(&features), opt_(opt) {}
  std::string_view name() const override { return "gnne"; }

  Explanation explain(std::span<const int32_t> group, Evaluator& ev, Workspace&) override {
    const GraphSample s = features_->sample(group, ev.problem().beta);
    const auto E = static_cast<int64_t>(s.src.size());
    Explanation out;
    if (E == 0) return out;
    const Batch b = make_batch(s);
    // Seeded per call with a generator of its own: an explanation depends on the group only, not
    // on the call order, nor on another thread's explainer reseeding torch's global generator
    // (a study's local executor runs units on several threads).
    at::Generator gen = at::detail::createCPUGenerator(opt_.seed);
    const double sd = std::sqrt(2.0) * std::sqrt(1.0 / static_cast<double>(s.nodes));
    torch::Tensor mask = (torch::randn({E}, gen) * sd).requires_grad_(true);
    torch::optim::Adam adam(std::vector<torch::Tensor>{mask}, torch::optim::AdamOptions(opt_.lr));
    // Dense only on small groups: its aggregation is N^2 x hidden multiply-adds against the sparse
    // one's E x hidden. 24 nodes is where, by operation counts, the extra arithmetic about equals the
    // saved per-operation overhead (an estimate; RS plans hold groups of hundreds of nodes, and on
    // EfficientNet-B3 RS, 10 plans, the rule took 14.3 user-s against 16.6 with every group dense).
    const bool dense = s.nodes <= kDenseNodes;
    const DenseNet dense_net(model_->impl(), b);  // transposes made once per explanation: cheap
    for (int epoch = 0; epoch < opt_.epochs; ++epoch) {
      const torch::Tensor m = torch::sigmoid(mask);
      const torch::Tensor logits = dense ? dense_net.forward(m) : model_->impl().forward(b, m);
      // Keep the verdict "invalid" (class 0): the group is invalid, that is why it is explained.
      const torch::Tensor logp = torch::log_softmax(logits, 1).select(1, 0).sum();
      const torch::Tensor ent = -m * torch::log(m + 1e-15) - (1 - m) * torch::log(1 - m + 1e-15);
      const torch::Tensor loss = -logp + opt_.edge_size * m.sum() + opt_.edge_entropy * ent.mean();
      adam.zero_grad();
      loss.backward();
      adam.step();
    }
    const torch::Tensor sig = torch::sigmoid(mask).detach().contiguous();
    out.edges = mask_to_edges(sig.data_ptr<float>(), E, s.edge_ids, opt_.fraction);
    return out;
  }

 private:
  std::shared_ptr<const Classifier> model_;
  const FeatureTable* features_;
  GnnExplainerOptions opt_;
};

}  // namespace

std::unique_ptr<Explainer> make_gnn_explainer(std::shared_ptr<const Classifier> model, const FeatureTable& features,
                                              const GnnExplainerOptions& opt) {
  if (model->scheme() != features.scheme())
    throw InputError({}, "--gnn-model",
                     fmt::format("the GNN model is for {}, the network's features for {}", to_string(model->scheme()),
                                 to_string(features.scheme())));
  return std::make_unique<GnnExplainer>(std::move(model), features, opt);
}

double dense_forward_gap(const Classifier& c, const GraphSample& s, std::span<const float> edge_weight) {
  if (edge_weight.size() != s.src.size())
    throw std::invalid_argument(fmt::format("dense_forward_gap: {} edge weights for {} edges", edge_weight.size(),
                                            s.src.size()));
  torch::NoGradGuard no_grad;
  const Batch b = make_batch(s);
  const torch::Tensor w =
      torch::from_blob(const_cast<float*>(edge_weight.data()), {static_cast<int64_t>(edge_weight.size())},
                       torch::kFloat32)
          .clone();
  const torch::Tensor sparse = c.impl().forward(b, w);
  const torch::Tensor dense = DenseNet(c.impl(), b).forward(w);
  const double scale = std::max(1.0, sparse.abs().max().item<double>());
  return (sparse - dense).abs().max().item<double>() / scale;
}

}  // namespace mapfuse::get::gnn

// The module's table: this module's own definitions (-Bsymbolic binds these addresses to them, not
// to the binary's forwarders of the same names).
extern "C" __attribute__((visibility("default"))) const mapfuse::get::gnn::TorchModule* mapfuse_torch_module() {
  using namespace mapfuse::get::gnn;
  static const TorchModule m = [] {
    TorchModule t;
    t.abi = kTorchModuleAbi;
    t.size = sizeof(TorchModule);
    t.classifier_new = &new_classifier;
    t.classifier_delete = &delete_classifier;
    t.classifier_load = &Classifier::load;
    t.classifier_shipped = &Classifier::shipped;
    t.classifier_parse = &Classifier::parse;
    t.classifier_save = &Classifier::save;
    t.classifier_scheme = &Classifier::scheme;
    t.classifier_shape = &Classifier::shape;
    t.classifier_predict = &Classifier::predict;
    t.classifier_evaluate = &Classifier::evaluate;
    t.classifier_parameters = &Classifier::parameters;
    t.classifier_fingerprint = &Classifier::fingerprint;
    t.train_classifier = &train_classifier;
    t.make_gnn_explainer = &make_gnn_explainer;
    t.dense_forward_gap = &dense_forward_gap;
    fill_explainer_entries(t);
    return t;
  }();
  return &m;
}
