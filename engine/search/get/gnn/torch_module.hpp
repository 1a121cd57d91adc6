#pragma once
// GET-fusion's GNN code that needs libtorch (gnn_torch.cpp, explainers_torch.cpp) is built into a
// module, libmapfuse_torch.so, that is loaded on the first use of a Classifier or ExplainerModel.
// Linked into the binary, libtorch's loading and operator registration cost every process
// 0.6-0.8 CPU-s at start-up (`mapfuse --help`, every test, every MPI rank), used or not.
//
// The binary defines the public functions of gnn.hpp and explainers.hpp as forwarders through this
// table (torch_module.cpp); the module defines the same functions for real and fills the table with
// their addresses (linked with -Bsymbolic, so the module's own calls stay inside it). What the
// module needs from the engine it takes from the binary, which exports its symbols.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/search/get/gnn/explainers.hpp"
#include "engine/search/get/gnn/gnn.hpp"

namespace mapfuse::get::gnn {

// Bumped whenever the table or a type it passes changes: a module from another build is refused.
inline constexpr int kTorchModuleAbi = 2;

struct TorchModule {
  int abi = 0;
  size_t size = 0;  // sizeof(TorchModule) in the module's build

  Classifier::Impl* (*classifier_new)() = nullptr;
  void (*classifier_delete)(Classifier::Impl*) = nullptr;
  Classifier (*classifier_load)(const std::string&, FusionScheme) = nullptr;
  Classifier (*classifier_shipped)(FusionScheme) = nullptr;
  Classifier (*classifier_parse)(std::string_view, const std::string&, FusionScheme) = nullptr;
  void (Classifier::*classifier_save)(const std::string&) const = nullptr;
  FusionScheme (Classifier::*classifier_scheme)() const = nullptr;
  ClassifierShape (Classifier::*classifier_shape)() const = nullptr;
  std::vector<double> (Classifier::*classifier_predict)(std::span<const GraphSample>) const = nullptr;
  Metrics (Classifier::*classifier_evaluate)(std::span<const GraphSample>) const = nullptr;
  std::vector<float> (Classifier::*classifier_parameters)() const = nullptr;
  std::string (Classifier::*classifier_fingerprint)() const = nullptr;
  Classifier (*train_classifier)(FusionScheme, std::span<const GraphSample>, std::span<const GraphSample>,
                                 const TrainOptions&, TrainReport*) = nullptr;
  std::unique_ptr<Explainer> (*make_gnn_explainer)(std::shared_ptr<const Classifier>, const FeatureTable&,
                                                   const GnnExplainerOptions&) = nullptr;
  double (*dense_forward_gap)(const Classifier&, const GraphSample&, std::span<const float>) = nullptr;

  ExplainerModel::Impl* (*explainer_new)() = nullptr;
  void (*explainer_delete)(ExplainerModel::Impl*) = nullptr;
  ExplainerModel (*explainer_load)(const std::string&, ModelKind, const Classifier&) = nullptr;
  ExplainerModel (*explainer_shipped)(ModelKind, const Classifier&) = nullptr;
  ExplainerModel (*explainer_parse)(std::string_view, const std::string&, ModelKind, const Classifier&) = nullptr;
  void (ExplainerModel::*explainer_save)(const std::string&) const = nullptr;
  ModelKind (ExplainerModel::*explainer_kind)() const = nullptr;
  FusionScheme (ExplainerModel::*explainer_scheme)() const = nullptr;
  std::vector<float> (ExplainerModel::*explainer_parameters)() const = nullptr;
  ExplainerModel (*train_pg_explainer)(std::shared_ptr<const Classifier>, std::span<const GroupAtBuffer>,
                                       const PgTrainOptions&, ExplainerTrainReport*) = nullptr;
  ExplainerModel (*train_rg_explainer)(std::shared_ptr<const Classifier>, std::span<const GroupAtBuffer>,
                                       const RgTrainOptions&, ExplainerTrainReport*) = nullptr;
  std::unique_ptr<Explainer> (*make_pg_explainer)(std::shared_ptr<const Classifier>,
                                                  std::shared_ptr<const ExplainerModel>, const FeatureTable&,
                                                  double) = nullptr;
  std::unique_ptr<Explainer> (*make_rg_explainer)(std::shared_ptr<const Classifier>,
                                                  std::shared_ptr<const ExplainerModel>, const FeatureTable&,
                                                  int) = nullptr;
};

// The module's entry point (extern "C", so that dlsym finds it by this name).
inline constexpr const char* kTorchModuleEntry = "mapfuse_torch_module";

// The table, loading the module on the first call (thread-safe). The module is looked for at
// $MAPFUSE_TORCH_MODULE, then beside the executable (libmapfuse_torch.so), then where this build
// put it. Throws std::runtime_error naming every place tried and dlopen's reason when it cannot
// be loaded or is from another build.
const TorchModule& torch_module();

}  // namespace mapfuse::get::gnn
