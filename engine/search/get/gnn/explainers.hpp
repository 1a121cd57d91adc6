#pragma once
// GET-fusion's two pre-trained explainers (docs/get.md, "PGExplainer and RG-Explainer"; note
// §5.3–5.4) behind a torch-free interface: only explainers_torch.cpp includes libtorch (built into
// the module of torch_module.hpp). Both are
// trained once against a frozen classifier on invalid groups of the training networks, ship as
// model files (presets/get/{pg,rg}_<scheme>.gnn) and explain a group without further training.
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/search/get/gnn/gnn.hpp"
#include "engine/search/get/gnn/model_file.hpp"

namespace mapfuse::get::gnn {

// A group of one network at one buffer size: what an explainer is trained on.
struct GroupAtBuffer {
  const FeatureTable* features = nullptr;
  Group nodes;  // sorted
  double beta_bytes = 0;
};

// PGExplainer ([PYG] pg_explainer.py defaults, note §5.3): an MLP [z_i ‖ z_j] → 64 → ReLU → 1 over
// the classifier's final node embeddings gives each edge a logit ω. Training samples a concrete
// mask σ((log u − log(1−u) + ω)/τ), u ~ U(0,1), τ from 5 down to 2, with loss CE(invalid) +
// 0.05·Σσ + 1.0·mean entropy(0.99σ + 0.005), Adam lr 0.003, 25 epochs.
struct PgTrainOptions {
  int epochs = 25;
  int batch = 64;  // groups per step
  double lr = 0.003, edge_size = 0.05, edge_entropy = 1.0;
  double temperature_start = 5.0, temperature_end = 2.0;
  uint64_t seed = 1;
};

// RG-Explainer ([RG] defaults, note §5.4): a seed locator (MLP on [graph ‖ node embedding] → 64 →
// 8 → 1, softmax over nodes, fitted by KL towards softmax of the rewards of explanations grown from
// each node) and a generator that grows a connected node set from the seed, one boundary node at a
// time or STOP (personalised-PageRank-smoothed seed / in-set indicators plus a linear embedding of
// the node features, two Swish blocks of 64, node scores and an attention-pooled stop head),
// trained by REINFORCE on R(S) = −[CE(f(G[S]), invalid) + 0.01·|E(S)| + 0.1·depth(S) +
// 0.01·‖mean emb(G[S]) − mean emb(G)‖]. As [RG]: the locator is first fitted to the rewards of the
// 3-hop neighbourhoods of each node; the generator is pre-trained by supervision on the 3-hop
// neighbourhood of each group's locator seed ("list" epochs: teacher-forced on the best-rewarded of
// `pretrain_samples` random connected expansion orders of it, then STOP; "set" epochs: at each step
// the most likely boundary node still in the target set, STOP when none is left); and each
// intermediate action of an RL episode is rewarded by the mean reward of `n_rollouts` completions
// sampled from the state it led to (rg_step_rewards).
struct RgTrainOptions {
  int epochs = 10;
  int batch = 32;  // episodes per policy step
  double lr = 0.01;
  int locator_iterations = 200;  // per fit; refitted every `locator_every` epochs
  int locator_every = 5;
  int locator_groups = 64;  // groups whose per-node rewards the locator is fitted to
  double locator_lr = 0.01;
  int max_size = 20;
  double size_reg = 0.01, radius_penalty = 0.1, sim_reg = 0.01;
  int n_rollouts = 5;             // Monte-Carlo rollouts per intermediate action (0: the final reward for all)
  int pretrain_hops = 3;          // the generator's supervised targets: k-hop neighbourhoods of the seed
  int pretrain_min_nodes = 5;     // smaller neighbourhoods are not targets ([RG])
  int pretrain_list_epochs = 10;  // teacher forcing on an expansion order
  int pretrain_set_epochs = 25;   // teacher forcing on the set, in the model's preferred order
  int pretrain_batch = 32;        // targets per step ([RG] pretrain_g_batch_size)
  int pretrain_samples = 10;      // expansion orders drawn per target; the best-rewarded is taught
  uint64_t seed = 1;
};

// The per-action rewards of one RG episode ([RG] Generator.train_from_rewards). `set` is the grown
// set in insertion order (set[0] the seed); the episode took set.size() − 1 "add" actions and, when
// `stopped`, a final STOP. Action t led to the state set[0..t+1] (the STOP action: the final set).
// Its reward is R of the final set when that state is terminal (the episode's last action), else
// the mean R of `n_rollouts` completions of that state: `complete` gets each non-terminal prefix
// n_rollouts times in a row and returns one finished set per entry (sampled from the current
// policy), `reward` gives R of each set. With n_rollouts = 0 every action gets the final reward.
using RgSets = std::vector<std::vector<int32_t>>;
std::vector<double> rg_step_rewards(std::span<const int32_t> set, bool stopped, int n_rollouts,
                                    const std::function<RgSets(const RgSets& prefixes)>& complete,
                                    const std::function<std::vector<double>(const RgSets& sets)>& reward);

struct ExplainerTrainReport {
  std::vector<double> epoch_loss;  // PG: mean loss; RG: mean episode reward
  std::vector<double> pretrain_loss;  // RG: mean −log π per supervised action, "list" epochs then "set" epochs
  int64_t pretrain_targets = 0;       // RG: groups with a supervised target
  int64_t groups = 0;
  double seconds = 0;
};

// A trained PGExplainer or RG-Explainer, tied to the classifier it was trained against.
class ExplainerModel {
 public:
  ExplainerModel();
  ~ExplainerModel() = default;
  ExplainerModel(ExplainerModel&&) noexcept = default;
  ExplainerModel& operator=(ExplainerModel&&) noexcept = default;

