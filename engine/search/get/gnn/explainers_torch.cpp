// The second translation unit that includes libtorch: PGExplainer and RG-Explainer (note §5.3–5.4),
// their training against the frozen classifier and their model files. Tensors never leave it.
#include "engine/search/get/gnn/explainers.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <numeric>
#include <random>
#include <sstream>

#include "engine/common/embedded.hpp"
#include "engine/common/error.hpp"
#include "engine/search/get/gnn/torch_model.hpp"
#include "engine/search/get/gnn/torch_module.hpp"

namespace mapfuse::get::gnn {

namespace {

torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) {
  return torch::addmm(b, x, w.t());
}

torch::Tensor swish(const torch::Tensor& x) { return x * torch::sigmoid(x); }

constexpr int kWidth = 64;  // hidden width of both explainers' MLPs ([PYG], [RG])

// Tensor names and shapes of a model of `kind` over a classifier with `hidden` embedding width.
struct TensorSpec {
  std::string name;
  std::vector<int64_t> dims;
};

std::vector<TensorSpec> tensor_specs(ModelKind kind, int64_t hidden) {
  const int64_t H = hidden, F = feature_count(), W = kWidth;
  if (kind == ModelKind::Pg)
    return {{"mlp0.weight", {W, 2 * H}}, {"mlp0.bias", {W}}, {"mlp1.weight", {1, W}}, {"mlp1.bias", {1}}};
  return {{"locator0.weight", {W, 2 * H}}, {"locator0.bias", {W}},      {"locator1.weight", {8, W}},
          {"locator1.bias", {8}},          {"locator2.weight", {1, 8}}, {"locator2.bias", {1}},
          {"indicator.weight", {W, 2}},    {"attributes.weight", {W, F}}, {"attributes.bias", {W}},
          {"block0.weight", {W, W}},       {"block0.bias", {W}},        {"block1.weight", {W, W}},
          {"block1.bias", {W}},            {"node.weight", {1, W}},     {"node.bias", {1}},
          {"attention.weight", {1, W}},    {"attention.bias", {1}},     {"stop.weight", {2, W}},
          {"stop.bias", {2}}};
}

// RG's tensors by role, in tensor_specs order.
enum Rg : size_t {
  kLoc0W, kLoc0B, kLoc1W, kLoc1B, kLoc2W, kLoc2B, kIndW, kAttrW, kAttrB, kBlk0W, kBlk0B, kBlk1W, kBlk1B,
  kNodeW, kNodeB, kAttnW, kAttnB, kStopW, kStopB, kRgTensors
};
constexpr size_t kLocatorTensors = kIndW;  // the first six

}  // namespace

struct ExplainerModel::Impl {
  ModelKind kind = ModelKind::Pg;
  FusionScheme scheme = FusionScheme::Lbdf;
  int layers = 0, hidden = 0;  // the classifier's
  std::string classifier;      // its fingerprint
  std::vector<torch::Tensor> params;

  void init() {  // PyTorch's Linear init: U(±1/sqrt(fan_in)) for weight and bias
    params.clear();
    int64_t fan_in = 1;
    for (const TensorSpec& t : tensor_specs(kind, hidden)) {
      if (t.dims.size() == 2) fan_in = t.dims[1];
      const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
      params.push_back(torch::empty(t.dims).uniform_(-bound, bound));
    }
  }
  std::vector<torch::Tensor> slice(size_t from, size_t to) const {
    return {params.begin() + static_cast<ptrdiff_t>(from), params.begin() + static_cast<ptrdiff_t>(to)};
  }
};

namespace {
ExplainerModel::Impl* new_explainer() {
  one_thread();
  return new ExplainerModel::Impl();
}
void delete_explainer(ExplainerModel::Impl* p) { delete p; }
}  // namespace

ExplainerModel::ExplainerModel() : impl_(new_explainer(), &delete_explainer) {}

ModelKind ExplainerModel::kind() const { return impl_->kind; }
FusionScheme ExplainerModel::scheme() const { return impl_->scheme; }

std::vector<float> ExplainerModel::parameters() const {
  std::vector<float> out;
  for (const torch::Tensor& p : impl_->params) {
    const torch::Tensor t = p.detach().contiguous();
    out.insert(out.end(), t.data_ptr<float>(), t.data_ptr<float>() + t.numel());
  }
  return out;
}

namespace {

std::string retrain_hint(ModelKind kind, FusionScheme scheme) {
  return fmt::format("retrain it with `mapfuse get-train-explainer --explainer {} --scheme {}`",
                     kind == ModelKind::Pg ? "pg" : "rg", to_string(scheme));
}

const char* model_option(ModelKind kind) { return kind == ModelKind::Pg ? "--pg-model" : "--rg-model"; }

}  // namespace

ExplainerModel ExplainerModel::parse(std::string_view bytes, const std::string& source, ModelKind kind,
                                     const Classifier& classifier) {
  if (kind == ModelKind::Classifier) throw std::logic_error("ExplainerModel::parse: not an explainer kind");
  const ModelFile m = parse_model_file(bytes, source, classifier.scheme(), kind);
  const ClassifierShape shape = classifier.shape();
  if (m.layers != shape.layers || m.hidden != shape.hidden)
    throw InputError({source, 0, 0}, "",
                     fmt::format("the {} was trained against a {}-layer, {}-hidden classifier; this run's has {} "
                                 "layers and {} hidden; {}",
                                 to_string(kind), m.layers, m.hidden, shape.layers, shape.hidden,
                                 retrain_hint(kind, m.scheme)));
  if (m.classifier != classifier.fingerprint())
    throw InputError({source, 0, 0}, "",
                     fmt::format("the {} was trained against the classifier with weights {}; this run's classifier "
                                 "has weights {}; {}",
                                 to_string(kind), m.classifier, classifier.fingerprint(), retrain_hint(kind, m.scheme)));
  const std::vector<TensorSpec> specs = tensor_specs(kind, m.hidden);
  if (m.tensors.size() != specs.size())
    throw InputError({source, 0, 0}, "",
                     fmt::format("{} tensors; a {} model has {}", m.tensors.size(), to_string(kind), specs.size()));
  ExplainerModel e;
  e.impl_->kind = kind;
  e.impl_->scheme = m.scheme;
  e.impl_->layers = m.layers;
  e.impl_->hidden = m.hidden;
  e.impl_->classifier = m.classifier;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (m.tensors[i].name != specs[i].name || m.tensors[i].dims != specs[i].dims)
      throw InputError({source, 0, 0}, "",
                       fmt::format("tensor {} is '{}' of size {}; a {} over a {}-hidden classifier and {} features "
                                   "expects '{}' of size {}",
                                   i, m.tensors[i].name, fmt::join(m.tensors[i].dims, "x"), to_string(kind), m.hidden,
                                   feature_count(), specs[i].name, fmt::join(specs[i].dims, "x")));
    e.impl_->params.push_back(
        torch::from_blob(const_cast<float*>(m.tensors[i].data.data()), specs[i].dims, torch::kFloat32).clone());
  }
  return e;
}

