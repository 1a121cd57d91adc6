#include "engine/search/stream/steady_state.hpp"

#include <algorithm>
#include <map>

namespace mapfuse {

int64_t tile_macs(const Workload& w, const TileSet& tiles, int tile) {
  if (w.einsums[size_t(tiles.tiles[size_t(tile)].layer)].op != OpKind::Mac) return 0;
  int64_t m = 1;
  for (const Range& r : tiles.rank_ranges(tile)) m *= r.size();
  return m;
}

std::vector<SteadyState> steady_states(const Workload& w, const TileGraph& g) {
  const TileSet& ts = g.tiles;
  const int n = int(ts.tiles.size());
  std::vector<int> position(n);  // in the scheduling order
  for (int k = 0; k < n; ++k) position[size_t(ts.order[size_t(k)])] = k;
  std::vector<char> done(size_t(n), 0);
  std::vector<int> stack_of_layer(w.einsums.size(), -1);
  for (size_t s = 0; s < ts.stacks.size(); ++s)
    for (int l : ts.stacks[s]) stack_of_layer[size_t(l)] = int(s);

  std::vector<SteadyState> out;
  for (size_t s = 0; s < ts.stacks.size(); ++s) {
    SteadyState st;
    st.stack = int(s);
    const int sink = *std::max_element(ts.stacks[s].begin(), ts.stacks[s].end());
    for (int l : ts.stacks[s])
      for (int t = ts.layer_first[size_t(l)]; t < ts.layer_first[size_t(l) + 1]; ++t) {
        ++st.stack_tiles;
        st.stack_macs += tile_macs(w, ts, t);
      }
    std::vector<int> sinks;
    for (int t = ts.layer_first[size_t(sink)]; t < ts.layer_first[size_t(sink) + 1]; ++t) sinks.push_back(t);
    std::sort(sinks.begin(), sinks.end(), [&](int a, int b) { return position[size_t(a)] < position[size_t(b)]; });
    st.stack_iterations = int64_t(sinks.size());

    // The work of an iteration, as a key: per new CT (sorted) its layer and rank sizes. Equal keys
    // are the same work (the paper compares predecessor counts; shapes also tell a clipped edge row
    // apart from an interior one).
    struct Seen {
      int64_t count = 0, macs = 0, first = 0;
      std::vector<int> tiles;
    };
    std::map<std::vector<int64_t>, Seen> kinds;
    std::vector<int> stack, iteration;
    for (int sink_ct : sinks) {
      iteration.clear();
      stack.assign(1, sink_ct);
      done[size_t(sink_ct)] = 1;
      while (!stack.empty()) {
        const int t = stack.back();
        stack.pop_back();
        iteration.push_back(t);
        for (int e = g.first_pred[size_t(t)]; e < g.first_pred[size_t(t) + 1]; ++e) {
          const int p = g.edges[size_t(e)].producer;
          if (done[size_t(p)] || stack_of_layer[size_t(ts.tiles[size_t(p)].layer)] != int(s)) continue;
          done[size_t(p)] = 1;
          stack.push_back(p);
        }
      }
      std::sort(iteration.begin(), iteration.end());
      std::vector<int64_t> key;
      int64_t macs = 0;
      for (int t : iteration) {
        key.push_back(ts.tiles[size_t(t)].layer);
        for (const Range& r : ts.rank_ranges(t)) key.push_back(r.size());
        key.push_back(-1);
        macs += tile_macs(w, ts, t);
      }
      auto [it, fresh] = kinds.try_emplace(std::move(key));
      if (fresh) {
        it->second.macs = macs;
        it->second.first = int64_t(kinds.size());
        it->second.tiles = iteration;
      }
      ++it->second.count;
    }
    const Seen* best = nullptr;
    for (const auto& [key, k] : kinds) {
      auto score = [](const Seen& x) { return std::make_tuple(x.count * x.macs, x.count, -x.first); };
      if (!best || score(k) > score(*best)) best = &k;
    }
    if (best) {
      st.tiles = best->tiles;
      st.iterations = best->count;
      st.macs = best->macs;
    }
    out.push_back(std::move(st));
  }
  return out;
}

SteadyStateSummary summarize(std::span<const SteadyState> states) {
  SteadyStateSummary s;
  for (const SteadyState& st : states) {
    s.tiles += st.stack_tiles;
    s.steady_tiles += int64_t(st.tiles.size());
    s.macs += st.stack_macs;
    s.steady_macs += st.iterations * st.macs;
  }
  return s;
}

}  // namespace mapfuse
