#include "engine/arch/topology.hpp"

#include <algorithm>
#include <limits>
#include <set>

#include <fmt/format.h>

#include "engine/common/error.hpp"

namespace mapfuse {
namespace {

void add_link(Architecture& a, const TopologySpec& t, int from, int to, std::set<std::pair<int, int>>& seen) {
  if (from == to || !seen.insert({from, to}).second) return;
  Link l;
  l.name = fmt::format("{}:{}->{}", t.name, a.node_name(from), a.node_name(to));
  l.nodes = {from, to};
  l.bits_per_cycle = t.bits_per_cycle;
  l.pj_per_bit = t.pj_per_bit;
  l.pj_per_cycle = t.pj_per_cycle;
  a.links.push_back(std::move(l));
}

}  // namespace

void add_topology(Architecture& a, const TopologySpec& t, const std::string& where) {
  if (t.bits_per_cycle <= 0)
    throw InputError({}, where + ".link_bits_per_cycle", "must be positive (bits per cycle of each link)");
  const int n = static_cast<int>(t.nodes.size());
  if (n < 2) throw InputError({}, where, fmt::format("connects {} node(s); expected at least 2", n));
  std::set<std::pair<int, int>> seen;
  switch (t.kind) {
    case TopologyKind::Bus: {
      Link l;
      l.name = t.name;
      l.nodes = t.nodes;
      l.bus = true;
      l.bits_per_cycle = t.bits_per_cycle;
      l.pj_per_bit = t.pj_per_bit;
      l.pj_per_cycle = t.pj_per_cycle;
      a.links.push_back(std::move(l));
      return;
    }
    case TopologyKind::Pairs:
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j) add_link(a, t, t.nodes[i], t.nodes[j], seen);
      return;
    case TopologyKind::Mesh:
    case TopologyKind::Torus: {
      if (t.rows < 1 || t.cols < 1 || t.rows * t.cols != n)
        throw InputError({}, where + ".rows",
                         fmt::format("rows x cols = {} x {} does not match the {} nodes it connects", t.rows, t.cols, n));
      const bool wrap = t.kind == TopologyKind::Torus;
      auto at = [&](int r, int c) { return t.nodes[r * t.cols + c]; };
      for (int r = 0; r < t.rows; ++r)
        for (int c = 0; c < t.cols; ++c) {
          for (auto [dr, dc] : {std::pair{0, 1}, std::pair{1, 0}}) {
            int r2 = r + dr, c2 = c + dc;
            if (r2 >= t.rows || c2 >= t.cols) {
              if (!wrap) continue;
              r2 %= t.rows;
              c2 %= t.cols;
            }
            add_link(a, t, at(r, c), at(r2, c2), seen);
            add_link(a, t, at(r2, c2), at(r, c), seen);
          }
        }
      return;
    }
  }
}

void compute_routes(Architecture& a, const std::string& where) {
  const int n = a.node_count();
  // out[u]: (link, v) for every link leaving u
  std::vector<std::vector<std::pair<int, int>>> out(n);
  for (int l = 0; l < static_cast<int>(a.links.size()); ++l) {
    const Link& k = a.links[l];
    if (k.bus) {
      for (int u : k.nodes)
        for (int v : k.nodes)
          if (k.connects(u, v)) out[u].push_back({l, v});
    } else {
      out[k.nodes[0]].push_back({l, k.nodes[1]});
    }
  }
  a.routes.assign(static_cast<size_t>(n) * n, {});
  for (int s = 0; s < n; ++s) {
    // Breadth-first by hops; a node's label is set when first reached and improved only by
    // candidates of the same hop count (widest, then lexicographically smallest link sequence).
    std::vector<int> hops(n, -1);
    std::vector<double> width(n, 0);
    std::vector<std::vector<int>> best(n);
    hops[s] = 0;
    width[s] = std::numeric_limits<double>::infinity();
    std::vector<int> frontier{s};
    while (!frontier.empty()) {
      std::vector<int> next;
      for (int u : frontier) {
        // A memory's port carries only transfers that start or end at the memory: otherwise two
        // cores on one DRAM port would talk through the port in two hops. Over plain links a
        // memory relays like any node (Stream routes through its off-chip core).
        const bool relay_memory = u != s && u >= static_cast<int>(a.cores.size());
        if (relay_memory && a.links[best[u].back()].port) continue;
        for (auto [l, v] : out[u]) {
          if (relay_memory && a.links[l].port) continue;
          if (hops[v] != -1 && hops[v] != hops[u] + 1) continue;
          const double w = std::min(width[u], a.links[l].bits_per_cycle);
          std::vector<int> p = best[u];
          p.push_back(l);
          if (hops[v] == -1) {
            hops[v] = hops[u] + 1;
            next.push_back(v);
          } else if (w < width[v] || (w == width[v] && !(p < best[v]))) {
            continue;
          }
          width[v] = w;
          best[v] = std::move(p);
        }
      }
      // Labels of this layer are final only once every node of the previous layer was expanded,
      // which holds here; expand in node order for determinism.
      std::sort(next.begin(), next.end());
      frontier = std::move(next);
    }
    for (int t = 0; t < n; ++t) {
      if (t != s && hops[t] == -1)
        throw InputError({}, where + ".link",
                         fmt::format("no path connects '{}' to '{}'; expected links (or a bus or [topology]) "
                                     "joining every pair of cores and memories",
                                     a.node_name(s), a.node_name(t)));
      a.routes[static_cast<size_t>(s) * n + t] = std::move(best[t]);
    }
  }
}

void finalize_system(Architecture& a, const std::string& where) {
  std::set<std::string> names;
  for (int i = 0; i < a.node_count(); ++i)
    if (!names.insert(a.node_name(i)).second)
      throw InputError({}, where + ".core", "name '" + a.node_name(i) + "' is used twice; expected unique core and memory names");
  for (const Core& c : a.cores)
    if (c.runs == 0)
      throw InputError({}, where + ".core." + c.name + ".runs",
                       "the core can run nothing; expected at least one of mac, elementwise, pool, softmax, copy");
  if (a.offchip < 0) throw InputError({}, where + ".offchip", "missing: a multi-core architecture needs an off-chip memory");
  for (const Link& l : a.links) {
    for (int v : l.nodes)
      if (v < 0 || v >= a.node_count())
        throw InputError({}, where + ".link." + l.name, "names a node that does not exist");
    if (l.bits_per_cycle <= 0)
      throw InputError({}, where + ".link." + l.name, "bits_per_cycle must be positive");
  }
  std::stable_partition(a.links.begin(), a.links.end(), [](const Link& l) { return l.port; });
  std::stable_partition(std::find_if(a.links.begin(), a.links.end(), [](const Link& l) { return !l.port; }),
                        a.links.end(), [](const Link& l) { return !l.bus; });
  compute_routes(a, where);
}

}  // namespace mapfuse
