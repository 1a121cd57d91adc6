#include "engine/search/mapspace.hpp"

#include <algorithm>
#include <array>

namespace mapfuse {

bool satisfies(const Mapping& m, const Mapspace& space) {
  const size_t L = std::min(m.levels.size(), space.levels.size());
  for (size_t l = 0; l < L; ++l) {
    const LevelConstraints& lc = space.levels[l];
    const LevelMapping& lm = m.levels[l];
    if (lc.keep && lm.keep != *lc.keep) return false;
    std::array<int64_t, kMaxRanks> temporal;
    temporal.fill(1);
    size_t next = 0;  // position in the fixed order the next temporal loop may take
    for (const Loop& lp : lm.loops) {
      if (lp.factor == 1) continue;
      if (lp.kind == LoopKind::SpatialX && lc.spatial_x && !(*lc.spatial_x >> lp.rank & 1)) return false;
      if (lp.kind == LoopKind::SpatialY && lc.spatial_y && !(*lc.spatial_y >> lp.rank & 1)) return false;
      if (lp.kind != LoopKind::Temporal) continue;
      temporal[lp.rank] *= lp.factor;
      if (lc.order) {
        while (next < lc.order->size() && (*lc.order)[next] != lp.rank) ++next;
        if (next == lc.order->size()) return false;  // not listed, or out of order
        ++next;
      }
    }
    for (size_t r = 0; r < kMaxRanks; ++r) {
      if (r < lc.min_factor.size() && lc.min_factor[r] && temporal[r] < *lc.min_factor[r]) return false;
      if (r < lc.max_factor.size() && lc.max_factor[r] && temporal[r] > *lc.max_factor[r]) return false;
    }
  }
  return true;
}

std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> small, large;
  for (int64_t d = 1; d * d <= n; ++d)
    if (n % d == 0) {
      small.push_back(d);
      if (d * d != n) large.push_back(n / d);
    }
  small.insert(small.end(), large.rbegin(), large.rend());
  return small;
}

}  // namespace mapfuse
