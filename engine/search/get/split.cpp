#include "engine/search/get/split.hpp"

#include <algorithm>
#include <limits>

namespace mapfuse::get {

std::vector<int32_t> candidate_cuts(const Dag& g, std::span<const int32_t> group, std::span<const int32_t> edges) {
  std::vector<int32_t> cuts;
  for (int32_t id : edges) {
    const Edge& e = g.edges[id];
    // Nodes t of the group with from <= t < to; the group is sorted.
    auto lo = std::lower_bound(group.begin(), group.end(), e.from);
    auto hi = std::lower_bound(group.begin(), group.end(), e.to);
    for (auto it = lo; it != hi; ++it)
      if (std::find(cuts.begin(), cuts.end(), *it) == cuts.end()) cuts.push_back(*it);
  }
  return cuts;
}

void random_split(Evaluator& ev, std::span<const int32_t> group, std::mt19937_64& rng, Workspace& ws,
                  std::vector<Group>& out) {
  std::vector<Group> work{Group(group.begin(), group.end())};
  std::vector<Group> parts;
  while (!work.empty()) {
    Group grp = std::move(work.back());
    work.pop_back();
    if (grp.size() == 1 || ev.valid(grp)) {
      out.push_back(std::move(grp));
      continue;
    }
    const auto t = grp[std::uniform_int_distribution<size_t>(0, grp.size() - 2)(rng)];
    parts.clear();
    split_at(ev.problem().dag, grp, t, ws, parts);
    for (auto& part : parts) work.push_back(std::move(part));
  }
}

size_t Splitter::GroupHash::operator()(const Group& g) const noexcept {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (int32_t v : g) h = (h ^ static_cast<uint32_t>(v)) * 0x100000001b3ULL;
  return static_cast<size_t>(h ^ (h >> 29));
}

Splitter::Splitter(Evaluator& ev, Explainer* explainer, SplitOptions opt, std::mt19937_64& rng)
    : ev_(ev), explainer_(explainer), opt_(opt), rng_(rng) {}

void Splitter::repair(std::span<const int32_t> group, std::vector<Group>& out) {
  if (ev_.valid(group)) {
    out.emplace_back(group.begin(), group.end());
    return;
  }
  ++stats_.calls;
  Group key(group.begin(), group.end());
  const bool fresh = seen_invalid_.insert(key).second;
  stats_.distinct += fresh;
  if (!explainer_) {
    random_split(ev_, group, rng_, ws_, out);
    return;
  }
  const Outcome& o = split(key, 0);
  if (!o.fallback) {
    ++stats_.calls_rectified;
    stats_.distinct_rectified += fresh;
  }
  out.insert(out.end(), o.parts.begin(), o.parts.end());
}

Splitter::Outcome Splitter::fallback_split(std::span<const int32_t> group) {
  ++stats_.fallbacks;
  Outcome o;
  o.fallback = true;
  random_split(ev_, group, rng_, ws_, o.parts);
  for (const Group& part : o.parts) o.dram += ev_.cost(part).dram;
  return o;
}

const Splitter::Outcome& Splitter::split(const Group& group, int depth) {
  if (auto it = memo_.find(group); it != memo_.end()) return it->second;
  Outcome best;
  if (depth > opt_.max_depth) {
    best = fallback_split(group);
    return memo_.emplace(group, std::move(best)).first->second;
  }
  Explanation ex = explainer_->explain(group, ev_, ws_);
  if (!ex.split.empty()) {
    double dram = 0;
    bool all_valid = true;
    for (const Group& part : ex.split) {
      const GroupCost c = ev_.cost(part);
      all_valid = all_valid && ev_.valid(c);
      dram += c.dram;
    }
    if (all_valid && ex.split.size() > 1) {
      best.parts = std::move(ex.split);
      best.dram = dram;
      return memo_.emplace(group, std::move(best)).first->second;
    }
  }
  const std::vector<int32_t> cuts = candidate_cuts(ev_.problem().dag, group, ex.edges);
  if (cuts.empty()) {
    best = fallback_split(group);
    return memo_.emplace(group, std::move(best)).first->second;
  }
  // Classify every candidate (Algorithm 1 lines 4-16), generalised to cuts with more than two
  // parts: category 1 all parts valid, 2 some valid, 3 none.
  struct Candidate {
    std::vector<Group> parts;
    std::vector<uint8_t> valid;
    double dram = 0, valid_dram = 0, max_buffer = 0;
    int64_t valid_nodes = 0;
    int category = 3;
  };
  std::vector<Candidate> cands;
  int best_category = 3;
  for (int32_t t : cuts) {
    Candidate c;
    split_at(ev_.problem().dag, group, t, ws_, c.parts);
    int nvalid = 0;
    for (const Group& part : c.parts) {
      const GroupCost gc = ev_.cost(part);
      const bool ok = ev_.valid(gc);
      c.valid.push_back(ok);
      c.dram += gc.dram;
      c.max_buffer = std::max(c.max_buffer, gc.buffer);
      if (ok) {
        ++nvalid;
        c.valid_nodes += static_cast<int64_t>(part.size());
        c.valid_dram += gc.dram;
      }
    }
    c.category = nvalid == static_cast<int>(c.parts.size()) ? 1 : nvalid > 0 ? 2 : 3;
    best_category = std::min(best_category, c.category);
    cands.push_back(std::move(c));
  }
  if (best_category == 1) {  // lines 17-18: the valid split of least DRAM; first on ties
    const Candidate* pick = nullptr;
    for (const Candidate& c : cands)
      if (c.category == 1 && (!pick || c.dram < pick->dram)) pick = &c;
    best.parts = pick->parts;
    best.dram = pick->dram;
  } else if (best_category == 2) {  // lines 19-21: most nodes in valid parts, recurse on the rest
    const Candidate* pick = nullptr;
    for (const Candidate& c : cands)
      if (c.category == 2 && (!pick || c.valid_nodes > pick->valid_nodes ||
                              (c.valid_nodes == pick->valid_nodes && c.valid_dram < pick->valid_dram)))
        pick = &c;
    for (size_t i = 0; i < pick->parts.size(); ++i) {
      if (pick->valid[i]) {
        best.parts.push_back(pick->parts[i]);
        best.dram += ev_.cost(pick->parts[i]).dram;
        continue;
      }
      const Outcome& sub = split(pick->parts[i], depth + 1);
      best.parts.insert(best.parts.end(), sub.parts.begin(), sub.parts.end());
      best.dram += sub.dram;
      best.fallback = best.fallback || sub.fallback;
    }
  } else {  // lines 22-29: recurse on every part of every candidate, keep the least DRAM
    std::stable_sort(cands.begin(), cands.end(),
                     [](const Candidate& a, const Candidate& b) { return a.max_buffer < b.max_buffer; });
    if (static_cast<int>(cands.size()) > opt_.max_category3) cands.resize(opt_.max_category3);
    bool have = false;
    for (const Candidate& c : cands) {
      Outcome o;
      for (const Group& part : c.parts) {
        const Outcome& sub = split(part, depth + 1);
        o.parts.insert(o.parts.end(), sub.parts.begin(), sub.parts.end());
        o.dram += sub.dram;
        o.fallback = o.fallback || sub.fallback;
      }
      // A split that needed no fallback beats one that did; then the least DRAM.
      if (!have || (best.fallback && !o.fallback) || (best.fallback == o.fallback && o.dram < best.dram)) {
        best = std::move(o);
        have = true;
      }
    }
  }
  return memo_.emplace(group, std::move(best)).first->second;
}

}  // namespace mapfuse::get