ExplainerModel ExplainerModel::load(const std::string& path, ModelKind kind, const Classifier& classifier) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw InputError({path, 0, 0}, model_option(kind), fmt::format("cannot open the {} model file", to_string(kind)));
  std::ostringstream buf;
  buf << in.rdbuf();
  return parse(buf.str(), path, kind, classifier);
}

ExplainerModel ExplainerModel::shipped(ModelKind kind, const Classifier& classifier) {
  const std::string stem = std::string(kind == ModelKind::Pg ? "pg_" : "rg_") + std::string(to_string(classifier.scheme()));
  for (const EmbeddedFile& f : embedded_gnn_models())
    if (f.name == stem) return parse(f.text, "presets/get/" + stem + ".gnn (built in)", kind, classifier);
  throw InputError({}, model_option(kind),
                   fmt::format("no {} {} model is built into this mapfuse (presets/get/{}.gnn); train one with "
                               "`mapfuse get-train-explainer --explainer {} --scheme {} --out presets/get` and "
                               "rebuild, or pass {}",
                               to_string(classifier.scheme()), to_string(kind), stem, kind == ModelKind::Pg ? "pg" : "rg",
                               to_string(classifier.scheme()), model_option(kind)));
}

void ExplainerModel::save(const std::string& path) const {
  ModelFile m;
  m.kind = impl_->kind;
  m.scheme = impl_->scheme;
  m.layers = impl_->layers;
  m.hidden = impl_->hidden;
  m.layout = feature_layout();
  m.classifier = impl_->classifier;
  const std::vector<TensorSpec> specs = tensor_specs(impl_->kind, impl_->hidden);
  for (size_t i = 0; i < specs.size(); ++i) {
    const torch::Tensor t = impl_->params[i].detach().contiguous();
    m.tensors.push_back({specs[i].name, specs[i].dims,
                         std::vector<float>(t.data_ptr<float>(), t.data_ptr<float>() + t.numel())});
  }
  std::ofstream out(path, std::ios::binary);
  const std::string bytes = serialize(m);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw InputError({path, 0, 0}, "--out", fmt::format("cannot write the {} model file", to_string(m.kind)));
}

namespace {

ExplainerModel fresh_model(ModelKind kind, const Classifier& c) {
  ExplainerModel e;
  e.impl().kind = kind;
  e.impl().scheme = c.scheme();
  e.impl().layers = c.shape().layers;
  e.impl().hidden = c.shape().hidden;
  e.impl().classifier = c.fingerprint();
  e.impl().init();
  return e;
}

// Freezes the trained weights and hands out the report.
ExplainerModel finish_training(ExplainerModel e, ExplainerTrainReport r, std::chrono::steady_clock::time_point t0,
                               ExplainerTrainReport* report) {
  for (auto& p : e.impl().params) p = p.detach();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (report) *report = std::move(r);
  return e;
}

void check_pair(const Classifier& c, const ExplainerModel& e, const FeatureTable& features) {
  if (c.scheme() != features.scheme() || e.scheme() != c.scheme())
    throw InputError({}, model_option(e.kind()),
                     fmt::format("the {} model is for {}, the classifier for {}, the network's features for {}",
                                 to_string(e.kind()), to_string(e.scheme()), to_string(c.scheme()),
                                 to_string(features.scheme())));
  if (e.impl().classifier != c.fingerprint())
    throw InputError({}, model_option(e.kind()),
                     fmt::format("the {} model was trained against another classifier (weights {}, this run's {})",
                                 to_string(e.kind()), e.impl().classifier, c.fingerprint()));
}

// ---- PGExplainer ----------------------------------------------------------------------------

// ω per undirected edge of the batch from the frozen node embeddings z.
torch::Tensor pg_logits(const ExplainerModel::Impl& m, const Batch& b, const torch::Tensor& z) {
  const torch::Tensor src = b.src.narrow(0, 0, b.edges), dst = b.dst.narrow(0, 0, b.edges);
  const torch::Tensor in = torch::cat({z.index_select(0, src), z.index_select(0, dst)}, 1);
  return linear(torch::relu(linear(in, m.params[0], m.params[1])), m.params[2], m.params[3]).squeeze(1);
}

class PgExplainer final : public Explainer {
 public:
  PgExplainer(std::shared_ptr<const Classifier> c, std::shared_ptr<const ExplainerModel> m, const FeatureTable& f,
              double fraction)
      : classifier_(std::move(c)), model_(std::move(m)), features_(&f), fraction_(fraction) {}
  std::string_view name() const override { return "pg"; }

  Explanation explain(std::span<const int32_t> group, Evaluator& ev, Workspace&) override {
    const GraphSample s = features_->sample(group, ev.problem().beta);
    Explanation out;
    if (s.src.empty()) return out;
    torch::NoGradGuard no_grad;
    const Batch b = make_batch(s);
    const torch::Tensor mask =
        torch::sigmoid(pg_logits(model_->impl(), b, classifier_->impl().embed(b))).contiguous();
    out.edges = mask_to_edges(mask.data_ptr<float>(), b.edges, s.edge_ids, fraction_);
    return out;
  }

