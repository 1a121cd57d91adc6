#include "engine/search/get/sample.hpp"

#include <random>

namespace mapfuse::get {

GroupSample sample_group_validity(const Dag& g, const GroupModel& model, double beta, int64_t plans, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> parent(g.n);
  GroupSample s;
  // Union-find over the uncut edges gives the groups of one plan.
  auto find = [&](int32_t v) {
    while (parent[v] != v) v = parent[v] = parent[parent[v]];
    return v;
  };
  std::vector<std::vector<int32_t>> members(g.n);
  for (int64_t k = 0; k < plans; ++k) {
    const double q = std::uniform_real_distribution<double>(0, 1)(rng);
    std::bernoulli_distribution cut(q);
    for (int32_t v = 0; v < g.n; ++v) parent[v] = v;
    for (const Edge& e : g.edges)
      if (!cut(rng)) parent[find(e.from)] = find(e.to);
    for (auto& m : members) m.clear();
    for (int32_t v = 0; v < g.n; ++v) members[find(v)].push_back(v);  // ascending: v increases
    ++s.plans;
    for (const auto& m : members) {
      if (m.size() < 2) continue;
      const GroupCost c = model.evaluate(m);
      ++s.groups;
      s.valid += c.supported && c.buffer < beta;
    }
  }
  return s;
}

}  // namespace mapfuse::get
