#include "engine/search/get/plan.hpp"

#include <algorithm>
#include <numeric>

#include "engine/common/error.hpp"

namespace mapfuse::get {

Dag make_dag(int32_t n, std::vector<Edge> edges) {
  if (n < 0) throw InputError("a graph needs a non-negative node count");
  for (const Edge& e : edges)
    if (e.from < 0 || e.to >= n || e.from >= e.to)
      throw InputError("edge " + std::to_string(e.from) + "->" + std::to_string(e.to) +
                       ": node ids must be topological labels in [0, " + std::to_string(n) + ") with from < to");
  std::sort(edges.begin(), edges.end(),
            [](const Edge& a, const Edge& b) { return a.from != b.from ? a.from < b.from : a.to < b.to; });
  edges.erase(std::unique(edges.begin(), edges.end(),
                          [](const Edge& a, const Edge& b) { return a.from == b.from && a.to == b.to; }),
              edges.end());
  Dag g;
  g.n = n;
  g.edges = std::move(edges);
  const auto m = static_cast<int32_t>(g.edges.size());
  g.out_begin.assign(n + 1, 0);
  g.in_begin.assign(n + 1, 0);
  for (const Edge& e : g.edges) {
    ++g.out_begin[e.from + 1];
    ++g.in_begin[e.to + 1];
  }
  std::partial_sum(g.out_begin.begin(), g.out_begin.end(), g.out_begin.begin());
  std::partial_sum(g.in_begin.begin(), g.in_begin.end(), g.in_begin.begin());
  g.out_edges.resize(m);
  g.in_edges.resize(m);
  std::vector<int32_t> fo(g.out_begin.begin(), g.out_begin.end() - 1), fi(g.in_begin.begin(), g.in_begin.end() - 1);
  for (int32_t id = 0; id < m; ++id) {
    g.out_edges[fo[g.edges[id].from]++] = id;
    g.in_edges[fi[g.edges[id].to]++] = id;
  }
  return g;
}

Problem make_problem(Dag dag, const GroupModel& model, double beta) {
  if (!(beta > 0)) throw InputError({}, "buffer", "the buffer capacity must be positive");
  Problem p;
  p.dag = std::move(dag);
  p.model = &model;
  p.beta = beta;
  p.fuseable.assign(p.dag.n, 0);
  for (int32_t v = 0; v < p.dag.n; ++v) {
    const int32_t one[1] = {v};
    const GroupCost c = model.evaluate(one);
    p.fuseable[v] = c.supported && c.buffer < beta;
    p.fuseable_count += p.fuseable[v];
  }
  if (p.fuseable_count == 0)
    throw InputError({}, "buffer", "no operator fits the buffer on its own (every operator is unfuseable)");
  p.gene_of_edge.assign(p.dag.edges.size(), -1);
  for (int32_t id = 0; id < static_cast<int32_t>(p.dag.edges.size()); ++id) {
    const Edge& e = p.dag.edges[id];
    if (p.fuseable[e.from] && p.fuseable[e.to]) {
      p.gene_of_edge[id] = static_cast<int32_t>(p.genes.size());
      p.genes.push_back(id);
    }
  }
  return p;
}

// ---------------------------------------------------------------------------------------------
Evaluator::Evaluator(const Problem& p) : p_(&p), words_((p.dag.n + 63) / 64 + 1) {
  scratch_.assign(words_, 0);
  slots_.assign(1024, -1);
}

namespace {
uint64_t hash_words(const uint64_t* w, int32_t n) {
  uint64_t h = 0x9e3779b97f4a7c15ULL;
  for (int32_t i = 0; i < n; ++i) {
    h ^= w[i] + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdULL;
  }
  return h ^ (h >> 33);
}
}  // namespace

void Evaluator::grow() {
  std::vector<int32_t> slots(slots_.size() * 2, -1);
  const size_t mask = slots.size() - 1;
  for (int32_t idx = 0; idx < static_cast<int32_t>(values_.size()); ++idx) {
    size_t s = hash_words(keys_.data() + static_cast<size_t>(idx) * words_, words_) & mask;
    while (slots[s] >= 0) s = (s + 1) & mask;
    slots[s] = idx;
  }
  slots_.swap(slots);
}

GroupCost Evaluator::cost(std::span<const int32_t> nodes) {
  ++lookups_;
  std::fill(scratch_.begin(), scratch_.end(), 0);
  for (int32_t v : nodes) scratch_[v >> 6] |= uint64_t{1} << (v & 63);
  // β is part of the key through the table: one Evaluator per Problem, one β per Problem.
  const uint64_t h = hash_words(scratch_.data(), words_);
  const size_t mask = slots_.size() - 1;
  size_t s = h & mask;
  while (slots_[s] >= 0) {
    const int32_t idx = slots_[s];
    if (std::equal(scratch_.begin(), scratch_.end(), keys_.begin() + static_cast<ptrdiff_t>(idx) * words_))
      return values_[idx];
    s = (s + 1) & mask;
  }
  ++model_calls_;
  const GroupCost c = p_->model->evaluate(nodes);
  const auto idx = static_cast<int32_t>(values_.size());
  values_.push_back(c);
  keys_.insert(keys_.end(), scratch_.begin(), scratch_.end());
  slots_[s] = idx;
  if (values_.size() * 2 > slots_.size()) grow();
  return values_[idx];
}

// ---------------------------------------------------------------------------------------------
void Workspace::reset(int32_t n) {
  if (static_cast<int32_t>(mark.size()) < n) {
    mark.assign(n, 0);
    group_of.assign(n, -1);
    epoch = 0;
  }
}

namespace {
// Marks `nodes` with a fresh epoch so membership tests are O(1) without clearing.
int32_t mark_nodes(Workspace& ws, std::span<const int32_t> nodes, int32_t n) {
  ws.reset(n);
  if (ws.epoch >= INT32_MAX - 2) {  // components() takes two epochs per call
    std::fill(ws.mark.begin(), ws.mark.end(), 0);
    ws.epoch = 0;
  }
  ++ws.epoch;
  for (int32_t v : nodes) ws.mark[v] = ws.epoch;
  return ws.epoch;
}
}  // namespace

void components(const Dag& g, std::span<const int32_t> nodes, Workspace& ws, std::vector<Group>& out) {
  if (nodes.size() == 1) {
    out.push_back({nodes[0]});
    return;
  }
  const int32_t in_set = mark_nodes(ws, nodes, g.n);
  // A second epoch value tells "seen"; in_set + 1 is never used by the next call (it bumps twice).
  const int32_t seen = ++ws.epoch;
  for (int32_t root : nodes) {
    if (ws.mark[root] != in_set) continue;
    Group comp;
    ws.stack.clear();
    ws.stack.push_back(root);
    ws.mark[root] = seen;
    while (!ws.stack.empty()) {
      const int32_t v = ws.stack.back();
      ws.stack.pop_back();
      comp.push_back(v);
      for (int32_t e : g.out(v))
        if (int32_t w = g.edges[e].to; ws.mark[w] == in_set) ws.mark[w] = seen, ws.stack.push_back(w);
      for (int32_t e : g.in(v))
        if (int32_t w = g.edges[e].from; ws.mark[w] == in_set) ws.mark[w] = seen, ws.stack.push_back(w);
    }
    std::sort(comp.begin(), comp.end());
    out.push_back(std::move(comp));
  }
}

void split_at(const Dag& g, std::span<const int32_t> nodes, int32_t t, Workspace& ws, std::vector<Group>& out) {
  const auto mid = std::upper_bound(nodes.begin(), nodes.end(), t) - nodes.begin();
  if (mid > 0) components(g, nodes.subspan(0, mid), ws, out);
  if (mid < static_cast<ptrdiff_t>(nodes.size())) components(g, nodes.subspan(mid), ws, out);
}

std::vector<Group> decode(const Problem& p, std::span<const uint8_t> cut) {
  const Dag& g = p.dag;
  std::vector<int32_t> parent(g.n);
  std::iota(parent.begin(), parent.end(), 0);
  auto find = [&](int32_t v) {
    while (parent[v] != v) v = parent[v] = parent[parent[v]];
    return v;
  };
  for (size_t k = 0; k < p.genes.size(); ++k) {
    if (cut[k]) continue;
    const Edge& e = g.edges[p.genes[k]];
    const int32_t a = find(e.from), b = find(e.to);
    if (a != b) parent[std::max(a, b)] = std::min(a, b);
  }
  // Roots are the smallest node of each component, so groups come out sorted by first node.
  std::vector<int32_t> index(g.n, -1);
  std::vector<Group> groups;
  for (int32_t v = 0; v < g.n; ++v) {
    if (!p.fuseable[v]) continue;
    const int32_t r = find(v);
    if (index[r] < 0) {
      index[r] = static_cast<int32_t>(groups.size());
      groups.emplace_back();
    }
    groups[index[r]].push_back(v);
  }
  return groups;
}

std::vector<uint8_t> encode(const Problem& p, const std::vector<Group>& groups) {
  std::vector<int32_t> group_of(p.dag.n, -1);
  for (size_t i = 0; i < groups.size(); ++i)
    for (int32_t v : groups[i]) group_of[v] = static_cast<int32_t>(i);
  std::vector<uint8_t> cut(p.genes.size());
  for (size_t k = 0; k < p.genes.size(); ++k) {
    const Edge& e = p.dag.edges[p.genes[k]];
    cut[k] = group_of[e.from] != group_of[e.to];
  }
  return cut;
}

namespace {

// Quotient graph of groups plus unfuseable singletons (ids groups.size() + k).
struct Quotient {
  int32_t count = 0;
  std::vector<int32_t> in_begin, in_edge;  // dag edge ids entering each quotient node from another
  std::vector<int32_t> indegree;
};

void assign_groups(const Problem& p, const std::vector<Group>& groups, std::vector<int32_t>& group_of,
                   int32_t& count) {
  group_of.assign(p.dag.n, -1);
  for (size_t i = 0; i < groups.size(); ++i)
    for (int32_t v : groups[i]) group_of[v] = static_cast<int32_t>(i);
  count = static_cast<int32_t>(groups.size());
  for (int32_t v = 0; v < p.dag.n; ++v)
    if (group_of[v] < 0) group_of[v] = count++;
}

Quotient build_quotient(const Problem& p, const std::vector<int32_t>& group_of, int32_t count) {
  Quotient q;
  q.count = count;
  q.in_begin.assign(count + 1, 0);
  for (const Edge& e : p.dag.edges)
    if (group_of[e.from] != group_of[e.to]) ++q.in_begin[group_of[e.to] + 1];
  std::partial_sum(q.in_begin.begin(), q.in_begin.end(), q.in_begin.begin());
  q.in_edge.resize(q.in_begin[count]);
  std::vector<int32_t> fill(q.in_begin.begin(), q.in_begin.end() - 1);
  for (int32_t id = 0; id < static_cast<int32_t>(p.dag.edges.size()); ++id) {
    const Edge& e = p.dag.edges[id];
    if (group_of[e.from] != group_of[e.to]) q.in_edge[fill[group_of[e.to]]++] = id;
  }
  return q;
}

// Kahn's algorithm; returns the quotient nodes left over (non-empty iff there is a cycle).
std::vector<uint8_t> leftover_after_kahn(const Problem& p, const Quotient& q, const std::vector<int32_t>& group_of) {
  std::vector<int32_t> indeg(q.count, 0);
  std::vector<std::vector<int32_t>> succ(q.count);
  for (int32_t gq = 0; gq < q.count; ++gq)
    for (int32_t k = q.in_begin[gq]; k < q.in_begin[gq + 1]; ++k) {
      ++indeg[gq];
      succ[group_of[p.dag.edges[q.in_edge[k]].from]].push_back(gq);
    }
  std::vector<int32_t> ready;
  for (int32_t gq = 0; gq < q.count; ++gq)
    if (indeg[gq] == 0) ready.push_back(gq);
  std::vector<uint8_t> left(q.count, 1);
  while (!ready.empty()) {
    const int32_t a = ready.back();
    ready.pop_back();
    left[a] = 0;
    for (int32_t b : succ[a])
      if (--indeg[b] == 0) ready.push_back(b);
  }
  return left;
}

}  // namespace

int32_t repair_cycles(const Problem& p, std::vector<Group>& groups, Workspace& ws) {
  int32_t splits = 0;
  std::vector<int32_t> group_of;
  for (;;) {
    int32_t count = 0;
    assign_groups(p, groups, group_of, count);
    const Quotient q = build_quotient(p, group_of, count);
    const std::vector<uint8_t> left = leftover_after_kahn(p, q, group_of);
    const auto start = std::find(left.begin(), left.end(), uint8_t{1});
    if (start == left.end()) break;
    // Every leftover node has a leftover predecessor: walk backwards until a node repeats.
    std::vector<int32_t> pos(count, -1), walk_group, walk_edge;  // walk_edge[i] enters walk_group[i]
    int32_t cur = static_cast<int32_t>(start - left.begin());
    while (pos[cur] < 0) {
      pos[cur] = static_cast<int32_t>(walk_group.size());
      walk_group.push_back(cur);
      int32_t via = -1;
      for (int32_t k = q.in_begin[cur]; k < q.in_begin[cur + 1]; ++k)
        if (left[group_of[p.dag.edges[q.in_edge[k]].from]]) {
          via = q.in_edge[k];
          break;
        }
      walk_edge.push_back(via);
      cur = group_of[p.dag.edges[via].from];
    }
    // The cycle is walk_group[pos[cur]..]; walk_edge[i] enters walk_group[i] from walk_group[i+1]
    // (the backward walk), so the exit of walk_group[i] is walk_edge[i-1] (wrapping).
    const int32_t first = pos[cur], len = static_cast<int32_t>(walk_group.size()) - first;
    int32_t victim = -1, entry = -1;
    for (int32_t i = 0; i < len; ++i) {
      const int32_t gi = walk_group[first + i];
      const int32_t enter = p.dag.edges[walk_edge[first + i]].to;
      const int32_t exit_edge = walk_edge[first + (i + len - 1) % len];
      const int32_t leave = p.dag.edges[exit_edge].from;
      // Some group on any cycle has its exit before its entry (else labels would increase around it).
      if (leave < enter && gi < static_cast<int32_t>(groups.size())) {
        victim = gi;
        entry = enter;
        break;
      }
    }
    std::vector<Group> parts;
    split_at(p.dag, groups[victim], entry - 1, ws, parts);
    groups[victim] = std::move(parts[0]);
    for (size_t i = 1; i < parts.size(); ++i) groups.push_back(std::move(parts[i]));
    ++splits;
  }
  if (splits > 0)
    std::sort(groups.begin(), groups.end(), [](const Group& a, const Group& b) { return a[0] < b[0]; });
  return splits;
}

bool is_valid_plan(const Problem& p, Evaluator& ev, const std::vector<Group>& groups, std::string* why) {
  auto fail = [&](std::string m) {
    if (why) *why = std::move(m);
    return false;
  };
  std::vector<int32_t> seen(p.dag.n, 0);
  Workspace ws;
  for (const Group& grp : groups) {
    if (grp.empty()) return fail("empty group");
    for (size_t i = 0; i < grp.size(); ++i) {
      const int32_t v = grp[i];
      if (v < 0 || v >= p.dag.n) return fail("node out of range");
      if (i > 0 && grp[i - 1] >= v) return fail("group not in increasing order");
      if (!p.fuseable[v]) return fail("unfuseable node " + std::to_string(v) + " in a group");
      if (seen[v]++) return fail("node " + std::to_string(v) + " in two groups");
    }
    std::vector<Group> comps;
    components(p.dag, grp, ws, comps);
    if (comps.size() != 1) return fail("group starting at " + std::to_string(grp[0]) + " is not weakly connected");
    if (!ev.valid(grp)) return fail("group starting at " + std::to_string(grp[0]) + " does not fit the buffer");
  }
  for (int32_t v = 0; v < p.dag.n; ++v)
    if (p.fuseable[v] && !seen[v]) return fail("fuseable node " + std::to_string(v) + " in no group");
  std::vector<int32_t> group_of;
  int32_t count = 0;
  assign_groups(p, groups, group_of, count);
  const std::vector<uint8_t> left = leftover_after_kahn(p, build_quotient(p, group_of, count), group_of);
  if (std::find(left.begin(), left.end(), uint8_t{1}) != left.end()) return fail("the quotient graph has a cycle");
  return true;
}

void price(Evaluator& ev, Plan& plan) {
  plan.dram = 0;
  plan.mbu = 0;
  for (const Group& grp : plan.groups) {
    const GroupCost c = ev.cost(grp);
    plan.dram += c.dram;
    plan.mbu = std::max(plan.mbu, c.buffer);
  }
}

}  // namespace mapfuse::get
