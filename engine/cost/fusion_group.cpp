// F_beta and F_D of a fusion group under LBDF and BRR (docs/get.md; shared/notes/get_fusion.md §3).
// Positions 0..n-1 index the group's nodes in label order, which is a topological order, so every
// forward pass is one sweep and every backward pass one reverse sweep. Nothing allocates once the
// workspace has been sized for the graph.
#include "engine/cost/fusion_group.hpp"

#include <algorithm>
#include <bit>
#include <numeric>
#include <string>

#include <fmt/format.h>

#include "engine/common/error.hpp"

namespace mapfuse {

std::string_view to_string(FusionScheme s) { return s == FusionScheme::Lbdf ? "lbdf" : "brr"; }

FusionScheme fusion_scheme_from_string(std::string_view s) {
  if (s == "lbdf") return FusionScheme::Lbdf;
  if (s == "brr") return FusionScheme::Brr;
  throw InputError({}, "scheme", "unknown fusion scheme '" + std::string(s) + "'" +
                                     did_you_mean(s, {"lbdf", "brr"}) + "; expected lbdf or brr");
}

GroupWorkspace::GroupWorkspace(const OpGraph& g) { reserve(g); }

void GroupWorkspace::reserve(const OpGraph& g) {
  const size_t n = static_cast<size_t>(g.size());
  if (local.size() < n) local.assign(n, -1);
  if (stamp.size() < n) stamp.assign(n, 0);
  for (auto* v : {&a, &b, &c})
    if (v->size() < n) v->resize(n);
  for (auto* v : {&ia, &ib})
    if (v->size() < n) v->resize(n);
  if (mask.size() < n) mask.resize(n);
  if (pstamp.size() < n) pstamp.assign(n, 0);
  if (row.size() < n) row.resize(n);
  if (netrow.size() < g.network_inputs.size()) netrow.resize(g.network_inputs.size());
}

namespace {

// Unary activations and reshapes run in place on their producer's rows (no buffer of their own
// under BRR, and transparent for BRR's first-node rule).
bool transparent(OpClass c) { return c == OpClass::Unary || c == OpClass::Reshape; }
// Ops that emit nothing before their whole input has been read (note §3.2, "whole-map ops").
bool whole_map(OpClass c) { return c == OpClass::GlobalPool || c == OpClass::Gemm || c == OpClass::Resize; }
// BRR alternates full and partial output buffers along channel-reducing ops.
bool reduces_channels(OpClass c) { return c == OpClass::Conv || c == OpClass::Gemm; }

int64_t node_weights(const OpNode& v, const GroupModelOptions& o) {
  return o.count_bias ? v.weight_elems : v.weight_elems - v.bias_elems;
}

// LBDF: elements a consumer holds of one input tensor of shape s.
int64_t lbdf_input_rows(const OpNode& v, const Shape3& s, LineBufferForm form) {
  if (v.cls == OpClass::Resize) return s.elems();
  if (v.windowed() && v.kh > 1) {
    const int64_t padded = s.w + v.pad_left + v.pad_right;
    return form == LineBufferForm::FullRows ? v.kh * padded * s.c : ((v.kh - 1) * padded + v.kw) * s.c;
  }
  if (v.windowed()) return (s.w + v.pad_left + v.pad_right) * s.c;
  return s.w * s.c;
}

// BRR: input rows a consumer needs to emit h output rows (capped at the input height).
int64_t brr_need(const OpNode& v, int64_t h, int64_t in_h) {
  if (v.cls == OpClass::GlobalPool || v.cls == OpClass::Resize) return in_h;
  if (transparent(v.cls) || !v.windowed()) return std::min(h, in_h);
  return std::min((h - 1) * v.sh + v.kh, in_h);
}

struct Members {
  const OpGraph& g;
  std::span<const int> nodes;
  GroupWorkspace& ws;
  Members(const OpGraph& gg, std::span<const int> nn, GroupWorkspace& w) : g(gg), nodes(nn), ws(w) {
    for (int i = 0; i < static_cast<int>(nodes.size()); ++i) ws.local[nodes[i]] = i;
  }
  ~Members() {
    for (int v : nodes) ws.local[v] = -1;
  }
  bool in(int v) const { return v >= 0 && ws.local[v] >= 0; }
};

// In + Out of a group (each distinct external tensor read once; each tensor with a consumer
// outside the group, or a network output, written once).
int64_t io_elems(const Members& m) {
  const OpGraph& g = m.g;
  auto& ws = m.ws;
  const int ep = ++ws.epoch;
  uint64_t net_seen = 0;
  int64_t io = 0;
  for (int v : m.nodes) {
    const OpNode& node = g.nodes[v];
    for (const auto& in : node.inputs) {
      if (in.producer < 0) {
        const uint64_t bit = uint64_t{1} << (in.net_input & 63);
        if (!(net_seen & bit)) io += in.shape.elems();
        net_seen |= bit;
      } else if (!m.in(in.producer) && ws.stamp[in.producer] != ep) {
        ws.stamp[in.producer] = ep;
        io += in.shape.elems();
      }
    }
    bool out = node.is_output;
    for (int s : g.succs(v)) out = out || !m.in(s);
    if (out) io += node.out.elems();
  }
  return io;
}

// LBDF F_beta without weights: row buffers (per tensor, the largest need among its consumers in
// the group), GAP accumulators, and the skip buffers of branches that reconverge in the group.
int64_t lbdf_buffer(const Members& m, const GroupModelOptions& opt, int64_t& skip_dram) {
  const OpGraph& g = m.g;
  auto& ws = m.ws;
  const int n = static_cast<int>(m.nodes.size());
  int64_t total = 0;
  {
    const int ep = ++ws.epoch;
    std::fill(ws.netrow.begin(), ws.netrow.end(), 0);
    for (int v : m.nodes) {
      const OpNode& node = g.nodes[v];
      if (node.cls == OpClass::GlobalPool) total += node.out.c;
      for (const auto& in : node.inputs) {
        const int64_t need = lbdf_input_rows(node, in.shape, opt.line_buffer);
        int64_t* cur;
        if (in.producer < 0) {
          cur = &ws.netrow[in.net_input];
        } else {
          cur = &ws.row[in.producer];
          if (ws.stamp[in.producer] != ep) {
            ws.stamp[in.producer] = ep;
            *cur = 0;
          }
        }
        if (need > *cur) {
          total += need - *cur;
          *cur = need;
        }
      }
    }
  }

  // Skip buffers. A source tensor read by two or more members starts one branch (bit) per
  // reader; a join is a member where branches that had not met before meet. Per position:
  // ws.mask = branches reaching it, ws.a = row lag in source rows, ws.b = cumulative stride,
  // ws.ia = a whole-map op lies on some path.
  auto skip_from = [&](int producer, int net_input, const Shape3& t, bool in_dram) -> int64_t {
    // Positions whose ws.mask belongs to this source carry ws.pstamp == pe.
    const int pe = ++ws.pepoch;
    int first = n, readers = 0;
    auto reads = [&](const OpNode& node) {
      for (const auto& in : node.inputs)
        if (producer >= 0 ? in.producer == producer : (in.producer < 0 && in.net_input == net_input)) return true;
      return false;
    };
    auto start_branch = [&](int i) {
      ws.pstamp[i] = pe;
      ws.mask[i] = uint64_t{1} << (readers++ & 63);
      first = std::min(first, i);
    };
    if (producer >= 0) {
      for (int c : g.succs(producer))
        if (m.in(c)) start_branch(ws.local[c]);
    } else {
      for (int i = 0; i < n; ++i)
        if (reads(g.nodes[m.nodes[i]])) start_branch(i);
    }
    if (readers < 2) return 0;
    const uint64_t all = readers >= 64 ? ~uint64_t{0} : (uint64_t{1} << readers) - 1;
    int64_t sb = 0;
    bool skip_dram_first = true;
    int open = readers;  // branch edges not yet followed to their consumer
    for (int i = first; i < n && open > 0; ++i) {
      const int v = m.nodes[i];
      const OpNode& node = g.nodes[v];
      uint64_t uni = ws.pstamp[i] == pe ? ws.mask[i] : 0;
      int contributions = uni ? 1 : 0;
      int max_pop = std::popcount(uni);
      int64_t lag = 0, cs = 1;
      bool whole = false;
      for (int p : g.preds(v)) {
        if (!m.in(p)) continue;
        const int q = ws.local[p];
        if (ws.pstamp[q] != pe || ws.mask[q] == 0) continue;
        ++contributions;
        uni |= ws.mask[q];
        max_pop = std::max(max_pop, std::popcount(ws.mask[q]));
        lag = std::max(lag, ws.a[q]);
        cs = std::max(cs, ws.b[q]);
        whole = whole || ws.ia[q] != 0;
      }
      if (uni == 0) continue;
      if (contributions >= 2 && std::popcount(uni) > max_pop) {
        if (opt.skip_to_dram) {
          // Written once (unless the group writes or reads it anyway), read back at every join.
          skip_dram += (skip_dram_first && !in_dram ? 2 : 1) * t.elems();
          skip_dram_first = false;
        } else {
          sb += whole ? t.elems() : (lag + 1) * t.w * t.c;
        }
      }
      ws.pstamp[i] = pe;
      ws.mask[i] = uni;
      if (node.windowed() && node.kh > 1) lag += static_cast<int64_t>(node.kh / 2) * cs;
      ws.a[i] = lag;
      ws.b[i] = cs * node.sh;
      ws.ia[i] = whole || whole_map(node.cls);
      int out_degree = 0;
      for (int c : g.succs(v)) out_degree += m.in(c);
      open += out_degree - contributions;
      // Every branch has met here and nothing else is in flight: no later join can count.
      if (uni == all && open == out_degree) break;
    }
    return sb;
  };
  const int ep = ++ws.epoch;
  uint64_t net_done = 0;
  for (int i = 0; i < n; ++i) {
    const int v = m.nodes[i];
    if (g.succs(v).size() >= 2) {
      bool written = g.nodes[v].is_output;
      for (int c : g.succs(v)) written = written || !m.in(c);
      total += skip_from(v, -1, g.nodes[v].out, written);
    }
    for (const auto& in : g.nodes[v].inputs) {
      if (in.producer < 0) {
        const uint64_t b = uint64_t{1} << (in.net_input & 63);
        if (!(net_done & b)) total += skip_from(-1, in.net_input, in.shape, true);
        net_done |= b;
      } else if (!m.in(in.producer) && ws.stamp[in.producer] != ep && g.succs(in.producer).size() >= 2) {
        ws.stamp[in.producer] = ep;
        total += skip_from(in.producer, -1, in.shape, true);
      }
    }
  }
  return total;
}

struct BrrResult {
  int64_t buffer = 0, add_one_line = 0, last_height = 0;
  bool supported = true;
};

// BRR footprint for `steps` output steps of the last nodes and channel parity `parity`.
int64_t brr_footprint(const Members& m, const GroupModelOptions& opt, int64_t steps, int parity, int64_t s) {
  const OpGraph& g = m.g;
  auto& ws = m.ws;
  const int n = static_cast<int>(m.nodes.size());
  // Backward: rows per step (ws.c), from the last nodes towards the first.
  for (int i = n - 1; i >= 0; --i) {
    const int v = m.nodes[i];
    const OpNode& node = g.nodes[v];
    int64_t h = 0;
    bool last = true;
    for (int c : g.succs(v)) {
      if (!m.in(c)) continue;
      last = false;
      const int q = ws.local[c];
      h = std::max(h, brr_need(g.nodes[c], ws.c[q], node.out.h));
    }
    if (last) h = std::min(node.out.h, steps * (s / ws.b[i]));
    ws.c[i] = std::max<int64_t>(1, std::min(h, node.out.h));
  }
  int64_t total = 0;
  const int ep = ++ws.epoch;
  std::fill(ws.netrow.begin(), ws.netrow.end(), 0);
  for (int i = 0; i < n; ++i) {
    const int v = m.nodes[i];
    const OpNode& node = g.nodes[v];
    if (!transparent(node.cls)) {
      const bool partial = reduces_channels(node.cls) ? (ws.ia[i] % 2 == parity) : ws.ib[i] != 0;
      const int64_t ch = partial ? std::min<int64_t>(opt.brr_partition, node.out.c) : node.out.c;
      total += ch * ws.c[i] * node.out.w;
    }
    // Rows of external inputs (per tensor, the largest need among readers).
    for (const auto& in : node.inputs) {
      if (in.producer >= 0 && m.in(in.producer)) continue;
      const int64_t rows = brr_need(node, ws.c[i], in.shape.h) * in.shape.w * in.shape.c;
      int64_t* cur;
      if (in.producer < 0) {
        cur = &ws.netrow[in.net_input];
      } else {
        cur = &ws.row[in.producer];
        if (ws.stamp[in.producer] != ep) {
          ws.stamp[in.producer] = ep;
          *cur = 0;
        }
      }
      if (rows > *cur) {
        total += rows - *cur;
        *cur = rows;
      }
    }
  }
  return total;
}

BrrResult brr_buffer(const Members& m, const GroupModelOptions& opt) {
  const OpGraph& g = m.g;
  auto& ws = m.ws;
  const int n = static_cast<int>(m.nodes.size());
  BrrResult r;
  // Forward: cumulative stride (ws.b), conv depth (ws.ia), partial-inherited flag source (ws.ib),
  // and the first-node rule.
  int non_transparent = 0;
  for (int i = 0; i < n; ++i) non_transparent += !transparent(g.nodes[m.nodes[i]].cls);
  for (int i = 0; i < n; ++i) {
    const int v = m.nodes[i];
    const OpNode& node = g.nodes[v];
    if (node.cls == OpClass::Binary)
      for (const auto& in : node.inputs)
        if (!(in.shape == node.out)) r.supported = false;  // SE scale: a broadcast multiply
    int64_t cs = 1;
    int depth = 0;
    bool head = true;  // no non-transparent member before it
    for (int p : g.preds(v)) {
      if (!m.in(p)) continue;
      const int q = ws.local[p];
      cs = std::max(cs, ws.b[q]);
      depth = std::max(depth, ws.ia[q]);
      head = head && transparent(g.nodes[p].cls) && ws.mask[q] != 0;
    }
    const int64_t stride = node.cls == OpClass::GlobalPool ? std::max<int64_t>(1, node.inputs.empty() ? 1 : node.inputs[0].shape.h)
                                                            : node.sh;
    ws.b[i] = cs * stride;
    ws.ia[i] = depth + (reduces_channels(node.cls) ? 1 : 0);
    ws.mask[i] = head ? 1 : 0;  // "still at the head of the group"
    if (head && !transparent(node.cls)) {
      ws.mask[i] = 0;
      const bool local_region = node.cls == OpClass::Pool || node.cls == OpClass::DepthwiseConv ||
                                node.cls == OpClass::Binary || node.cls == OpClass::Concat ||
                                node.cls == OpClass::GlobalPool || node.cls == OpClass::Resize;
      if (local_region && non_transparent > 1) r.supported = false;
    }
  }
  int64_t s = 1;
  r.last_height = 0;
  for (int i = 0; i < n; ++i) {
    const int v = m.nodes[i];
    bool last = true;
    for (int c : g.succs(v)) last = last && !m.in(c);
    if (!last) continue;
    s = std::lcm(s, ws.b[i]);
    const int64_t h = g.nodes[v].out.h;
    r.last_height = r.last_height == 0 ? h : std::min(r.last_height, h);
  }
  // Partial flags (ws.ib) of the ops that do not reduce channels: their first member producer's.
  auto set_parity = [&](int parity) {
    for (int i = 0; i < n; ++i) {
      const int v = m.nodes[i];
      if (reduces_channels(g.nodes[v].cls)) continue;
      int fp = -1;
      for (int p : g.preds(v))
        if (m.in(p)) {
          fp = ws.local[p];
          break;
        }
      if (fp < 0) {
        ws.ib[i] = 0;
        continue;
      }
      const OpNode& pn = g.nodes[m.nodes[fp]];
      ws.ib[i] = reduces_channels(pn.cls) ? (ws.ia[fp] % 2 == parity) : ws.ib[fp];
    }
  };
  int64_t best = -1;
  int best_parity = 0;
  for (int parity = 0; parity < 2; ++parity) {
    set_parity(parity);
    const int64_t f1 = brr_footprint(m, opt, 1, parity, s);
    if (best < 0 || f1 < best) {
      best = f1;
      best_parity = parity;
    }
  }
  if (best_parity != 1) set_parity(best_parity);
  const int64_t best_aol = brr_footprint(m, opt, 2, best_parity, s) - best;
  r.buffer = best;
  r.add_one_line = best_aol;
  return r;
}

}  // namespace

GroupCost group_cost(const OpGraph& g, std::span<const int> nodes, FusionScheme scheme, int64_t beta_bytes,
                     const GroupModelOptions& opt, GroupWorkspace& ws) {
  GroupCost r;
  if (nodes.empty()) return r;
  if (ws.local.size() < static_cast<size_t>(g.size())) ws.reserve(g);
  if (ws.epoch > (1 << 30) || ws.pepoch > (1 << 30)) {  // stamps are compared for equality: restart before they wrap
    std::fill(ws.stamp.begin(), ws.stamp.end(), 0);
    std::fill(ws.pstamp.begin(), ws.pstamp.end(), 0);
    ws.epoch = ws.pepoch = 0;
  }
  Members m(g, nodes, ws);
  int64_t w = 0;
  for (int v : nodes) w += node_weights(g.nodes[v], opt);
  r.weight_elems = w;
  const int64_t io = io_elems(m);
  if (scheme == FusionScheme::Lbdf) {
    int64_t skip_dram = 0;
    r.buffer_elems = w + lbdf_buffer(m, opt, skip_dram);
    r.dram_elems = w + io + skip_dram;
  } else {
    const BrrResult b = brr_buffer(m, opt);
    r.supported = b.supported;
    r.buffer_elems = b.buffer;
    const int64_t beta = beta_bytes / opt.bytes_per_element;
    int64_t tiles = 1;
    if (w + b.buffer > beta) {
      // The weights do not fit beside the footprint: they are re-streamed once per row tile,
      // and the tile height is what the space left after the footprint holds.
      int64_t rows = 1;
      if (b.buffer < beta) rows = b.add_one_line <= 0 ? b.last_height : (beta - b.buffer) / b.add_one_line + 1;
      rows = std::max<int64_t>(1, std::min(rows, b.last_height));
      tiles = (b.last_height + rows - 1) / rows;
    }
    r.dram_elems = w * tiles + io;
  }
  r.buffer_bytes = r.buffer_elems * opt.bytes_per_element;
  r.dram_bytes = r.dram_elems * opt.bytes_per_element;
  return r;
}

uint64_t group_key(std::span<const int> nodes) {
  // Sum of a strong per-id mix: order-independent, so equal sets give equal keys; the size is
  // folded in to separate sets whose sums collide trivially.
  auto mix = [](uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
  };
  uint64_t h = mix(nodes.size() + 0x51ed270b27a1f3c5ull);
  for (int v : nodes) h += mix(static_cast<uint64_t>(v));
  return mix(h);
}

std::vector<char> fuseable_nodes(const OpGraph& g, FusionScheme scheme, int64_t beta_bytes,
                                 const GroupModelOptions& opt) {
  GroupWorkspace ws(g);
  std::vector<char> f(g.size(), 0);
  if (!opt.merge_activations) {
    for (int v = 0; v < g.size(); ++v) {
      const int one[1] = {v};
      f[v] = group_cost(g, one, scheme, beta_bytes, opt, ws).valid(beta_bytes);
    }
    return f;
  }
  // Each Unary/Reshape op with a single producer joins that producer's verdict; the producer is
  // tested together with its chain of such successors.
  std::vector<int> owner(g.size(), -1);
  for (int v = 0; v < g.size(); ++v) {
    const OpNode& n = g.nodes[v];
    const bool merge = transparent(n.cls) && g.preds(v).size() == 1 && n.inputs.size() == 1;
    owner[v] = merge ? owner[g.preds(v)[0]] : v;
  }
  std::vector<std::vector<int>> members(g.size());
  for (int v = 0; v < g.size(); ++v) members[owner[v]].push_back(v);
  for (int v = 0; v < g.size(); ++v)
    if (owner[v] == v) {
      const bool ok = group_cost(g, members[v], scheme, beta_bytes, opt, ws).valid(beta_bytes);
      for (int u : members[v]) f[u] = ok;
    }
  return f;
}

PlanCheck check_plan(const OpGraph& g, const PartitionPlan& plan) {
  const int n = g.size();
  std::vector<int> group_of(n, -1);
  for (int k = 0; k < static_cast<int>(plan.size()); ++k) {
    const auto& grp = plan[k];
    if (grp.empty()) return {false, "range", fmt::format("group {} is empty", k)};
    for (size_t i = 0; i < grp.size(); ++i) {
      const int v = grp[i];
      if (v < 0 || v >= n) return {false, "range", fmt::format("group {} names node {}; the graph has {} nodes", k, v, n)};
      if (i > 0 && grp[i - 1] >= v)
        return {false, "range", fmt::format("group {} is not sorted ascending without repeats (node {})", k, v)};
      if (group_of[v] >= 0)
        return {false, "disjoint", fmt::format("node {} ('{}') is in groups {} and {}", v, g.nodes[v].name, group_of[v], k)};
      group_of[v] = k;
    }
  }
  // Weak connectivity inside each group.
  std::vector<int> stack, seen(n, 0);
  for (int k = 0; k < static_cast<int>(plan.size()); ++k) {
    const auto& grp = plan[k];
    stack.assign(1, grp[0]);
    seen[grp[0]] = k + 1;
    size_t reached = 1;
    while (!stack.empty()) {
      const int v = stack.back();
      stack.pop_back();
      for (auto nb : {g.preds(v), g.succs(v)})
        for (int u : nb)
          if (group_of[u] == k && seen[u] != k + 1) {
            seen[u] = k + 1;
            ++reached;
            stack.push_back(u);
          }
    }
    if (reached != grp.size())
      return {false, "connected",
              fmt::format("group {} is not weakly connected: {} of its {} nodes are reachable from node {}", k, reached,
                          grp.size(), grp[0])};
  }
  // Quotient graph (unassigned nodes are groups of their own) must be acyclic: Kahn's algorithm.
  const int q = static_cast<int>(plan.size());
  std::vector<int> id(n);
  int next = q;
  for (int v = 0; v < n; ++v) id[v] = group_of[v] >= 0 ? group_of[v] : next++;
  std::vector<std::vector<int>> out(next);
  std::vector<int> indeg(next, 0);
  for (const auto& e : g.edges) {
    const int a = id[e.from], b = id[e.to];
    if (a == b) continue;
    out[a].push_back(b);
  }
  for (auto& o : out) {
    std::sort(o.begin(), o.end());
    o.erase(std::unique(o.begin(), o.end()), o.end());
    for (int b : o) ++indeg[b];
  }
  std::vector<int> ready;
  for (int a = 0; a < next; ++a)
    if (indeg[a] == 0) ready.push_back(a);
  int done = 0;
  while (!ready.empty()) {
    const int a = ready.back();
    ready.pop_back();
    ++done;
    for (int b : out[a])
      if (--indeg[b] == 0) ready.push_back(b);
  }
  if (done != next) {
    std::string on;
    for (int a = 0; a < q; ++a)
      if (indeg[a] > 0) on += (on.empty() ? "" : ", ") + std::to_string(a);
    return {false, "acyclic", "the quotient graph has a cycle through groups " + (on.empty() ? std::string("?") : on)};
  }
  return {};
}

PlanCost plan_cost(const OpGraph& g, const PartitionPlan& plan, FusionScheme scheme, int64_t beta_bytes,
                   const GroupModelOptions& opt, GroupWorkspace& ws) {
  PlanCost r;
  ws.reserve(g);
  for (const auto& grp : plan) {
    const GroupCost c = group_cost(g, grp, scheme, beta_bytes, opt, ws);
    r.dram_bytes += c.dram_bytes;
    r.mbu_bytes = std::max(r.mbu_bytes, c.buffer_bytes);
    if (!c.valid(beta_bytes)) ++r.invalid_groups;
  }
  r.valid = r.invalid_groups == 0;
  return r;
}

PartitionPlan singleton_plan(const std::vector<char>& fuseable) {
  PartitionPlan p;
  for (int v = 0; v < static_cast<int>(fuseable.size()); ++v)
    if (fuseable[v]) p.push_back({v});
  return p;
}

}  // namespace mapfuse
