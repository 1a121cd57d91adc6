#include "engine/mapping/looptree.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <set>

namespace mapfuse {

LoopTree unfused_looptree(const Workload& w, const std::vector<Mapping>& mappings) {
  LoopTree t;
  for (size_t i = 0; i < w.einsums.size(); ++i)
    t.groups.push_back({{static_cast<int>(i)}, {}, {}, {}, {mappings.at(i)}});
  return t;
}

std::optional<std::string> check_looptree(const LoopTree& t, const Workload& w, const Core& c) {
  const int E = static_cast<int>(w.einsums.size());
  const int L = static_cast<int>(c.levels.size());
  std::vector<int> group_of(E, -1);
  for (size_t g = 0; g < t.groups.size(); ++g) {
    const FusionGroup& fg = t.groups[g];
    if (fg.einsums.empty()) return fmt::format("fusion group {} is empty", g);
    if (fg.mappings.size() != fg.einsums.size())
      return fmt::format("fusion group {} has {} Einsums but {} mappings", g, fg.einsums.size(),
                         fg.mappings.size());
    for (int e : fg.einsums) {
      if (e < 0 || e >= E) return fmt::format("fusion group {} names Einsum index {}", g, e);
      if (group_of[e] >= 0)
        return fmt::format("Einsum '{}' is in fusion groups {} and {}", w.einsums[e].name, group_of[e], g);
      group_of[e] = static_cast<int>(g);
    }
  }
  for (int e = 0; e < E; ++e)
    if (group_of[e] < 0) return fmt::format("Einsum '{}' is in no fusion group", w.einsums[e].name);
  // Producers run in an earlier group or earlier in the same group.
  for (const TensorInfo& ti : w.tensors) {
    if (ti.producer < 0) continue;
    for (int consumer : ti.consumers) {
      const int gp = group_of[ti.producer], gc = group_of[consumer];
      if (gp > gc) return fmt::format("tensor '{}' is consumed by '{}' before '{}' produces it", ti.name,
                                      w.einsums[consumer].name, w.einsums[ti.producer].name);
      if (gp == gc) {
        const auto& order = t.groups[gp].einsums;
        if (std::find(order.begin(), order.end(), ti.producer) > std::find(order.begin(), order.end(), consumer))
          return fmt::format("in fusion group {}, '{}' runs before its producer '{}'", gp,
                             w.einsums[consumer].name, w.einsums[ti.producer].name);
      }
    }
  }
  for (size_t g = 0; g < t.groups.size(); ++g) {
    const FusionGroup& fg = t.groups[g];
    const int n = static_cast<int>(fg.einsums.size());
    // Exchanged tensors, and connectivity of the group through them (union-find over members).
    std::vector<int> parent(n);
    for (int i = 0; i < n; ++i) parent[i] = i;
    auto find = [&](int x) {
      while (parent[x] != x) x = parent[x] = parent[parent[x]];
      return x;
    };
    std::set<std::string> exchanged;
    for (const TensorInfo& ti : w.tensors) {
      if (ti.producer < 0) continue;
      auto pos = std::find(fg.einsums.begin(), fg.einsums.end(), ti.producer);
      if (pos == fg.einsums.end()) continue;
      for (int consumer : ti.consumers) {
        auto cpos = std::find(fg.einsums.begin(), fg.einsums.end(), consumer);
        if (cpos == fg.einsums.end()) continue;
        exchanged.insert(ti.name);
        parent[find(static_cast<int>(pos - fg.einsums.begin()))] = find(static_cast<int>(cpos - fg.einsums.begin()));
      }
    }
    for (int i = 1; i < n; ++i)
      if (find(i) != find(0))
        return fmt::format("fusion group {}: '{}' shares no tensor with the rest of the group", g,
                           w.einsums[fg.einsums[i]].name);
    int lowest_shared = 0;
    for (const SharedLoop& sl : fg.shared_loops) {
      if (static_cast<int>(sl.rank.size()) != n)
        return fmt::format("fusion group {}: a shared loop names {} ranks for {} Einsums", g, sl.rank.size(), n);
      if (sl.factor < 1) return fmt::format("fusion group {}: shared loop factor {} < 1", g, sl.factor);
      if (sl.level < 0 || sl.level >= L) return fmt::format("fusion group {}: shared loop level {} does not exist", g, sl.level);
      lowest_shared = std::max(lowest_shared, sl.level);
    }
    // Every loop covers a run of consecutive Einsums; runs are nested or disjoint, outer first.
    std::vector<std::pair<int, int>> runs;
    for (size_t k = 0; k < fg.shared_loops.size(); ++k) {
      const std::vector<int>& rank = fg.shared_loops[k].rank;
      int lo = -1, hi = -1;
      for (int i = 0; i < n; ++i)
        if (rank[i] >= 0) {
          if (hi >= 0 && hi != i - 1)
            return fmt::format("fusion group {}: shared loop {} covers Einsums that are not consecutive", g, k);
          if (lo < 0) lo = i;
          hi = i;
        }
      if (lo < 0) return fmt::format("fusion group {}: shared loop {} covers no Einsum", g, k);
      for (size_t j = 0; j < runs.size(); ++j) {
        const auto [a, b] = runs[j];
        const bool disjoint = hi < a || b < lo, inside = a <= lo && hi <= b;
        if (!disjoint && !inside)
          return fmt::format("fusion group {}: shared loop {} covers Einsums of loop {} without being inside it (runs "
                             "nest, and an outer loop comes first)", g, k, j);
      }
      runs.push_back({lo, hi});
    }
    std::set<std::string> backed;
    for (const TensorBacking& b : fg.backing) {
      if (!exchanged.count(b.tensor))
        return fmt::format("fusion group {}: tensor '{}' is backed but not exchanged inside the group", g, b.tensor);
      if (!backed.insert(b.tensor).second)
        return fmt::format("fusion group {}: tensor '{}' is backed twice", g, b.tensor);
      if (b.level < 0 || b.level >= L)
        return fmt::format("fusion group {}: tensor '{}' backed at level {} which does not exist", g, b.tensor, b.level);
      if (b.level < lowest_shared)
        return fmt::format("fusion group {}: tensor '{}' is backed at {} below shared loops at {}", g,
                           b.tensor, c.levels[b.level].name, c.levels[lowest_shared].name);
      for (int e : fg.einsums) {
        const Einsum& es = w.einsums[e];
        const int ti = es.tensor_index(b.tensor);
        if (ti >= 0 && !(core_for(c, es).levels[b.level].may_keep & role_bit(es.tensors[ti].role)))
          return fmt::format("fusion group {}: level {} may not hold '{}' ({} of '{}')", g,
                             c.levels[b.level].name, b.tensor, to_string(es.tensors[ti].role), es.name);
      }
    }
    for (const std::string& x : exchanged)
      if (!backed.count(x)) return fmt::format("fusion group {}: exchanged tensor '{}' has no backing level", g, x);
    std::set<std::string> resident;
    for (const TensorBacking& r : fg.resident) {
      const int wt = w.tensor_index(r.tensor);
      if (wt < 0) return fmt::format("fusion group {}: resident tensor '{}' does not exist", g, r.tensor);
      const TensorInfo& ti = w.tensors[wt];
      if (!resident.insert(r.tensor).second)
        return fmt::format("fusion group {}: tensor '{}' is resident twice", g, r.tensor);
      if (ti.consumers.size() != 1 ||
          std::find(fg.einsums.begin(), fg.einsums.end(), ti.consumers[0]) == fg.einsums.end())
        return fmt::format("fusion group {}: resident tensor '{}' must be read by exactly one Einsum, of this group", g,
                           r.tensor);
      if (ti.producer >= 0 && std::find(fg.einsums.begin(), fg.einsums.end(), ti.producer) != fg.einsums.end())
        return fmt::format("fusion group {}: resident tensor '{}' is produced inside the group (back it instead)", g,
                           r.tensor);
      if (r.level < 0 || r.level >= L - 1)
        return fmt::format("fusion group {}: resident tensor '{}' at level {}, not an on-chip level", g, r.tensor,
                           r.level);
      const Einsum& es = w.einsums[ti.consumers[0]];
      const int et = es.tensor_index(r.tensor);
      if (!(core_for(c, es).levels[r.level].may_keep & role_bit(es.tensors[et].role)))
        return fmt::format("fusion group {}: level {} may not hold resident '{}' ({} of '{}')", g,
                           c.levels[r.level].name, r.tensor, to_string(es.tensors[et].role), es.name);
    }
    for (int i = 0; i < n; ++i) {
      const Einsum& e = w.einsums[fg.einsums[i]];
      // The shared loops take their factors out of the Einsum's ranks; its own mapping covers
      // the rest, so check it against the reduced rank sizes.
      Einsum reduced = e;
      for (const SharedLoop& sl : fg.shared_loops) {
        const int r = sl.rank[i];
        if (r < 0) continue;
        if (r >= static_cast<int>(e.ranks.size()))
          return fmt::format("fusion group {}: shared loop names rank {} of '{}'", g, r, e.name);
        if (reduced.ranks[r].size % sl.factor != 0)
          return fmt::format("fusion group {}: shared loop factor {} does not divide rank {} ({}) of '{}'", g,
                             sl.factor, e.ranks[r].name, reduced.ranks[r].size, e.name);
        reduced.ranks[r].size /= sl.factor;
      }
      if (auto err = check_structure(fg.mappings[i], reduced, c))
        return fmt::format("fusion group {}, Einsum '{}': {}", g, e.name, err->message);
    }
  }
  return std::nullopt;
}

std::string to_text(const LoopTree& t, const Workload& w, const Core& c) {
  std::string out;
  for (size_t g = 0; g < t.groups.size(); ++g) {
    const FusionGroup& G = t.groups[g];
    std::string names;
    for (int e : G.einsums) names += (names.empty() ? "" : " -> ") + w.einsums[e].name;
    out += fmt::format("group {}: {}", g + 1, names);
    for (const SharedLoop& sl : G.shared_loops) {
      std::string ranks;
      for (size_t k = 0; k < sl.rank.size() && k < G.einsums.size(); ++k)
        if (sl.rank[k] >= 0)
          ranks += (ranks.empty() ? "" : ", ") + w.einsums[G.einsums[k]].name + " " +
                   w.einsums[G.einsums[k]].ranks[sl.rank[k]].name;
      out += fmt::format(" | shared x{} ({}) above {}", sl.factor, ranks, c.levels[sl.level].name);
    }
    if (!G.backing.empty()) {
      out += " | on chip:";
      for (const TensorBacking& b : G.backing) out += " " + b.tensor + "@" + c.levels[b.level].name;
    }
    if (!G.resident.empty()) {
      out += " | resident:";
      for (const TensorBacking& b : G.resident) out += " " + b.tensor + "@" + c.levels[b.level].name;
    }
    out += "\n";
    for (size_t k = 0; k < G.einsums.size() && k < G.mappings.size(); ++k)
      out += "  " + w.einsums[G.einsums[k]].name + ": " + to_text(G.mappings[k], w.einsums[G.einsums[k]], c) + "\n";
  }
  return out;
}

}  // namespace mapfuse
