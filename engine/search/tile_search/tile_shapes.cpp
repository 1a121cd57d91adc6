// Tile-shape enumeration: a level's factor choices (temporal, spatial X and Y per rank) given what
// remains of each rank, the capacity check of a level's kept tiles, and the size of the temporal
// mapspace for messages about a mapspace too large to search.
#include <algorithm>
#include <set>
#include <unordered_map>

#include "engine/search/tile_search/tile_search.hpp"

namespace mapfuse {


// All factor choices of level l given what remains of each rank (keep is set by the caller).
// The top level takes the rest of every rank; above it everything is 1. With `spatial_dead`
// (branch and bound), the spatial factors of every rank are chosen first and a set of them the
// predicate rejects is dropped before any temporal factor is enumerated under it; the choices
// then come in another order (the searches' results do not depend on it: ties go by text).
void TileSearch::level_choices(int l, const std::array<int64_t, kMaxRanks>& remaining, std::vector<LevelChoice>& out,
                               const SpatialFilter* spatial_dead) const {
  out.clear();
  const bool outermost = l >= top;
  LevelChoice cur;
  const int64_t fx_max = c_.levels[l].fanout.x, fy_max = c_.levels[l].fanout.y;
  auto temporal_ok = [&](int r, int64_t f) { return f >= t_min[l][r] && f <= t_max[l][r]; };
  // The most of each axis ranks r.. could still use (capped at the fan-out), so that a prefix
  // that can no longer reach min_usage is abandoned before its temporal factors are enumerated
  // (with full fan-out use required, most spatial prefixes cannot).
  const int64_t min_x = plan_.levels[l].min_x, min_y = plan_.levels[l].min_y;
  std::array<int64_t, kMaxRanks + 1> reach_x{}, reach_y{};
  reach_x[static_cast<size_t>(R)] = reach_y[static_cast<size_t>(R)] = 1;
  for (int r = R - 1; r >= 0; --r) {
    const bool spatial = l <= top;
    reach_x[r] = std::min(fx_max, reach_x[r + 1] * (spatial && (x_ok[l] >> r & 1) ? remaining[r] : 1));
    reach_y[r] = std::min(fy_max, reach_y[r + 1] * (spatial && (y_ok[l] >> r & 1) ? remaining[r] : 1));
  }
  // The temporal factors of rank r given its spatial ones: what remains, or (below the top) every
  // divisor within the constraints that leaves no more than the levels above can take.
  auto each_temporal = [&](int r, int64_t rest, auto&& take) {
    if (outermost) {
      if (temporal_ok(r, rest)) take(rest);
      return;
    }
    for (int64_t t : divs(rest)) {
      if (t > t_max[l][r]) break;  // divisors ascend
      if (rest / t > reach_above[l][r]) continue;  // more than the levels above can take
      if (temporal_ok(r, t)) take(t);
    }
  };
  auto each_spatial = [&](int r, int64_t used_x, int64_t used_y, auto&& take) {
    for (int64_t sx : divs(remaining[r])) {
      if (sx > 1 && (l > top || !(x_ok[l] >> r & 1) || used_x * sx > fx_max)) break;
      for (int64_t sy : divs(remaining[r] / sx)) {
        if (sy > 1 && (l > top || !(y_ok[l] >> r & 1) || used_y * sy > fy_max)) break;
        take(sx, sy);
      }
    }
  };
  if (!spatial_dead) {
    auto rec = [&](auto&& self, int r, int64_t used_x, int64_t used_y) -> void {
      if (used_x * reach_x[r] < min_x || used_y * reach_y[r] < min_y) return;  // min_usage (FanoutUnderused)
      if (r == R) {
        out.push_back(cur);
        return;
      }
      each_spatial(r, used_x, used_y, [&](int64_t sx, int64_t sy) {
        each_temporal(r, remaining[r] / sx / sy, [&](int64_t t) {
          cur.t[r] = t;
          cur.x[r] = sx;
          cur.y[r] = sy;
          self(self, r + 1, used_x * sx, used_y * sy);
        });
      });
    };
    rec(rec, 0, 1, 1);
  } else {
    auto temporal = [&](auto&& self, int r) -> void {
      if (r == R) {
        out.push_back(cur);
        return;
      }
      each_temporal(r, remaining[r] / cur.x[r] / cur.y[r], [&](int64_t t) {
        cur.t[r] = t;
        self(self, r + 1);
      });
    };
    auto spatial = [&](auto&& self, int r, int64_t used_x, int64_t used_y) -> void {
      if (used_x * reach_x[r] < min_x || used_y * reach_y[r] < min_y) return;  // min_usage (FanoutUnderused)
      if (r == R) {
        for (int q = 0; q < R; ++q) cur.t[q] = 1;
        if (!(*spatial_dead)(cur)) temporal(temporal, 0);
        return;
      }
      each_spatial(r, used_x, used_y, [&](int64_t sx, int64_t sy) {
        cur.x[r] = sx;
        cur.y[r] = sy;
        self(self, r + 1, used_x * sx, used_y * sy);
      });
    };
    spatial(spatial, 0, 1, 1);
  }
  if (l == lanes_level && spec_.reduce_orders && out.size() > 1) {
    if (spatial_dead)  // the first of equals as the one-pass order has it: (x, y, t) rank by rank, ascending
      std::sort(out.begin(), out.end(), [&](const LevelChoice& a, const LevelChoice& b) {
        for (int r = 0; r < R; ++r) {
          if (a.x[r] != b.x[r]) return a.x[r] < b.x[r];
          if (a.y[r] != b.y[r]) return a.y[r] < b.y[r];
          if (a.t[r] != b.t[r]) return a.t[r] < b.t[r];
        }
        return false;
      });
    // Same factor per rank (loops x lanes) = same tile, same accesses (each operation reads and
    // writes the level itself); same lanes used = same cycles (copies may use fewer): keep the first.
    std::set<std::array<int64_t, kMaxRanks + 1>> seen;
    std::erase_if(out, [&](const LevelChoice& ch) {
      std::array<int64_t, kMaxRanks + 1> n{};
      n[kMaxRanks] = 1;
      for (int r = 0; r < R; ++r) n[r] = ch.t[r] * ch.x[r] * ch.y[r], n[kMaxRanks] *= ch.x[r] * ch.y[r];
      return !seen.insert(n).second;
    });
  }
}

// Does level l hold its kept tiles for the chosen inner levels (its tile spans levels <= l)?
bool TileSearch::fits(const LevelChoice* chosen, int l) const {
  int64_t below[kMaxRanks];
  for (int r = 0; r < R; ++r) {
    below[r] = 1;
    for (int i = 0; i < l; ++i) below[r] *= chosen[i].t[r] * chosen[i].x[r] * chosen[i].y[r];
  }
  return fits(below, chosen[l], l);
}

bool TileSearch::fits(const int64_t* below, const LevelChoice& ch, int l) const {
  const Level& lv = c_.levels[l];
  if (lv.entries == 0) return true;
  return kept_words(below, ch) * lv.multiple_buffering <= lv.entries;
}

int64_t TileSearch::kept_words(const int64_t* below, const LevelChoice& ch) const {
  int64_t ext[kMaxRanks + 1];  // + the plan's pad slot (dim_extent)
  ext[kMaxRanks] = 1;
  for (int r = 0; r < R; ++r) ext[r] = below[r] * ch.t[r] * ch.x[r] * ch.y[r];
  for (int r = R; r < kMaxRanks; ++r) ext[r] = 1;
  // The plan's flat projections, not the Einsum's nested vectors: this runs for every choice.
  int64_t words = 0;
  for (int t = 0; t < T; ++t) {
    if (!(ch.keep >> t & 1)) continue;
    const PlanTensor& pt = plan_.tensors[static_cast<size_t>(t)];
    int64_t v = 1;
    for (int d = 0; d < pt.n_dims; ++d) v *= dim_extent(pt.dims[d], ext);
    words += v;
  }
  return words;
}

double TileSearch::temporal_mapspace_size() const {
  double size = 1;
  for (int r = 0; r < R; ++r) {
    // ways[n]: splits of n over the levels done so far (innermost first), by divisor of the size.
    const std::vector<int64_t>& ds = divs(e_.ranks[r].size);
    std::unordered_map<int64_t, double> ways{{1, 1.0}};
    for (int l = 0; l < L; ++l) {
      std::unordered_map<int64_t, double> next;
      for (const auto& [n, w] : ways)
        for (int64_t d : ds)
          if (d >= t_min[l][r] && d <= t_max[l][r] && e_.ranks[r].size % (n * d) == 0) next[n * d] += w;
      ways = std::move(next);
    }
    size *= ways.count(e_.ranks[r].size) ? ways[e_.ranks[r].size] : 0.0;
  }
  for (int l = 0; l < L; ++l) size *= static_cast<double>(keep_options[l].size());
  return size;
}

int TileSearch::most_orders_level() const {
  int best = L - 1, most = -1;
  for (int l = 0; l < L; ++l) {
    if (const LevelConstraints* lc = constraint(l); lc && lc->order) continue;
    int n = 0;
    for (int r = 0; r < R; ++r) n += t_max[l][r] > 1;
    if (n > most) most = n, best = l;
  }
  return best;
}

}  // namespace mapfuse
