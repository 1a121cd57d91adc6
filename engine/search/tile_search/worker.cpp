// The enumeration of a search's levels, innermost first (descend: factors, kept sets, capacity
// and bound pruning), and TileWorker's entry points.
#include <stdexcept>

#include "engine/search/tile_search/worker_state.hpp"

namespace mapfuse {

void TileWorker::State::descend(int l, const std::array<int64_t, kMaxRanks>& remaining) {
  if (s->over()) return;
  if (l == s->L) {
    park();
    return;
  }
  std::vector<LevelChoice>& choices = scratch[l];  // this depth's buffer, reused
  if (s->spec_.bound_scalar) {
    // Branch and bound: a level's spatial factors alone bound the compute steps and what serving
    // compute costs, whatever its temporal factors and kept set; beaten ones are not expanded.
    const auto spatial_beaten = [&](const LevelChoice& spatial) {
      chosen[l] = spatial;
      std::array<int64_t, kMaxRanks> rest = remaining;
      for (int r = 0; r < s->R; ++r) rest[r] /= spatial.x[r] * spatial.y[r];
      double energy = 0, cycles = 0;
      s->scalar_bounds(chosen.data(), l, rest, energy, cycles, true);
      const bool beaten = sink->beaten(energy, cycles, -1, 0);
      owner->bound_pruned[static_cast<size_t>(l)] += beaten;
      return beaten;
    };
    using Beaten = decltype(spatial_beaten);
    const TileSearch::SpatialFilter dead{
        &spatial_beaten, [](const void* f, const LevelChoice& ch) { return (*static_cast<const Beaten*>(f))(ch); }};
    s->level_choices(l, remaining, choices, &dead);
  } else {
    s->level_choices(l, remaining, choices);
  }
  for (const LevelChoice& ch : choices) {
    std::array<int64_t, kMaxRanks> rest = remaining;
    for (int r = 0; r < s->R; ++r) rest[r] /= ch.t[r] * ch.x[r] * ch.y[r];
    for (TensorMask keep : s->keep_options[l]) {
      if (l == top_filter && top_beaten(ch, keep)) {
        ++owner->fanout_skipped;
        continue;
      }
      chosen[l] = ch;
      chosen[l].keep = keep;
      if (!s->admissible(chosen[l], l)) continue;
      if (s->spec_.prune && !s->fits(chosen.data(), l)) {
        ++owner->pruned;
        continue;
      }
      if (s->spec_.bound_scalar && bound_beaten(l, rest)) {
        ++owner->bound_pruned[static_cast<size_t>(l)];
        continue;
      }
      descend(l + 1, rest);
    }
  }
}

TileWorker::TileWorker() : st_(std::make_unique<State>()) { st_->owner = this; }
TileWorker::~TileWorker() = default;

void TileWorker::prune(const TileSearch& s, PartialChoices& out) {
  if (!s.partial_pruning()) throw std::logic_error("TileWorker::prune: the search has no partial pruning");
  st_->bind(s, nullptr);
  out = {};
  if (!s.over()) st_->prune_levels(out);
}

void TileWorker::complete(const TileSearch& s, const PartialChoices& p, size_t begin, size_t end, TileSink& sink) {
  st_->bind(s, &sink);
  if (!s.over()) st_->complete(p, begin, std::min(end, p.size()));
}

void TileWorker::run(const TileSearch& s, size_t i, TileSink& sink) {
  State& st = *st_;
  st.bind(s, &sink);
  if (s.over()) return;
  const LevelChoice& root = s.roots_[i];
  st.chosen[0] = root;
  if (s.spec_.prune && !s.fits(st.chosen.data(), 0)) {
    ++pruned;
    return;
  }
  std::array<int64_t, kMaxRanks> rest{};
  for (int r = 0; r < s.R; ++r) rest[r] = s.e_.ranks[r].size / (root.t[r] * root.x[r] * root.y[r]);
  if (s.spec_.bound_scalar && st.bound_beaten(0, rest)) {
    ++bound_pruned[0];
    return;
  }
  st.descend(1, rest);
}

void TileWorker::finish() {
  if (st_->s) st_->flush_all();
}

}  // namespace mapfuse
