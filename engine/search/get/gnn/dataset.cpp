#include "engine/search/get/gnn/dataset.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <random>
#include <set>

#include "engine/common/error.hpp"

namespace mapfuse::get::gnn {

std::vector<std::string> training_networks(FusionScheme scheme) {
  std::vector<std::string> nets = {"vgg16", "squeezenet1_0", "mobilenet_v2", "resnet18"};
  if (scheme == FusionScheme::Lbdf) nets.insert(nets.end(), {"efficientnet_b0", "efficientnet_b3"});
  return nets;
}

namespace {

int64_t groups_per_network(const DatasetSpec& spec) {
  if (spec.groups_per_network < 0) throw InputError({}, "--groups", "must be at least 1 (0: the scheme's default)");
  if (spec.max_group_nodes < 2) throw InputError({}, "--max-group-nodes", "must be at least 2");
  if (spec.buffers_kb.empty()) throw InputError({}, "--buffers-kb", "needs at least one buffer size");
  return spec.groups_per_network ? spec.groups_per_network : spec.scheme == FusionScheme::Lbdf ? 400 : 700;
}

}  // namespace

std::vector<DrawnGroups> draw_groups(const std::vector<const OpGraph*>& graphs, const DatasetSpec& spec) {
  const int64_t per_network = groups_per_network(spec);
  std::mt19937_64 rng(spec.seed);
  std::vector<DrawnGroups> out;
  for (const OpGraph* gp : graphs) {
    const OpGraph& g = *gp;
    // Union-find over the uncut edges: one random plan's groups.
    std::vector<int> parent(g.size());
    auto find = [&](int v) {
      while (parent[v] != v) v = parent[v] = parent[parent[v]];
      return v;
    };
    std::set<Group> seen;
    DrawnGroups d;
    std::vector<Group> members(g.size());
    for (int64_t plan = 0; plan < spec.max_plans && static_cast<int64_t>(d.groups.size()) < per_network; ++plan) {
      std::bernoulli_distribution cut(std::uniform_real_distribution<double>(0, 1)(rng));
      for (int v = 0; v < g.size(); ++v) parent[v] = v;
      for (const OpEdge& e : g.edges)
        if (!cut(rng)) parent[find(e.from)] = find(e.to);
      for (auto& m : members) m.clear();
      for (int v = 0; v < g.size(); ++v) members[find(v)].push_back(v);
      for (const Group& m : members) {
        if (m.size() < 2 || static_cast<int32_t>(m.size()) > spec.max_group_nodes) continue;
        if (static_cast<int64_t>(d.groups.size()) >= per_network) break;
        if (seen.insert(m).second) d.groups.push_back(m);
      }
    }
    // 80/10/10 by group, so no group is in two splits at different β.
    for (size_t i = 0; i < d.groups.size(); ++i) {
      const double u = std::uniform_real_distribution<double>(0, 1)(rng);
      d.splits.push_back(u < 0.8 ? 0 : u < 0.9 ? 1 : 2);
    }
    out.push_back(std::move(d));
  }
  return out;
}

std::vector<LabelledGroup> label_groups(const OpGraph& g, int32_t network, const DrawnGroups& drawn, size_t first,
                                        size_t last, const DatasetSpec& spec) {
  GroupWorkspace ws(g);
  std::vector<LabelledGroup> out;
  last = std::min(last, drawn.groups.size());
  for (size_t i = first; i < last; ++i)
    for (double kb : spec.buffers_kb) {
      const auto beta = static_cast<int64_t>(kb * static_cast<double>(spec.model.kb));
      const mapfuse::GroupCost c = group_cost(g, drawn.groups[i], spec.scheme, beta, spec.model, ws);
      LabelledGroup s;
      s.network = network;
      s.nodes = drawn.groups[i];
      s.buffer_kb = kb;
      s.buffer_need = static_cast<double>(c.buffer_bytes);
      s.supported = c.supported;
      s.valid = c.valid(beta);
      s.split = drawn.splits[i];
      out.push_back(std::move(s));
    }
  return out;
}

Dataset make_dataset(const std::vector<const OpGraph*>& graphs, const DatasetSpec& spec) {
  const std::vector<DrawnGroups> drawn = draw_groups(graphs, spec);
  Dataset d;
  d.scheme = spec.scheme;
  for (size_t net = 0; net < graphs.size(); ++net) {
    d.networks.push_back(graphs[net]->name);
    std::vector<LabelledGroup> s = label_groups(*graphs[net], static_cast<int32_t>(net), drawn[net], 0,
                                                drawn[net].groups.size(), spec);
    d.samples.insert(d.samples.end(), std::make_move_iterator(s.begin()), std::make_move_iterator(s.end()));
  }
  return d;
}

void write_dataset_csv(const Dataset& d, const std::vector<const OpGraph*>& graphs, const std::string& path) {
  std::ofstream out(path);
  if (!out) throw InputError({path, 0, 0}, "--out", "cannot write the dataset file");
  out << "network,split,buffer_kb,nodes,buffer_need_bytes,supported,valid,group\n";
  static const char* kSplit[] = {"train", "validation", "test"};
  for (const LabelledGroup& s : d.samples) {
    const OpGraph& g = *graphs[s.network];
    std::string names;
    for (size_t i = 0; i < s.nodes.size(); ++i) names += (i ? ";" : "") + g.nodes[s.nodes[i]].name;
    out << fmt::format("{},{},{},{},{:.0f},{},{},\"{}\"\n", d.networks[s.network], kSplit[s.split], s.buffer_kb,
                       s.nodes.size(), s.buffer_need, s.supported ? 1 : 0, s.valid ? 1 : 0, names);
  }
  if (!out) throw InputError({path, 0, 0}, "--out", "writing the dataset file failed");
}

}  // namespace mapfuse::get::gnn
