#include "engine/search/get/partition.hpp"

#include <chrono>

#include "engine/common/error.hpp"
#include "engine/search/get/gnn/explainers.hpp"
#include "engine/search/get/gnn/gnn.hpp"
#include "engine/search/get/network.hpp"

namespace mapfuse::get {

PartitionMode partition_mode_from_string(std::string_view s) {
  for (size_t i = 0; i < std::size(kPartitionModes); ++i)
    if (s == kPartitionModes[i]) return static_cast<PartitionMode>(i);
  throw InputError({}, "--search",
                   "unknown search '" + std::string(s) + "'; expected rs, ls, nsga2, exact or sample" +
                       did_you_mean(s, {std::begin(kPartitionModes), std::end(kPartitionModes)}));
}

std::string_view to_string(PartitionMode m) { return kPartitionModes[static_cast<size_t>(m)]; }

void check_partition_spec(const PartitionSpec& s) {
  if (!(s.buffer_kb > 0)) throw InputError({}, "--buffer-kb", "the buffer size must be positive");
  if (s.budget < 1) throw InputError({}, "--budget", "the plan budget must be at least 1");
  if (s.population < 1) throw InputError({}, "--population", "the population must be at least 1");
  if (s.max_depth < 0) throw InputError({}, "--max-depth", "must be at least 0");
  if (s.max_category3 < 1) throw InputError({}, "--max-category3", "must be at least 1");
  if (!(s.occlusion_fraction > 0 && s.occlusion_fraction <= 1))
    throw InputError({}, "--occlusion-fraction", "must be in (0, 1]");
  if (s.model.bytes_per_element < 1) throw InputError({}, "--bytes-per-element", "must be at least 1");
  if (s.model.kb != 1024 && s.model.kb != 1000)
    throw InputError({}, "--kb-bytes", "bytes per KB is " + std::to_string(s.model.kb) +
                                           "; expected 1024 (binary, the default) or 1000 (decimal); MB = KB * KB");
}

PartitionOutcome partition_network(const OpGraph& g, const PartitionSpec& s) {
  check_partition_spec(s);
  const auto beta = static_cast<int64_t>(s.buffer_kb * static_cast<double>(s.model.kb));
  const auto t0 = std::chrono::steady_clock::now();
  const NetworkProblem np = make_network_problem(g, s.scheme, beta, s.model);
  const Problem& p = np.problem;
  PartitionOutcome out;
  out.nodes = g.size();
  out.fuseable = p.fuseable_count;
  switch (s.mode) {
    case PartitionMode::Sample:
      out.sample = sample_group_validity(p.dag, *np.model, p.beta, s.budget, s.seed);
      out.plans = out.sample.plans;
      break;
    case PartitionMode::Exact: {
      Evaluator ev(p);
      ExactOptions eo;
      eo.time_limit_s = s.time_limit_s;
      eo.max_states = s.max_states;
      eo.assume_monotone = s.assume_monotone;
      out.exact = exact_optimum(p, ev, eo);
      if (out.exact.plan.groups.empty())
        throw InputError({}, "--time-limit", "the exact search stopped before any valid plan was known");
      out.best = std::move(out.exact.plan);
      break;
    }
    default: {
      SearchOptions so;
      so.budget = s.budget;
      so.seed = s.seed;
      so.population = s.population;
      so.split.max_depth = s.max_depth;
      so.split.max_category3 = s.max_category3;
      const SearchKind kind = s.mode == PartitionMode::Rs   ? SearchKind::Random
                              : s.mode == PartitionMode::Ls ? SearchKind::Local
                                                            : SearchKind::Nsga2;
      std::unique_ptr<gnn::FeatureTable> features;
      std::unique_ptr<Explainer> explainer;
      if (uses_gnn(s.split)) {
        auto model = std::make_shared<const gnn::Classifier>(
            s.gnn_model.empty() ? gnn::Classifier::shipped(s.scheme) : gnn::Classifier::load(s.gnn_model, s.scheme));
        features = std::make_unique<gnn::FeatureTable>(g, s.scheme, s.model);
        if (s.split == SplitKind::Gnne) {
          gnn::GnnExplainerOptions eo;
          eo.seed = s.seed;
          explainer = gnn::make_gnn_explainer(std::move(model), *features, eo);
        } else {
          const gnn::ModelKind kind = s.split == SplitKind::Pg ? gnn::ModelKind::Pg : gnn::ModelKind::Rg;
          const std::string& path = kind == gnn::ModelKind::Pg ? s.pg_model : s.rg_model;
          auto em = std::make_shared<const gnn::ExplainerModel>(path.empty() ? gnn::ExplainerModel::shipped(kind, *model)
                                                                             : gnn::ExplainerModel::load(path, kind, *model));
          explainer = kind == gnn::ModelKind::Pg
                          ? gnn::make_pg_explainer(std::move(model), std::move(em), *features, s.occlusion_fraction)
                          : gnn::make_rg_explainer(std::move(model), std::move(em), *features);
        }
      } else {
        explainer = make_explainer(s.split, s.occlusion_fraction);
      }
      SearchResult r = run_search(p, kind, explainer.get(), so);
      out.best = std::move(r.best);
      out.plans = r.plans;
      out.rectify = r.rectify;
      out.rectify_defined = r.rectify_defined;
      out.model_calls = r.model_calls;
      out.trace = std::move(r.trace);
    }
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

std::string groups_text(const OpGraph& g, const std::vector<Group>& groups) {
  std::string out;
  for (const Group& grp : groups) {
    out += '{';
    for (size_t i = 0; i < grp.size(); ++i) out += (i ? "," : "") + g.nodes[grp[i]].name;
    out += "}\n";
  }
  return out;
}

}  // namespace mapfuse::get
