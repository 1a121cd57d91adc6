// RG-Explainer's per-action rewards (explainers.hpp): plain bookkeeping over the callbacks that
// sample and score, kept out of the libtorch module so that it runs (and is tested) without it.
#include <stdexcept>

#include "engine/search/get/gnn/explainers.hpp"

namespace mapfuse::get::gnn {

std::vector<double> rg_step_rewards(std::span<const int32_t> set, bool stopped, int n_rollouts,
                                    const std::function<RgSets(const RgSets& prefixes)>& complete,
                                    const std::function<std::vector<double>(const RgSets& sets)>& reward) {
  if (set.empty()) throw std::logic_error("rg_step_rewards: an episode starts from its seed");
  const size_t adds = set.size() - 1, actions = adds + (stopped ? 1 : 0);
  if (actions == 0) return {};
  const std::vector<double> final_reward = reward({std::vector<int32_t>(set.begin(), set.end())});
  std::vector<double> out(actions, final_reward.at(0));
  if (n_rollouts <= 0) return out;
  RgSets prefixes;
  std::vector<size_t> which;
  // Add action t led to set[0..t+1]; the last action's state is terminal (it ended the episode).
  for (size_t t = 0; t + 1 < actions && t < adds; ++t) {
    for (int r = 0; r < n_rollouts; ++r) prefixes.emplace_back(set.begin(), set.begin() + static_cast<ptrdiff_t>(t + 2));
    which.push_back(t);
  }
  if (which.empty()) return out;
  const RgSets finished = complete(prefixes);
  if (finished.size() != prefixes.size()) throw std::logic_error("rg_step_rewards: one finished set per prefix");
  const std::vector<double> r = reward(finished);
  for (size_t k = 0; k < which.size(); ++k) {
    double sum = 0;
    for (int i = 0; i < n_rollouts; ++i) sum += r.at(k * static_cast<size_t>(n_rollouts) + static_cast<size_t>(i));
    out[which[k]] = sum / n_rollouts;
  }
  return out;
}

}  // namespace mapfuse::get::gnn
