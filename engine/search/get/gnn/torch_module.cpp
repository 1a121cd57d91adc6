// The binary's side of the libtorch module (torch_module.hpp): the loader, and the public
// functions of gnn.hpp and explainers.hpp as forwarders through the module's table.
#include "engine/search/get/gnn/torch_module.hpp"

#include <dlfcn.h>
#include <fmt/format.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <stdexcept>

namespace mapfuse::get::gnn {

namespace {

#ifndef MAPFUSE_TORCH_MODULE_PATH
#define MAPFUSE_TORCH_MODULE_PATH ""
#endif

std::string beside_executable() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return {};
  std::string exe(buf, static_cast<size_t>(n));
  const size_t slash = exe.rfind('/');
  return slash == std::string::npos ? std::string{} : exe.substr(0, slash + 1) + "libmapfuse_torch.so";
}

const TorchModule* load() {
  std::vector<std::string> tried;
  if (const char* env = std::getenv("MAPFUSE_TORCH_MODULE"); env && *env) {
    tried.push_back(env);  // set: the only place looked at (a wrong path must not fall back silently)
  } else {
    if (std::string p = beside_executable(); !p.empty()) tried.push_back(p);
    if (std::string p = MAPFUSE_TORCH_MODULE_PATH; !p.empty() && p != (tried.empty() ? "" : tried[0]))
      tried.push_back(p);
  }
  std::string why;
  for (const std::string& path : tried) {
    if (access(path.c_str(), F_OK) != 0) {
      why += fmt::format("\n  {}: no such file", path);
      continue;
    }
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      why += fmt::format("\n  {}: {}", path, dlerror());
      continue;
    }
    auto entry = reinterpret_cast<const TorchModule* (*)()>(dlsym(h, kTorchModuleEntry));
    if (!entry) {
      why += fmt::format("\n  {}: no entry point {}", path, kTorchModuleEntry);
      continue;
    }
    const TorchModule* m = entry();
    if (m->abi != kTorchModuleAbi || m->size != sizeof(TorchModule)) {
      why += fmt::format("\n  {}: built for interface {} ({} bytes), this binary expects {} ({} bytes); rebuild both",
                         path, m->abi, m->size, kTorchModuleAbi, sizeof(TorchModule));
      continue;
    }
    return m;  // never closed: objects it made live until exit
  }
  throw std::runtime_error(
      "GET-fusion's GNN (classifier, GNNExplainer, PGExplainer, RG-Explainer) needs the libtorch module "
      "libmapfuse_torch.so (built with mapfuse; MAPFUSE_TORCH_MODULE names another), which could not be loaded:" +
      (why.empty() ? std::string("\n  no place to look for it") : why));
}

}  // namespace

const TorchModule& torch_module() {
  static const TorchModule* const m = load();  // a failed load throws, and the next call tries again
  return *m;
}

// Classifier

Classifier::Classifier() : impl_(torch_module().classifier_new(), torch_module().classifier_delete) {}
Classifier Classifier::load(const std::string& path, FusionScheme expected) {
  return torch_module().classifier_load(path, expected);
}
Classifier Classifier::shipped(FusionScheme scheme) { return torch_module().classifier_shipped(scheme); }
Classifier Classifier::parse(std::string_view bytes, const std::string& source, FusionScheme expected) {
  return torch_module().classifier_parse(bytes, source, expected);
}
void Classifier::save(const std::string& path) const { (this->*torch_module().classifier_save)(path); }
FusionScheme Classifier::scheme() const { return (this->*torch_module().classifier_scheme)(); }
ClassifierShape Classifier::shape() const { return (this->*torch_module().classifier_shape)(); }
std::vector<double> Classifier::predict(std::span<const GraphSample> samples) const {
  return (this->*torch_module().classifier_predict)(samples);
}
Metrics Classifier::evaluate(std::span<const GraphSample> samples) const {
  return (this->*torch_module().classifier_evaluate)(samples);
}
std::vector<float> Classifier::parameters() const { return (this->*torch_module().classifier_parameters)(); }
std::string Classifier::fingerprint() const { return (this->*torch_module().classifier_fingerprint)(); }

Classifier train_classifier(FusionScheme scheme, std::span<const GraphSample> train,
                            std::span<const GraphSample> validation, const TrainOptions& opt, TrainReport* report) {
  return torch_module().train_classifier(scheme, train, validation, opt, report);
}

std::unique_ptr<Explainer> make_gnn_explainer(std::shared_ptr<const Classifier> model, const FeatureTable& features,
                                              const GnnExplainerOptions& opt) {
  return torch_module().make_gnn_explainer(std::move(model), features, opt);
}

double dense_forward_gap(const Classifier& c, const GraphSample& s, std::span<const float> edge_weight) {
  return torch_module().dense_forward_gap(c, s, edge_weight);
}

// ExplainerModel

ExplainerModel::ExplainerModel() : impl_(torch_module().explainer_new(), torch_module().explainer_delete) {}
ExplainerModel ExplainerModel::load(const std::string& path, ModelKind kind, const Classifier& classifier) {
  return torch_module().explainer_load(path, kind, classifier);
}
ExplainerModel ExplainerModel::shipped(ModelKind kind, const Classifier& classifier) {
  return torch_module().explainer_shipped(kind, classifier);
}
ExplainerModel ExplainerModel::parse(std::string_view bytes, const std::string& source, ModelKind kind,
                                     const Classifier& classifier) {
  return torch_module().explainer_parse(bytes, source, kind, classifier);
}
void ExplainerModel::save(const std::string& path) const { (this->*torch_module().explainer_save)(path); }
ModelKind ExplainerModel::kind() const { return (this->*torch_module().explainer_kind)(); }
FusionScheme ExplainerModel::scheme() const { return (this->*torch_module().explainer_scheme)(); }
std::vector<float> ExplainerModel::parameters() const { return (this->*torch_module().explainer_parameters)(); }

ExplainerModel train_pg_explainer(std::shared_ptr<const Classifier> classifier, std::span<const GroupAtBuffer> invalid,
                                  const PgTrainOptions& opt, ExplainerTrainReport* report) {
  return torch_module().train_pg_explainer(std::move(classifier), invalid, opt, report);
}
ExplainerModel train_rg_explainer(std::shared_ptr<const Classifier> classifier, std::span<const GroupAtBuffer> invalid,
                                  const RgTrainOptions& opt, ExplainerTrainReport* report) {
  return torch_module().train_rg_explainer(std::move(classifier), invalid, opt, report);
}
std::unique_ptr<Explainer> make_pg_explainer(std::shared_ptr<const Classifier> classifier,
                                             std::shared_ptr<const ExplainerModel> model, const FeatureTable& features,
                                             double fraction) {
  return torch_module().make_pg_explainer(std::move(classifier), std::move(model), features, fraction);
}
std::unique_ptr<Explainer> make_rg_explainer(std::shared_ptr<const Classifier> classifier,
                                             std::shared_ptr<const ExplainerModel> model, const FeatureTable& features,
                                             int max_size) {
  return torch_module().make_rg_explainer(std::move(classifier), std::move(model), features, max_size);
}

}  // namespace mapfuse::get::gnn