  // Reads a model file. InputError naming the file when it is missing or corrupt, of another kind
  // (a classifier, the other explainer), for another scheme than `classifier`'s, of another
  // feature layout, or trained against another classifier than `classifier`.
  static ExplainerModel load(const std::string& path, ModelKind kind, const Classifier& classifier);
  // The model built into the binary (presets/get/<pg|rg>_<scheme>.gnn).
  static ExplainerModel shipped(ModelKind kind, const Classifier& classifier);
  static ExplainerModel parse(std::string_view bytes, const std::string& source, ModelKind kind,
                              const Classifier& classifier);
  void save(const std::string& path) const;

  ModelKind kind() const;
  FusionScheme scheme() const;
  std::vector<float> parameters() const;

  struct Impl;
  Impl& impl() const { return *impl_; }

 private:
  std::unique_ptr<Impl, void (*)(Impl*)> impl_;  // deleted by the libtorch module (gnn.hpp)
};

// Both deterministic for a seed (one torch thread). Groups with no internal edge are skipped.
ExplainerModel train_pg_explainer(std::shared_ptr<const Classifier> classifier, std::span<const GroupAtBuffer> invalid,
                                  const PgTrainOptions& opt, ExplainerTrainReport* report = nullptr);
ExplainerModel train_rg_explainer(std::shared_ptr<const Classifier> classifier, std::span<const GroupAtBuffer> invalid,
                                  const RgTrainOptions& opt, ExplainerTrainReport* report = nullptr);

// The explainers for a network (`features` outlives them). PG: σ(ω) from one forward pass, then
// the shared mask rule (σ > 0.5, else the top max(1, ⌈fraction·E⌉)). RG: the locator's argmax seed
// grown greedily; the edges inside the grown set, earliest-added first.
std::unique_ptr<Explainer> make_pg_explainer(std::shared_ptr<const Classifier> classifier,
                                             std::shared_ptr<const ExplainerModel> model, const FeatureTable& features,
                                             double fraction = 0.2);
std::unique_ptr<Explainer> make_rg_explainer(std::shared_ptr<const Classifier> classifier,
                                             std::shared_ptr<const ExplainerModel> model, const FeatureTable& features,
                                             int max_size = 20);

}  // namespace mapfuse::get::gnn