 private:
  std::shared_ptr<const Classifier> classifier_;
  std::shared_ptr<const ExplainerModel> model_;
  const FeatureTable* features_;
  double fraction_;
};

std::vector<GraphSample> samples_with_edges(std::span<const GroupAtBuffer> groups) {
  std::vector<GraphSample> out;
  for (const GroupAtBuffer& g : groups) {
    GraphSample s = g.features->sample(g.nodes, g.beta_bytes);
    if (!s.src.empty()) out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

ExplainerModel train_pg_explainer(std::shared_ptr<const Classifier> classifier, std::span<const GroupAtBuffer> invalid,
                                  const PgTrainOptions& opt, ExplainerTrainReport* report) {
  if (opt.epochs < 1 || opt.batch < 1 || !(opt.lr > 0) || !(opt.temperature_start > 0) || !(opt.temperature_end > 0))
    throw InputError({}, "--epochs", "epochs, batch, learning rate and temperatures must be positive");
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<GraphSample> samples = samples_with_edges(invalid);
  if (samples.empty()) throw InputError({}, "--groups", "no invalid group with an internal edge to train on");
  torch::manual_seed(opt.seed);
  ExplainerModel e = fresh_model(ModelKind::Pg, *classifier);
  auto& m = e.impl();
  for (auto& p : m.params) p.requires_grad_(true);
  const Classifier::Impl& net = classifier->impl();
  torch::optim::Adam adam(m.params, torch::optim::AdamOptions(opt.lr));
  std::mt19937_64 rng(opt.seed);
  std::vector<size_t> order(samples.size());
  std::iota(order.begin(), order.end(), size_t{0});
  ExplainerTrainReport r;
  r.groups = static_cast<int64_t>(samples.size());
  for (int epoch = 0; epoch < opt.epochs; ++epoch) {
    const double tau = opt.temperature_start *
                       std::pow(opt.temperature_end / opt.temperature_start, static_cast<double>(epoch) / opt.epochs);
    std::shuffle(order.begin(), order.end(), rng);
    double total = 0;
    for (size_t at = 0; at < order.size(); at += static_cast<size_t>(opt.batch)) {
      const std::span<const size_t> idx(order.data() + at, std::min<size_t>(opt.batch, order.size() - at));
      const Batch b = make_batch(samples, idx);
      torch::Tensor emb;
      {
        torch::NoGradGuard no_grad;
        emb = net.embed(b);
      }
      const torch::Tensor omega = pg_logits(m, b, emb);
      const torch::Tensor u = torch::rand({b.edges}).clamp(1e-6, 1 - 1e-6);  // bias 0: U(0, 1)
      const torch::Tensor mask = torch::sigmoid((torch::log(u) - torch::log(1 - u) + omega) / tau);
      const auto graphs = static_cast<int64_t>(idx.size());
      // Keep the verdict "invalid" (class 0) with as few and as decided edges as possible.
      const torch::Tensor ce = torch::nn::functional::cross_entropy(net.forward(b, mask),
                                                                    torch::zeros({graphs}, torch::kInt64));
      const torch::Tensor sq = 0.99 * mask + 0.005;
      const torch::Tensor ent = (-sq * torch::log(sq) - (1 - sq) * torch::log(1 - sq)).mean();
      const torch::Tensor loss =
          ce + opt.edge_size * mask.sum() / static_cast<double>(graphs) + opt.edge_entropy * ent;
      adam.zero_grad();
      loss.backward();
      adam.step();
      total += loss.item<double>() * static_cast<double>(graphs);
    }
    r.epoch_loss.push_back(total / static_cast<double>(samples.size()));
  }
  return finish_training(std::move(e), std::move(r), t0, report);
}

std::unique_ptr<Explainer> make_pg_explainer(std::shared_ptr<const Classifier> classifier,
                                             std::shared_ptr<const ExplainerModel> model, const FeatureTable& features,
                                             double fraction) {
  if (model->kind() != ModelKind::Pg) throw std::logic_error("make_pg_explainer: not a PGExplainer model");
  check_pair(*classifier, *model, features);
  return std::make_unique<PgExplainer>(std::move(classifier), std::move(model), features, fraction);
}

// ---- RG-Explainer ---------------------------------------------------------------------------

namespace {

constexpr double kPprAlpha = 0.85;  // [RG]: personalised PageRank smoothing, k = 3 steps
constexpr int kPprSteps = 3;

// One group as RG sees it: its sample, neighbours, normalised adjacency and frozen embeddings.
struct RgGraph {
  const FeatureTable* features = nullptr;
  Group nodes;
  double beta = 0;
  GraphSample sample;
  std::vector<std::vector<int32_t>> nbr;  // undirected, local indices
  torch::Tensor adj;                      // D^-1/2 A D^-1/2, N × N
  torch::Tensor z;                        // classifier node embeddings, N × H
  torch::Tensor mean_emb;                 // H
  torch::Tensor locator_in;               // [mean emb ‖ z_i], N × 2H
};

RgGraph prepare(const Classifier::Impl& net, const FeatureTable& features, std::span<const int32_t> nodes,
                double beta) {
  torch::NoGradGuard no_grad;
  RgGraph g;
  g.features = &features;
  g.nodes.assign(nodes.begin(), nodes.end());
  g.beta = beta;
  g.sample = features.sample(nodes, beta);
  const int32_t n = g.sample.nodes;
  g.nbr.resize(n);
  std::vector<float> a(static_cast<size_t>(n) * n, 0.0f);
  for (size_t e = 0; e < g.sample.src.size(); ++e) {
    const int32_t u = g.sample.src[e], v = g.sample.dst[e];
    g.nbr[u].push_back(v);
    g.nbr[v].push_back(u);
  }
  for (int32_t u = 0; u < n; ++u)
    for (int32_t v : g.nbr[u])
      a[static_cast<size_t>(u) * n + v] =
          static_cast<float>(1.0 / std::sqrt(static_cast<double>(g.nbr[u].size() * g.nbr[v].size())));
  g.adj = torch::from_blob(a.data(), {n, n}, torch::kFloat32).clone();
  const Batch b = make_batch(g.sample);
  g.z = net.embed(b);
  g.mean_emb = g.z.mean(0);
  g.locator_in = torch::cat({g.mean_emb.unsqueeze(0).expand({n, g.z.size(1)}), g.z}, 1);
  return g;
}

torch::Tensor locator_scores(const std::vector<torch::Tensor>& p, const torch::Tensor& in) {
  torch::Tensor h = torch::relu(linear(in, p[kLoc0W], p[kLoc0B]));
  h = torch::relu(linear(h, p[kLoc1W], p[kLoc1B]));
  return linear(h, p[kLoc2W], p[kLoc2B]).squeeze(1);
}

struct Episode {
  std::vector<int32_t> set;          // local indices, in insertion order; set[0] is the seed
  std::vector<torch::Tensor> logp;   // log π of each action taken (with a graph when asked for)
  bool stopped = false;              // the last action was STOP
  double reward = 0;
};

// Picks an action from the log-probabilities `logp` of the `k` actions offered: 0 = STOP when
// `may_stop`, then one per boundary node in ascending order.
using Chooser = std::function<int64_t(const float* logp, int64_t k, bool may_stop, std::span<const int64_t> boundary,
                                      const std::vector<int32_t>& set)>;

int64_t greedy_choice(const float* logp, int64_t k, bool, std::span<const int64_t>, const std::vector<int32_t>&) {
  return std::max_element(logp, logp + k) - logp;  // first of equal maxima
}

Chooser sampling_choice(std::mt19937_64& rng) {
  return [&rng](const float* logp, int64_t k, bool, std::span<const int64_t>, const std::vector<int32_t>&) {
    std::vector<double> w(static_cast<size_t>(k));
    for (int64_t i = 0; i < k; ++i) w[static_cast<size_t>(i)] = std::exp(static_cast<double>(logp[i]));
    return std::discrete_distribution<int64_t>(w.begin(), w.end())(rng);
  };
}

// The sorted outer boundary of `set` (`in_set` marks the set; scratch values 2 are cleared again).
void outer_boundary(const RgGraph& g, const std::vector<int32_t>& set, std::vector<uint8_t>& in_set,
                    std::vector<int64_t>& boundary) {
  boundary.clear();
  for (int32_t u : set)
    for (int32_t v : g.nbr[u])
      if (!in_set[v]) boundary.push_back(v), in_set[v] = 2;
  for (int64_t v : boundary) in_set[v] = 0;
  std::sort(boundary.begin(), boundary.end());
}

torch::Tensor node_attributes(const std::vector<torch::Tensor>& p, const RgGraph& g) {
  const torch::Tensor x =
      torch::from_blob(const_cast<float*>(g.sample.x.data()), {g.sample.nodes, feature_count()}, torch::kFloat32);
  return linear(x, p[kAttrW], p[kAttrB]);
}

// Grows a set from `seed`, each action picked by `choose`. With `grad`, keeps the graph of each
// action's log π (REINFORCE, supervised pre-training).
Episode grow(const std::vector<torch::Tensor>& p, const RgGraph& g, int32_t seed, int max_size, const Chooser& choose,
             bool grad) {
  const int32_t n = g.sample.nodes;
  Episode ep;
  ep.set = {seed};
  std::vector<uint8_t> in_set(n, 0);
  in_set[seed] = 1;
  const torch::Tensor attributes = node_attributes(p, g);
  std::vector<float> ind(static_cast<size_t>(n) * 2);
  std::vector<int64_t> boundary;
  while (static_cast<int>(ep.set.size()) < max_size) {
    outer_boundary(g, ep.set, in_set, boundary);
    if (boundary.empty()) break;
    // Seed and in-set indicators, smoothed by personalised PageRank: p ← α Â p + (1 − α) p₀.
    for (int32_t v = 0; v < n; ++v) {
      ind[2 * v] = v == seed ? 1.0f : 0.0f;
      ind[2 * v + 1] = in_set[v] ? 1.0f : 0.0f;
    }
    torch::Tensor ppr;
    {
      torch::NoGradGuard no_grad;
      const torch::Tensor p0 = torch::from_blob(ind.data(), {n, 2}, torch::kFloat32).clone();
      ppr = p0;
      for (int k = 0; k < kPprSteps; ++k) ppr = kPprAlpha * g.adj.mm(ppr) + (1 - kPprAlpha) * p0;
    }
    torch::Tensor h = ppr.mm(p[kIndW].t()) + attributes;
    h = swish(linear(h, p[kBlk0W], p[kBlk0B]));
    h = swish(linear(h, p[kBlk1W], p[kBlk1B]));
    const torch::Tensor cand = torch::tensor(boundary, torch::kInt64);
    const torch::Tensor node_logp = torch::log_softmax(linear(h.index_select(0, cand), p[kNodeW], p[kNodeB]).squeeze(1), 0);
    std::vector<int64_t> members(ep.set.begin(), ep.set.end());
    const torch::Tensor hs = h.index_select(0, torch::tensor(members, torch::kInt64));
    const torch::Tensor att = torch::softmax(linear(hs, p[kAttnW], p[kAttnB]).squeeze(1), 0);
    const torch::Tensor pooled = (att.unsqueeze(1) * hs).sum(0, true);
    const torch::Tensor stop_logp = torch::log_softmax(linear(pooled, p[kStopW], p[kStopB]).squeeze(0), 0);  // (go, stop)
    // Actions: 0 = STOP (not before the set holds an edge), 1 + i = add boundary[i].
    const bool may_stop = ep.set.size() >= 2;
    const torch::Tensor action_logp =
        may_stop ? torch::cat({stop_logp.narrow(0, 1, 1), stop_logp[0] + node_logp}) : node_logp;
    int64_t a = 0;
    {
      const torch::Tensor lp = action_logp.detach().contiguous();
      a = choose(lp.data_ptr<float>(), lp.numel(), may_stop, boundary, ep.set);
    }
    if (grad) ep.logp.push_back(action_logp[a]);
    if (may_stop && a == 0) {
      ep.stopped = true;
      break;
    }
    const auto v = static_cast<int32_t>(boundary[static_cast<size_t>(a - (may_stop ? 1 : 0))]);
    ep.set.push_back(v);
    in_set[v] = 1;
  }
  return ep;
}

// Finishes every set of `prefixes` (each already grown from its first node, not finished) by
// sampling π without a gradient: the same policy as grow, one forward pass per step for all of them.
RgSets complete_by_sampling(const std::vector<torch::Tensor>& p, const RgGraph& g, const RgSets& prefixes,
                            int max_size, std::mt19937_64& rng) {
  torch::NoGradGuard no_grad;
  const int32_t n = g.sample.nodes;
  const torch::Tensor attributes = node_attributes(p, g);
  RgSets sets = prefixes;
  const size_t count = sets.size();
  std::vector<std::vector<uint8_t>> in_set(count, std::vector<uint8_t>(static_cast<size_t>(n), 0));
  std::vector<uint8_t> done(count, 0);
  std::vector<std::vector<int64_t>> boundary(count);
  for (size_t b = 0; b < count; ++b) {
    for (int32_t v : sets[b]) in_set[b][v] = 1;
    done[b] = static_cast<int>(sets[b].size()) >= max_size;
  }
  std::vector<size_t> active;
  std::vector<float> ind;
  std::vector<uint8_t> member;
  std::vector<double> w;
  for (;;) {
    active.clear();
    for (size_t b = 0; b < count; ++b) {
      if (done[b]) continue;
      outer_boundary(g, sets[b], in_set[b], boundary[b]);
      if (boundary[b].empty())
        done[b] = 1;
      else
        active.push_back(b);
    }
    if (active.empty()) break;
    const auto A = static_cast<int64_t>(active.size());
    ind.assign(static_cast<size_t>(n) * 2 * A, 0.0f);
    member.assign(static_cast<size_t>(A) * n, 0);
    for (int64_t a = 0; a < A; ++a) {
      const size_t b = active[static_cast<size_t>(a)];
      ind[static_cast<size_t>(sets[b][0]) * 2 * A + 2 * a] = 1.0f;
      for (int32_t v : sets[b]) {
        ind[static_cast<size_t>(v) * 2 * A + 2 * a + 1] = 1.0f;
        member[static_cast<size_t>(a) * n + v] = 1;
      }
    }
    const torch::Tensor p0 = torch::from_blob(ind.data(), {n, 2 * A}, torch::kFloat32).clone();
    torch::Tensor ppr = p0;
    for (int k = 0; k < kPprSteps; ++k) ppr = kPprAlpha * g.adj.mm(ppr) + (1 - kPprAlpha) * p0;
    torch::Tensor h = torch::matmul(ppr.view({n, A, 2}).permute({1, 0, 2}), p[kIndW].t()) + attributes;  // A × n × W
    h = swish(torch::matmul(h, p[kBlk0W].t()) + p[kBlk0B]);
    h = swish(torch::matmul(h, p[kBlk1W].t()) + p[kBlk1B]);
    const torch::Tensor node = (torch::matmul(h, p[kNodeW].t()) + p[kNodeB]).squeeze(2).contiguous();  // A × n
    const torch::Tensor in_mask = torch::from_blob(member.data(), {A, n}, torch::kUInt8).to(torch::kBool);
    const torch::Tensor att = torch::softmax(
        (torch::matmul(h, p[kAttnW].t()) + p[kAttnB]).squeeze(2).masked_fill(in_mask.logical_not(), -INFINITY), 1);
    const torch::Tensor pooled = (att.unsqueeze(2) * h).sum(1);  // A × W
    const torch::Tensor stop = torch::log_softmax(linear(pooled, p[kStopW], p[kStopB]), 1).contiguous();  // (go, stop)
    const float* ns = node.data_ptr<float>();
    const float* st = stop.data_ptr<float>();
    for (int64_t a = 0; a < A; ++a) {
      const size_t b = active[static_cast<size_t>(a)];
      const std::vector<int64_t>& bd = boundary[b];
      const bool may_stop = sets[b].size() >= 2;
      // log-softmax of the node scores over the boundary, then the action weights as in grow.
      double mx = -INFINITY;
      for (int64_t v : bd) mx = std::max(mx, static_cast<double>(ns[a * n + v]));
      double z = 0;
      for (int64_t v : bd) z += std::exp(static_cast<double>(ns[a * n + v]) - mx);
      w.clear();
      const double go = may_stop ? std::exp(static_cast<double>(st[2 * a])) : 1.0;
      if (may_stop) w.push_back(std::exp(static_cast<double>(st[2 * a + 1])));
      for (int64_t v : bd) w.push_back(go * std::exp(static_cast<double>(ns[a * n + v]) - mx) / z);
      const int64_t act = std::discrete_distribution<int64_t>(w.begin(), w.end())(rng);
      if (may_stop && act == 0) {
        done[b] = 1;
        continue;
      }
      const auto v = static_cast<int32_t>(bd[static_cast<size_t>(act - (may_stop ? 1 : 0))]);
      sets[b].push_back(v);
      in_set[b][v] = 1;
      if (static_cast<int>(sets[b].size()) >= max_size) done[b] = 1;
    }
  }
  return sets;
}

// R(S) = −[CE(f(G[S]), invalid) + size·|E(S)| + radius·depth(S) + sim·‖mean emb(G[S]) − mean emb(G)‖].
double reward(const Classifier::Impl& net, const RgGraph& g, const std::vector<int32_t>& set, const RgTrainOptions& opt) {
  torch::NoGradGuard no_grad;
  Group sub;
  for (int32_t v : set) sub.push_back(g.nodes[v]);
  std::sort(sub.begin(), sub.end());
  const GraphSample s = g.features->sample(sub, g.beta);
  const Batch b = make_batch(s);
  const torch::Tensor h = net.embed(b);
  const double ce = -torch::log_softmax(net.head(Classifier::Impl::readout(b, h)), 1)[0][0].item<double>();
  const double sim = (h.mean(0) - g.mean_emb).norm().item<double>();
  // Depth: the largest hop distance from the seed inside the set.
  std::vector<int32_t> dist(g.sample.nodes, -1), queue = {set[0]};
  std::vector<uint8_t> member(g.sample.nodes, 0);
  for (int32_t v : set) member[v] = 1;
  dist[set[0]] = 0;
  int32_t depth = 0;
  for (size_t q = 0; q < queue.size(); ++q)
    for (int32_t w : g.nbr[queue[q]])
      if (member[w] && dist[w] < 0) dist[w] = dist[queue[q]] + 1, depth = std::max(depth, dist[w]), queue.push_back(w);
  return -(ce + opt.size_reg * static_cast<double>(s.src.size()) + opt.radius_penalty * depth + opt.sim_reg * sim);
}

// R(S) depends on the members and the seed only: remembered per group across the training.
class RewardMemo {
 public:
  RewardMemo(const Classifier::Impl& net, const std::vector<RgGraph>& graphs, const RgTrainOptions& opt)
      : net_(net), graphs_(graphs), opt_(opt), memo_(graphs.size()) {}
  double operator()(size_t gi, const std::vector<int32_t>& set) {
    std::vector<int32_t> key(set.begin() + 1, set.end());
    std::sort(key.begin(), key.end());
    key.push_back(set[0]);
    auto& m = memo_[gi];
    if (auto it = m.find(key); it != m.end()) return it->second;
    const double r = reward(net_, graphs_[gi], set, opt_);
    if (m.size() >= kMaxPerGroup) m.clear();  // bounds memory; the values are the same when recomputed
    m.emplace(std::move(key), r);
    return r;
  }

 private:
  static constexpr size_t kMaxPerGroup = 4096;
  const Classifier::Impl& net_;
  const std::vector<RgGraph>& graphs_;
  const RgTrainOptions& opt_;
  std::vector<std::map<std::vector<int32_t>, double>> memo_;
};

class RgExplainer final : public Explainer {
 public:
  RgExplainer(std::shared_ptr<const Classifier> c, std::shared_ptr<const ExplainerModel> m, const FeatureTable& f,
              int max_size)
      : classifier_(std::move(c)), model_(std::move(m)), features_(&f), max_size_(max_size) {}
  std::string_view name() const override { return "rg"; }

  Explanation explain(std::span<const int32_t> group, Evaluator& ev, Workspace&) override {
    Explanation out;
    if (group.size() < 2) return out;
    torch::NoGradGuard no_grad;
    const RgGraph g = prepare(classifier_->impl(), *features_, group, ev.problem().beta);
    if (g.sample.src.empty()) return out;
    const auto& p = model_->impl().params;
    const torch::Tensor scores = locator_scores(p, g.locator_in).contiguous();
    const float* sc = scores.data_ptr<float>();
    const auto seed = static_cast<int32_t>(std::max_element(sc, sc + g.sample.nodes) - sc);
    const Episode ep = grow(p, g, seed, max_size_, greedy_choice, false);
    // The edges inside the set, ranked by when their later end joined it ([RG] prepare_mask).
    std::vector<int32_t> position(g.sample.nodes, -1);
    for (size_t i = 0; i < ep.set.size(); ++i) position[ep.set[i]] = static_cast<int32_t>(i);
    std::vector<std::pair<int32_t, int32_t>> ranked;  // (later position, edge index)
    for (size_t e = 0; e < g.sample.src.size(); ++e) {
      const int32_t a = position[g.sample.src[e]], b = position[g.sample.dst[e]];
      if (a >= 0 && b >= 0) ranked.emplace_back(std::max(a, b), static_cast<int32_t>(e));
    }
    std::sort(ranked.begin(), ranked.end());
    for (const auto& [pos, e] : ranked) out.edges.push_back(g.sample.edge_ids[e]);
    return out;
  }

 private:
  std::shared_ptr<const Classifier> classifier_;
  std::shared_ptr<const ExplainerModel> model_;
  const FeatureTable* features_;
  int max_size_;
};

// The nodes within `hops` of `seed`, in breadth-first order (seed first).
std::vector<int32_t> hop_set(const RgGraph& g, int32_t seed, int hops) {
  std::vector<int32_t> dist(g.sample.nodes, -1), order = {seed};
  dist[seed] = 0;
  for (size_t q = 0; q < order.size(); ++q)
    if (dist[order[q]] < hops)
      for (int32_t w : g.nbr[order[q]])
        if (dist[w] < 0) dist[w] = dist[order[q]] + 1, order.push_back(w);
  return order;
}

// Fits the locator by KL(softmax(rewards of the set `explain` gives for each node) ‖
// softmax(scores)) on a fixed subset of groups.
void fit_locator(ExplainerModel::Impl& m, const std::vector<RgGraph>& graphs, std::span<const size_t> subset,
                 RewardMemo& rewards, const std::function<std::vector<int32_t>(const RgGraph&, int32_t)>& explain,
                 const RgTrainOptions& opt) {
  std::vector<torch::Tensor> targets;
  {
    torch::NoGradGuard no_grad;
    for (size_t gi : subset) {
      const RgGraph& g = graphs[gi];
      std::vector<float> r(g.sample.nodes);
      for (int32_t v = 0; v < g.sample.nodes; ++v) r[v] = static_cast<float>(rewards(gi, explain(g, v)));
      targets.push_back(torch::softmax(torch::tensor(r), 0));
    }
  }
  std::vector<torch::Tensor> loc = m.slice(0, kLocatorTensors);
  torch::optim::Adam adam(loc, torch::optim::AdamOptions(opt.locator_lr));
  for (int it = 0; it < opt.locator_iterations; ++it) {
    torch::Tensor loss = torch::zeros({});
    for (size_t k = 0; k < subset.size(); ++k) {
      const torch::Tensor logq = torch::log_softmax(locator_scores(m.params, graphs[subset[k]].locator_in), 0);
      loss = loss + (targets[k] * (torch::log(targets[k] + 1e-12) - logq)).sum();
    }
    loss = loss / static_cast<double>(subset.size());
    adam.zero_grad();
    loss.backward();
    adam.step();
  }
}

int32_t locator_argmax(const ExplainerModel::Impl& m, const RgGraph& g) {
  torch::NoGradGuard no_grad;
  const torch::Tensor scores = locator_scores(m.params, g.locator_in).contiguous();
  const float* sc = scores.data_ptr<float>();
  return static_cast<int32_t>(std::max_element(sc, sc + g.sample.nodes) - sc);
}

// A supervised target of the generator's pre-training: the k-hop neighbourhood of a group's seed.
struct PretrainTarget {
  size_t graph = 0;
  std::vector<int32_t> nodes;  // breadth-first from the seed (nodes[0])
};

// [RG]'s expansion of a target: `samples` random connected orders of its nodes from the seed (each
// next node drawn uniformly from the target nodes on the boundary), cut at max_size nodes; the one
// with the highest reward (the first of equals).
std::vector<int32_t> best_expansion(const RgGraph& g, size_t gi, const PretrainTarget& t, RewardMemo& rewards,
                                    const RgTrainOptions& opt, std::mt19937_64& rng) {
  std::vector<uint8_t> in_target(g.sample.nodes, 0), taken(g.sample.nodes, 0);
  for (int32_t v : t.nodes) in_target[v] = 1;
  std::vector<int32_t> best, walk, cand;
  double best_r = -INFINITY;
  for (int s = 0; s < std::max(1, opt.pretrain_samples); ++s) {
    std::fill(taken.begin(), taken.end(), 0);
    walk = {t.nodes[0]};
    taken[t.nodes[0]] = 1;
    while (walk.size() < t.nodes.size() && static_cast<int>(walk.size()) < opt.max_size) {
      cand.clear();
      for (int32_t u : walk)
        for (int32_t v : g.nbr[u])
          if (in_target[v] && !taken[v]) cand.push_back(v), taken[v] = 2;
      if (cand.empty()) break;
      for (int32_t v : cand) taken[v] = 0;
      std::sort(cand.begin(), cand.end());
      const int32_t v = cand[std::uniform_int_distribution<size_t>(0, cand.size() - 1)(rng)];
      walk.push_back(v);
      taken[v] = 1;
    }
    const double r = rewards(gi, walk);
    if (r > best_r) best_r = r, best = walk;
  }
  return best;
}

// "list": teach the expansion order, then STOP. The target node is always on the boundary (the
// order is connected); the list ends with STOP unless it reached max_size.
Chooser list_choice(const std::vector<int32_t>& order) {
  return [&order](const float*, int64_t, bool may_stop, std::span<const int64_t> boundary,
                  const std::vector<int32_t>& set) -> int64_t {
    if (set.size() >= order.size()) return 0;  // STOP (offered: the orders have ≥ 2 nodes)
    const auto it = std::lower_bound(boundary.begin(), boundary.end(), static_cast<int64_t>(order[set.size()]));
    return (it - boundary.begin()) + (may_stop ? 1 : 0);
  };
}

// "set": of the boundary nodes still in the target, the one the model likes most; STOP when none is left.
Chooser set_choice(const std::vector<uint8_t>& in_target) {
  return [&in_target](const float* logp, int64_t k, bool may_stop, std::span<const int64_t> boundary,
                      const std::vector<int32_t>&) -> int64_t {
    int64_t best = -1;
    const int64_t off = may_stop ? 1 : 0;
    for (size_t i = 0; i < boundary.size(); ++i)
      if (in_target[boundary[i]] && (best < 0 || logp[static_cast<int64_t>(i) + off] > logp[best]))
        best = static_cast<int64_t>(i) + off;
    if (best >= 0) return best;
    return may_stop ? 0 : greedy_choice(logp, k, may_stop, boundary, {});
  };
}

// Supervised pre-training of the generator ([RG] pretrain_g): `list_epochs` then `set_epochs`
// passes over the targets in shuffled batches; loss = mean −log π of the taught actions.
void pretrain_generator(ExplainerModel::Impl& m, const std::vector<RgGraph>& graphs,
                        const std::vector<PretrainTarget>& targets, RewardMemo& rewards, torch::optim::Adam& adam,
                        const RgTrainOptions& opt, std::mt19937_64& rng, std::vector<double>& epoch_loss) {
  std::vector<size_t> order(targets.size());
  std::iota(order.begin(), order.end(), size_t{0});
  for (int epoch = 0; epoch < opt.pretrain_list_epochs + opt.pretrain_set_epochs; ++epoch) {
    const bool use_set = epoch >= opt.pretrain_list_epochs;
    std::shuffle(order.begin(), order.end(), rng);
    double total = 0;
    int64_t actions = 0;
    for (size_t at = 0; at < order.size(); at += static_cast<size_t>(opt.pretrain_batch)) {
      const size_t count = std::min<size_t>(opt.pretrain_batch, order.size() - at);
      torch::Tensor loss = torch::zeros({});
      int64_t n = 0;
      double nll = 0;  // reported apart from the optimised tensor
      for (size_t k = 0; k < count; ++k) {
        const PretrainTarget& t = targets[order[at + k]];
        const RgGraph& g = graphs[t.graph];
        const std::vector<int32_t> expansion = best_expansion(g, t.graph, t, rewards, opt, rng);
        std::vector<uint8_t> in_target(g.sample.nodes, 0);
        for (int32_t v : expansion) in_target[v] = 1;
        const Episode ep = grow(m.params, g, expansion[0], opt.max_size,
                                use_set ? set_choice(in_target) : list_choice(expansion), true);
        for (const torch::Tensor& lp : ep.logp) loss = loss - lp, nll -= lp.item<double>();
        n += static_cast<int64_t>(ep.logp.size());
      }
      if (n == 0) continue;
      loss = loss / static_cast<double>(n);
      adam.zero_grad();
      loss.backward();
      adam.step();
      total += nll;
      actions += n;
    }
    epoch_loss.push_back(actions ? total / static_cast<double>(actions) : 0.0);
  }
}

}  // namespace

ExplainerModel train_rg_explainer(std::shared_ptr<const Classifier> classifier, std::span<const GroupAtBuffer> invalid,
                                  const RgTrainOptions& opt, ExplainerTrainReport* report) {
  if (opt.epochs < 0 || opt.batch < 1 || !(opt.lr > 0) || opt.max_size < 2 || opt.locator_every < 1 ||
      opt.locator_iterations < 0 || opt.locator_groups < 1 || opt.n_rollouts < 0 || opt.pretrain_hops < 1 ||
      opt.pretrain_list_epochs < 0 || opt.pretrain_set_epochs < 0 || opt.pretrain_batch < 1 ||
      opt.pretrain_samples < 1)
    throw InputError({}, "--epochs",
                     "epochs, batch, learning rates, locator, rollout and pre-training settings and max size must be "
                     "positive");
  const auto t0 = std::chrono::steady_clock::now();
  const Classifier::Impl& net = classifier->impl();
  std::vector<RgGraph> graphs;
  for (const GroupAtBuffer& g : invalid) {
    if (g.nodes.size() < 2) continue;
    RgGraph rg = prepare(net, *g.features, g.nodes, g.beta_bytes);
    if (!rg.sample.src.empty()) graphs.push_back(std::move(rg));
  }
  if (graphs.empty()) throw InputError({}, "--groups", "no invalid group with an internal edge to train on");
  torch::manual_seed(opt.seed);
  ExplainerModel e = fresh_model(ModelKind::Rg, *classifier);
  auto& m = e.impl();
  for (auto& p : m.params) p.requires_grad_(true);
  std::mt19937_64 rng(opt.seed);
  std::vector<size_t> order(graphs.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::vector<size_t> locator_subset = order;
  std::shuffle(locator_subset.begin(), locator_subset.end(), rng);
  locator_subset.resize(std::min<size_t>(locator_subset.size(), static_cast<size_t>(opt.locator_groups)));
  // One optimiser for the generator, through pre-training and REINFORCE (as [RG]).
  torch::optim::Adam adam(m.slice(kLocatorTensors, kRgTensors), torch::optim::AdamOptions(opt.lr));
  RewardMemo rewards(net, graphs, opt);
  ExplainerTrainReport r;
  r.groups = static_cast<int64_t>(graphs.size());
  const auto greedy = [&](const RgGraph& g, int32_t v) { return grow(m.params, g, v, opt.max_size, greedy_choice, false).set; };
  if (opt.pretrain_list_epochs + opt.pretrain_set_epochs > 0) {
    // [RG] _pretrain: the locator learns the rewards of each node's k-hop neighbourhood, and the
    // generator is taught the k-hop neighbourhood of each group's locator seed.
    fit_locator(m, graphs, locator_subset, rewards,
                [&](const RgGraph& g, int32_t v) { return hop_set(g, v, opt.pretrain_hops); }, opt);
    std::vector<PretrainTarget> targets;
    for (size_t gi = 0; gi < graphs.size(); ++gi) {
      PretrainTarget t{gi, hop_set(graphs[gi], locator_argmax(m, graphs[gi]), opt.pretrain_hops)};
      if (static_cast<int>(t.nodes.size()) >= std::max(2, opt.pretrain_min_nodes)) targets.push_back(std::move(t));
    }
    r.pretrain_targets = static_cast<int64_t>(targets.size());
    if (!targets.empty()) pretrain_generator(m, graphs, targets, rewards, adam, opt, rng, r.pretrain_loss);
  }
  double baseline = 0;
  bool have_baseline = false;
  for (int epoch = 0; epoch < opt.epochs; ++epoch) {
    if (epoch % opt.locator_every == 0) fit_locator(m, graphs, locator_subset, rewards, greedy, opt);
    std::shuffle(order.begin(), order.end(), rng);
    double total = 0;
    for (size_t at = 0; at < order.size(); at += static_cast<size_t>(opt.batch)) {
      const size_t count = std::min<size_t>(opt.batch, order.size() - at);
      torch::Tensor loss = torch::zeros({});
      double final_sum = 0, step_sum = 0;
      int64_t steps = 0;
      std::vector<std::pair<std::vector<double>, Episode>> eps;
      for (size_t k = 0; k < count; ++k) {
        const size_t gi = order[at + k];
        const RgGraph& g = graphs[gi];
        // Seeds drawn from the locator (exploration); the explainer itself takes its argmax.
        int32_t seed = 0;
        {
          torch::NoGradGuard no_grad;
          const torch::Tensor pr = torch::softmax(locator_scores(m.params, g.locator_in), 0).contiguous();
          const float* v = pr.data_ptr<float>();
          seed = static_cast<int32_t>(std::discrete_distribution<int32_t>(v, v + pr.numel())(rng));
        }
        Episode ep = grow(m.params, g, seed, opt.max_size, sampling_choice(rng), true);
        std::vector<double> step = rg_step_rewards(
            ep.set, ep.stopped, opt.n_rollouts,
            [&](const RgSets& prefixes) { return complete_by_sampling(m.params, g, prefixes, opt.max_size, rng); },
            [&](const RgSets& sets) {
              std::vector<double> out;
              for (const auto& s : sets) out.push_back(rewards(gi, s));
              return out;
            });
        ep.reward = rewards(gi, ep.set);
        final_sum += ep.reward;
        for (double x : step) step_sum += x;
        steps += static_cast<int64_t>(step.size());
        eps.emplace_back(std::move(step), std::move(ep));
      }
      // REINFORCE: each action weighted by its (rollout) reward less a moving-average baseline;
      // the loss is the mean over the batch's actions ([RG]: −mean(R · log π)).
      const double mean_step = steps ? step_sum / static_cast<double>(steps) : 0.0;
      if (!have_baseline) baseline = mean_step, have_baseline = true;
      for (const auto& [step, ep] : eps)
        for (size_t t = 0; t < step.size(); ++t) loss = loss - (step[t] - baseline) * ep.logp[t];
      if (steps > 0) {
        loss = loss / static_cast<double>(steps);
        adam.zero_grad();
        loss.backward();
        adam.step();
      }
      baseline = 0.9 * baseline + 0.1 * mean_step;
      total += final_sum;
    }
    r.epoch_loss.push_back(total / static_cast<double>(graphs.size()));
  }
  return finish_training(std::move(e), std::move(r), t0, report);
}

std::unique_ptr<Explainer> make_rg_explainer(std::shared_ptr<const Classifier> classifier,
                                             std::shared_ptr<const ExplainerModel> model, const FeatureTable& features,
                                             int max_size) {
  if (model->kind() != ModelKind::Rg) throw std::logic_error("make_rg_explainer: not an RG-Explainer model");
  check_pair(*classifier, *model, features);
  return std::make_unique<RgExplainer>(std::move(classifier), std::move(model), features, max_size);
}

void fill_explainer_entries(TorchModule& t) {
  t.explainer_new = &new_explainer;
  t.explainer_delete = &delete_explainer;
  t.explainer_load = &ExplainerModel::load;
  t.explainer_shipped = &ExplainerModel::shipped;
  t.explainer_parse = &ExplainerModel::parse;
  t.explainer_save = &ExplainerModel::save;
  t.explainer_kind = &ExplainerModel::kind;
  t.explainer_scheme = &ExplainerModel::scheme;
  t.explainer_parameters = &ExplainerModel::parameters;
  t.train_pg_explainer = &train_pg_explainer;
  t.train_rg_explainer = &train_rg_explainer;
  t.make_pg_explainer = &make_pg_explainer;
  t.make_rg_explainer = &make_rg_explainer;
}

}  // namespace mapfuse::get::gnn
