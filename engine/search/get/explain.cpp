#include "engine/search/get/explain.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace mapfuse::get {

namespace {

// Edge ids with both ends in the (sorted) group.
std::vector<int32_t> inner_edges(const Dag& g, std::span<const int32_t> group) {
  std::vector<int32_t> ids;
  for (int32_t v : group)
    for (int32_t e : g.out(v))
      if (std::binary_search(group.begin(), group.end(), g.edges[e].to)) ids.push_back(e);
  return ids;
}

}  // namespace

std::vector<int32_t> cut_edges(const Dag& g, std::span<const int32_t> group, int32_t t, Workspace&) {
  std::vector<int32_t> ids;
  for (int32_t v : group) {
    if (v > t) break;
    for (int32_t e : g.out(v))
      if (g.edges[e].to > t && std::binary_search(group.begin(), group.end(), g.edges[e].to)) ids.push_back(e);
  }
  return ids;
}

namespace {

class ExactCutExplainer final : public Explainer {
 public:
  std::string_view name() const override { return "cut"; }
  Explanation explain(std::span<const int32_t> group, Evaluator& ev, Workspace& ws) override {
    // Score (category, key): category 1 by Σ F_D, 2 by −(nodes in valid parts), 3 by max F_β.
    int best_cat = 4;
    double best_key = 0;
    int32_t best_t = -1;
    std::vector<Group> parts;
    for (size_t k = 0; k + 1 < group.size(); ++k) {
      parts.clear();
      split_at(ev.problem().dag, group, group[k], ws, parts);
      double dram = 0, max_buf = 0;
      int64_t valid_nodes = 0;
      size_t nvalid = 0;
      for (const Group& part : parts) {
        const GroupCost c = ev.cost(part);
        dram += c.dram;
        max_buf = std::max(max_buf, c.buffer);
        if (ev.valid(c)) ++nvalid, valid_nodes += static_cast<int64_t>(part.size());
      }
      const int cat = nvalid == parts.size() ? 1 : nvalid > 0 ? 2 : 3;
      const double key = cat == 1 ? dram : cat == 2 ? -static_cast<double>(valid_nodes) : max_buf;
      if (cat < best_cat || (cat == best_cat && key < best_key)) {
        best_cat = cat;
        best_key = key;
        best_t = group[k];
      }
    }
    Explanation ex;
    if (best_t >= 0) ex.edges = cut_edges(ev.problem().dag, group, best_t, ws);
    return ex;
  }
};

class OcclusionExplainer final : public Explainer {
 public:
  explicit OcclusionExplainer(double fraction) : fraction_(fraction) {}
  std::string_view name() const override { return "occlusion"; }
  Explanation explain(std::span<const int32_t> group, Evaluator& ev, Workspace& ws) override {
    const Dag& g = ev.problem().dag;
    const double whole = ev.cost(group).buffer;
    std::vector<int32_t> ids = inner_edges(g, group);
    // a(i, j) depends only on t = i: one cut per source node.
    std::vector<double> drop_at(group.size(), std::numeric_limits<double>::quiet_NaN());
    std::vector<std::pair<double, int32_t>> scored;
    std::vector<Group> parts;
    for (int32_t id : ids) {
      const int32_t i = g.edges[id].from;
      const size_t k = static_cast<size_t>(std::lower_bound(group.begin(), group.end(), i) - group.begin());
      if (std::isnan(drop_at[k])) {
        parts.clear();
        split_at(g, group, i, ws, parts);
        double max_buf = 0;
        for (const Group& part : parts) max_buf = std::max(max_buf, ev.cost(part).buffer);
        drop_at[k] = whole - max_buf;
      }
      scored.emplace_back(drop_at[k], id);
    }
    std::stable_sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    const size_t keep = std::min(scored.size(), std::max<size_t>(1, static_cast<size_t>(std::ceil(fraction_ * scored.size()))));
    Explanation ex;
    for (size_t r = 0; r < keep; ++r) ex.edges.push_back(scored[r].second);
    return ex;
  }

 private:
  double fraction_;
};

class IntervalDpExplainer final : public Explainer {
 public:
  std::string_view name() const override { return "dp"; }
  Explanation explain(std::span<const int32_t> group, Evaluator& ev, Workspace& ws) override {
    Explanation ex;
    IntervalResult r = interval_dp(ev, group, ws);
    if (!r.found) return ex;
    // The cut positions are the last node of every interval but the final one.
    std::vector<int32_t> ends;
    for (const Group& part : r.groups) ends.push_back(part.back());
    std::sort(ends.begin(), ends.end());
    for (int32_t t : ends)
      if (t != group.back())
        for (int32_t id : cut_edges(ev.problem().dag, group, t, ws))
          if (std::find(ex.edges.begin(), ex.edges.end(), id) == ex.edges.end()) ex.edges.push_back(id);
    ex.split = std::move(r.groups);
    return ex;
  }
};

}  // namespace

std::unique_ptr<Explainer> make_exact_cut_explainer() { return std::make_unique<ExactCutExplainer>(); }
std::unique_ptr<Explainer> make_occlusion_explainer(double fraction) {
  return std::make_unique<OcclusionExplainer>(fraction);
}
std::unique_ptr<Explainer> make_interval_dp_explainer() { return std::make_unique<IntervalDpExplainer>(); }

IntervalResult interval_dp(Evaluator& ev, std::span<const int32_t> nodes, Workspace& ws, bool assume_monotone) {
  const Problem& p = ev.problem();
  const size_t k = nodes.size();
  constexpr double inf = std::numeric_limits<double>::infinity();
  std::vector<double> best(k + 1, inf);
  std::vector<size_t> from(k + 1, 0);
  best[0] = 0;
  std::vector<Group> comps;
  for (size_t j = 1; j <= k; ++j) {
    for (size_t i = j; i-- > 0;) {
      comps.clear();
      components(p.dag, nodes.subspan(i, j - i), ws, comps);
      double dram = 0;
      bool ok = true, hopeless = false;
      for (const Group& c : comps) {
        const GroupCost gc = ev.cost(c);
        dram += gc.dram;
        ok = ok && ev.valid(gc);
        // Extending the interval to the left only grows the component holding this one.
        if (p.model->monotone_buffer_bound(c) >= p.beta || (assume_monotone && gc.buffer >= p.beta)) hopeless = true;
      }
      if (ok && best[i] + dram < best[j]) {
        best[j] = best[i] + dram;
        from[j] = i;
      }
      if (hopeless) break;
    }
  }
  IntervalResult r;
  if (best[k] == inf) return r;
  r.found = true;
  r.dram = best[k];
  for (size_t j = k; j > 0; j = from[j]) {
    comps.clear();
    components(p.dag, nodes.subspan(from[j], j - from[j]), ws, comps);
    r.groups.insert(r.groups.end(), comps.begin(), comps.end());
  }
  std::sort(r.groups.begin(), r.groups.end(), [](const Group& a, const Group& b) { return a[0] < b[0]; });
  return r;
}

}  // namespace mapfuse::get
