#include "engine/search/random_mapping.hpp"

#include <algorithm>
#include <array>

namespace mapfuse {


Mapping random_mapping(const Einsum& e, const Core& core, std::mt19937_64& rng,
                       const RandomMappingOptions& opt) {
  const Core& c = core_for(core, e);
  const int L = static_cast<int>(c.levels.size());
  const int R = static_cast<int>(e.ranks.size());
  // factor[l][kind][r]: kind 0 temporal, 1 spatial X, 2 spatial Y.
  std::vector<std::array<std::vector<int64_t>, 3>> factor(L);
  for (auto& lv : factor)
    for (auto& k : lv) k.assign(R, 1);
  std::vector<std::array<int64_t, 2>> used(L, {1, 1});
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  auto constraint = [&](int l) -> const LevelConstraints* {
    return opt.space && l < static_cast<int>(opt.space->levels.size()) ? &opt.space->levels[l] : nullptr;
  };
  // Prime factors of every rank; axes with a minimum use (min_usage) take theirs first, drawn at
  // random from the ranks they accept, so that samples on such architectures are mostly valid.
  std::vector<std::vector<int64_t>> primes(R);
  for (int r = 0; r < R; ++r) primes[r] = prime_factors(e.ranks[r].size);
  for (int l = 0; l < L; ++l)
    for (int a = 0; a < 2; ++a) {
      const Fanout& f = c.levels[l].fanout;
      const LoopKind axis = a == 0 ? LoopKind::SpatialX : LoopKind::SpatialY;
      const int64_t need = min_axis_use(f, axis, e), cap = a == 0 ? f.x : f.y;
      while (used[l][a] < need) {
        std::vector<std::pair<int, size_t>> options;  // (rank, index of a prime)
        for (int r = 0; r < R; ++r)
          if (axis_accepts(f, axis, e, r))
            for (size_t i = 0; i < primes[r].size(); ++i)
              if (used[l][a] * primes[r][i] <= cap) options.push_back({r, i});
        if (options.empty()) break;
        const auto [r, i] = options[std::uniform_int_distribution<size_t>(0, options.size() - 1)(rng)];
        factor[l][a + 1][r] *= primes[r][i];
        used[l][a] *= primes[r][i];
        primes[r].erase(primes[r].begin() + static_cast<std::ptrdiff_t>(i));
      }
    }
  for (int r = 0; r < R; ++r) {
    // Levels whose temporal loops may iterate r (a fixed order lists the ranks it allows).
    std::vector<int> temporal_levels;
    for (int l = 0; l < L; ++l) {
      const LevelConstraints* lc = constraint(l);
      if (!lc || !lc->order || std::find(lc->order->begin(), lc->order->end(), r) != lc->order->end())
        temporal_levels.push_back(l);
    }
    for (int64_t p : primes[r]) {
      struct Slot { int l, kind; };
      std::vector<Slot> spatial;
      for (int l = 0; l < L; ++l)
        for (int a = 0; a < 2; ++a) {
          const LevelConstraints* lc = constraint(l);
          const std::optional<uint32_t>& only = a == 0 ? (lc ? lc->spatial_x : std::nullopt) : (lc ? lc->spatial_y : std::nullopt);
          if (used[l][a] * p <= (a == 0 ? c.levels[l].fanout.x : c.levels[l].fanout.y) &&
              axis_accepts(c.levels[l].fanout, a == 0 ? LoopKind::SpatialX : LoopKind::SpatialY, e, r) && (!only || (*only >> r & 1)))
            spatial.push_back({l, a + 1});
        }
      if (!spatial.empty() && (temporal_levels.empty() || u01(rng) < opt.spatial_bias)) {
        Slot s = spatial[std::uniform_int_distribution<size_t>(0, spatial.size() - 1)(rng)];
        factor[s.l][s.kind][r] *= p;
        used[s.l][s.kind - 1] *= p;
      } else if (static_cast<int>(temporal_levels.size()) == L) {
        int l = std::uniform_int_distribution<int>(0, L - 1)(rng);
        factor[l][0][r] *= p;
      } else {
        // No allowed slot at all: the outermost level takes it (the sample then breaks the
        // constraints and is rejected by the caller).
        const int l = temporal_levels.empty() ? L - 1
                                              : temporal_levels[std::uniform_int_distribution<size_t>(0, temporal_levels.size() - 1)(rng)];
        factor[l][0][r] *= p;
      }
    }
  }
  Mapping m;
  m.levels.resize(L);
  for (int l = 0; l < L; ++l) {
    const LevelConstraints* lc = constraint(l);
    std::vector<int> order(R);
    for (int r = 0; r < R; ++r) order[r] = r;
    if (lc && lc->order) {
      order = *lc->order;
      for (int r = 0; r < R; ++r)  // ranks it does not list go outermost (and break the constraint)
        if (factor[l][0][r] > 1 && std::find(order.begin(), order.end(), r) == order.end()) order.insert(order.begin(), r);
    } else {
      std::shuffle(order.begin(), order.end(), rng);
    }
    for (int r : order)
      if (factor[l][0][r] > 1) m.levels[l].loops.push_back({r, factor[l][0][r], LoopKind::Temporal});
    for (int k = 1; k <= 2; ++k)
      for (int r = 0; r < R; ++r)
        if (factor[l][k][r] > 1)
          m.levels[l].loops.push_back({r, factor[l][k][r], k == 1 ? LoopKind::SpatialX : LoopKind::SpatialY});
    if (lc && lc->keep && l != L - 1) {
      m.levels[l].keep = static_cast<TensorMask>(*lc->keep);
      continue;
    }
    for (size_t t = 0; t < e.tensors.size(); ++t) {
      const bool allowed = c.levels[l].may_keep & role_bit(e.tensors[t].role);
      const bool must = c.levels[l].must_keep & role_bit(e.tensors[t].role);
      const bool keep = l == L - 1 || must || (allowed && (!opt.random_bypass || u01(rng) < 0.7));
      if (keep) m.levels[l].keep |= static_cast<TensorMask>(1u << t);
    }
  }
  return m;
}

}  // namespace mapfuse
