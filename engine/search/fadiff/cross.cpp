#include "engine/search/fadiff/cross.hpp"

#include "engine/common/error.hpp"

namespace mapfuse {

int op_node_of_einsum(const OpGraph& g, const std::string& einsum_name) {
  if (const int v = g.node_index(einsum_name); v >= 0) return v;
  // The importer names an unnamed node "op_type:first_output"; the graph names it "first_output".
  if (const auto colon = einsum_name.find(':'); colon != std::string::npos)
    if (const int v = g.node_index(std::string_view(einsum_name).substr(colon + 1)); v >= 0) return v;
  throw InputError({}, "--workload",
                   "Einsum '" + einsum_name + "' matches no operator of the graph '" + g.name +
                       "'; expected the workload and the operator graph to come from the same ONNX file");
}

std::vector<uint8_t> fused_edges_of_groups(const RelaxedNetwork& net, const OpGraph& g,
                                           std::span<const std::vector<int32_t>> groups) {
  std::vector<int> group_of(g.size(), -1);
  for (size_t k = 0; k < groups.size(); ++k)
    for (int32_t v : groups[k]) {
      if (v < 0 || v >= g.size())
        throw InputError({}, "groups", "node id " + std::to_string(v) + " outside the graph of " +
                                           std::to_string(g.size()) + " operators");
      group_of[v] = static_cast<int>(k);
    }
  std::vector<int> node(net.layers.size());
  for (size_t v = 0; v < net.layers.size(); ++v) node[v] = op_node_of_einsum(g, net.layers[v].name);
  std::vector<uint8_t> fused(net.edges.size(), 0);
  for (size_t e = 0; e < net.edges.size(); ++e) {
    const int a = group_of[node[net.edges[e].producer]], b = group_of[node[net.edges[e].consumer]];
    fused[e] = a >= 0 && a == b;
  }
  return fused;
}

FusionPrice price_fusion(const SearchSpace& s, std::span<const double> x, std::span<const uint8_t> fused,
                         bool try_orders) {
  if (static_cast<int>(x.size()) < s.net().n_vars || static_cast<int>(fused.size()) != s.n_edges())
    throw InputError({}, "price_fusion", "point of " + std::to_string(x.size()) + " factors and " +
                                             std::to_string(fused.size()) + " edges; expected " +
                                             std::to_string(s.net().n_vars) + " and " + std::to_string(s.n_edges()));
  ExactNetworkEvaluator ev(s, try_orders);
  std::vector<double> point(x.begin(), x.end());
  const ExactNetworkEvaluator::Result& r = ev.evaluate(point, fused);
  FusionPrice p;
  p.energy_pj = r.energy_pj;
  p.cycles = r.cycles;
  p.edp = r.edp();
  for (int v = 0; v < s.n_layers(); ++v) p.dram_words += s.net().layers[v].count * r.layer_dram_words[v];
  for (uint8_t f : r.fused) p.fused_edges += f;
  p.group_splits = r.group_splits;
  p.capacity_repairs = r.capacity_repairs;
  p.fused = r.fused;
  p.groups = ev.groups(r.fused);
  return p;
}

}  // namespace mapfuse
