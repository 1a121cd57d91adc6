#include "engine/search/get/network.hpp"

#include <fmt/format.h>

#include <limits>

#include "engine/common/error.hpp"

namespace mapfuse::get {

OpGraphModel::OpGraphModel(const OpGraph& g, FusionScheme scheme, int64_t beta_bytes, const GroupModelOptions& opt)
    : g_(&g), scheme_(scheme), beta_bytes_(beta_bytes), opt_(opt), ws_(g) {}

GroupCost OpGraphModel::evaluate(std::span<const int32_t> nodes) const {
  const mapfuse::GroupCost c = group_cost(*g_, nodes, scheme_, beta_bytes_, opt_, ws_);
  return {static_cast<double>(c.buffer_bytes), static_cast<double>(c.dram_bytes), c.supported};
}

double OpGraphModel::monotone_buffer_bound(std::span<const int32_t> nodes) const {
  if (scheme_ != FusionScheme::Lbdf) return 0;
  int64_t w = 0;
  for (int32_t v : nodes) {
    const OpNode& n = g_->nodes[v];
    w += n.weight_elems - (opt_.count_bias ? 0 : n.bias_elems);
  }
  return static_cast<double>(w * opt_.bytes_per_element);
}

NetworkProblem make_network_problem(const OpGraph& g, FusionScheme scheme, int64_t beta_bytes,
                                    const GroupModelOptions& opt) {
  if (beta_bytes <= 0) throw InputError({}, "--buffer-kb", "the buffer size must be positive");
  NetworkProblem np;
  np.graph = &g;
  np.model = std::make_unique<OpGraphModel>(g, scheme, beta_bytes, opt);
  std::vector<Edge> edges;
  edges.reserve(g.edges.size());
  for (const OpEdge& e : g.edges) edges.push_back({e.from, e.to});
  Dag dag = make_dag(g.size(), std::move(edges));
  double smallest = std::numeric_limits<double>::infinity();
  for (int32_t v = 0; v < g.size(); ++v) {
    const int32_t one[1] = {v};
    const GroupCost c = np.model->evaluate(one);
    if (c.supported) smallest = std::min(smallest, c.buffer);
  }
  if (!(smallest < static_cast<double>(beta_bytes)))
    throw InputError({}, "--buffer-kb",
                     fmt::format("no operator of '{}' fits a {} KB buffer on its own under {} (the smallest needs "
                                 "{:.3f} KB); every operator would be unfuseable",
                                 g.name, static_cast<double>(beta_bytes) / opt.kb, to_string(scheme),
                                 smallest / opt.kb));
  np.problem = make_problem(std::move(dag), *np.model, static_cast<double>(beta_bytes));
  return np;
}

}  // namespace mapfuse::get
