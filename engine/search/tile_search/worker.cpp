// The enumeration of a search's levels, innermost first (descend: factors, kept sets, capacity
// and bound pruning), and TileWorker's entry points.
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "engine/search/tile_search/worker_state.hpp"

namespace mapfuse {

bool TileWorker::State::allowed(int l, const LevelChoice& ch, TensorMask keep) {
  if (l == top_filter && top_beaten(ch, keep)) {
    ++owner->fanout_skipped;
    return false;
  }
  chosen[l] = ch;
  chosen[l].keep = keep;
  if (!s->admissible(chosen[l], l)) return false;
  if (s->spec_.prune && !s->fits(below_ext[static_cast<size_t>(l)].data(), chosen[l], l)) {
    ++owner->pruned;
    return false;
  }
  return true;
}

bool TileWorker::State::admit(int l, const LevelChoice& ch, TensorMask keep, const std::array<int64_t, kMaxRanks>& rest) {
  if (!allowed(l, ch, keep)) return false;
  if (s->spec_.bound_scalar && bound_beaten(l, rest)) {
    ++owner->bound_pruned[static_cast<size_t>(l)];
    return false;
  }
  return true;
}

void TileWorker::State::make_split_sets() {
  split_sets.clear();
  split_full_words.clear();
  const int b = s->spec_.backing_level;
  if (!s->spec_.bound_scalar || b <= 0 || b >= s->L - 1 || b != s->top) return;
  const std::vector<TensorMask>& keeps = s->keep_options[static_cast<size_t>(b)];
  if (keeps.size() < 2) return;
  LevelChoice whole;
  whole.t.fill(1);
  whole.x.fill(1);
  whole.y.fill(1);
  int64_t sizes[kMaxRanks];
  for (int r = 0; r < s->R; ++r) sizes[r] = s->e_.ranks[static_cast<size_t>(r)].size;
  for (TensorMask k : keeps) {
    split_sets.emplace_back();
    s->fix_keep(b, k, split_sets.back());
    whole.keep = static_cast<TensorMask>(k & ~s->spec_.onchip_backing);
    split_full_words.push_back(s->kept_words(sizes, whole));
  }
}

bool TileWorker::State::split_beaten(int l, const std::array<int64_t, kMaxRanks>& rest, bool open_keep,
                                     bool open_temporal, double& energy, double& cycles, KeepBound* out) {
  const int b = s->spec_.backing_level;
  summarize(l, chosen[static_cast<size_t>(l)]);
  bool all = true;
  energy = cycles = std::numeric_limits<double>::infinity();
  const int m = static_cast<int>(split_sets.size());
  keep_energy.resize(split_sets.size());
  keep_cycles.resize(split_sets.size());
  s->scalar_bounds_keeps(chosen.data(), sums.data(), l, rest, &chosen[static_cast<size_t>(l)].keep, 1,
                         keep_energy.data(), keep_cycles.data(), open_temporal, split_sets.data(), m, b, open_keep);
  for (size_t j = 0; j < split_sets.size(); ++j) {
    const double e = keep_energy[j], c = keep_cycles[j];
    const int64_t words = split_full_words[j];
    const bool beat = sink->beaten(e, c, b, words);
    if (out) out[j] = {e, c, beat ? -2 : b, words};
    if (!beat) {
      all = false;
      energy = std::min(energy, e);
      cycles = std::min(cycles, c);
    }
  }
  last_level = -1;  // a single bound for the choice: its least over the kept sets, no reservation
  last_words = 0;
  return all;
}

bool TileWorker::State::split_still_beaten(const KeepBound* kb) {
  for (size_t j = 0; j < split_sets.size(); ++j)
    if (kb[j].level != -2 && !sink->beaten(kb[j].energy, kb[j].cycles, kb[j].level, kb[j].words)) return false;
  return true;
}

void TileWorker::State::admit_keeps(int l, const LevelChoice& ch, const std::array<int64_t, kMaxRanks>& rest,
                                    const uint8_t* skip) {
  const std::vector<TensorMask>& keeps = s->keep_options[l];
  const size_t n = keeps.size();
  std::vector<uint8_t>& ok = keep_ok[static_cast<size_t>(l)];
  std::vector<KeepBound>& kb = keep_bound[static_cast<size_t>(l)];
  ok.assign(n, 0);
  kb.resize(n);
  keep_masks.clear();
  for (size_t i = 0; i < n; ++i) {
    if ((skip && skip[i]) || !allowed(l, ch, keeps[i])) continue;
    ok[i] = 1;
    keep_masks.push_back(keeps[i]);
  }
  if (!s->spec_.bound_scalar || keep_masks.empty()) return;
  const int m = static_cast<int>(keep_masks.size());
  chosen[l] = ch;
  summarize(l, ch);
  if (split_at(l)) {
    // Per kept set j of the backing level: every kept set i of level l at once.
    const size_t nj = split_sets.size();
    std::vector<KeepBound>& split = keep_split[static_cast<size_t>(l)];
    split.resize(n * nj);
    keep_energy.resize(keep_masks.size() * nj);
    keep_cycles.resize(keep_masks.size() * nj);
    const int b = s->spec_.backing_level;
    s->scalar_bounds_keeps(chosen.data(), sums.data(), l, rest, keep_masks.data(), m, keep_energy.data(),
                           keep_cycles.data(), false, split_sets.data(), static_cast<int>(nj), b);
    for (size_t i = 0, k = 0; i < n; ++i) {
      if (!ok[i]) continue;
      for (size_t j = 0; j < nj; ++j) {
        const double e = keep_energy[k * nj + j], c = keep_cycles[k * nj + j];
        const int64_t words = split_full_words[j];
        split[i * nj + j] = {e, c, sink->beaten(e, c, b, words) ? -2 : b, words};
      }
      ++k;
    }
    for (size_t i = 0; i < n; ++i) {
      if (!ok[i]) continue;
      KeepBound& b = kb[i];
      b = {std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity(), -1, 0};
      for (size_t j = 0; j < nj; ++j)
        if (const KeepBound& x = split[i * nj + j]; x.level != -2) {
          b.energy = std::min(b.energy, x.energy);
          b.cycles = std::min(b.cycles, x.cycles);
        }
      if (std::isinf(b.energy)) {
        ++owner->bound_pruned[static_cast<size_t>(l)];
        ok[i] = 0;
      }
    }
    return;
  }
  keep_energy.resize(keep_masks.size());
  keep_cycles.resize(keep_masks.size());
  s->scalar_bounds_keeps(chosen.data(), sums.data(), l, rest, keep_masks.data(), m, keep_energy.data(),
                         keep_cycles.data());
  for (size_t i = 0, j = 0; i < n; ++i) {
    if (!ok[i]) continue;
    KeepBound& b = kb[i];
    b.energy = keep_energy[j];
    b.cycles = keep_cycles[j++];
    chosen[l].keep = keeps[i];
    backing_words(l, b.level, b.words);
    if (sink->beaten(b.energy, b.cycles, b.level, b.words)) {
      ++owner->bound_pruned[static_cast<size_t>(l)];
      ok[i] = 0;
    }
  }
}

void TileWorker::State::descend(int l, const std::array<int64_t, kMaxRanks>& remaining) {
  if (s->over() || (probing && probe_done())) return;
  if (l == s->L) {
    park();
    // Branch and bound cuts nothing before a first mapping is known: until then each choice is
    // evaluated as soon as it is parked instead of waiting for a full bucket (and so is a
    // probe's, which should set the incumbent before the search).
    if (s->spec_.bound_scalar && (!sink->has_incumbent() || probing)) flush_all();
    return;
  }
  std::vector<LevelChoice>& choices = scratch[l];  // this depth's buffer, reused
  {
    // Once per node, from all the levels below (callers other than descend set chosen[0..l) too).
    std::array<int64_t, kMaxRanks>& ext = below_ext[static_cast<size_t>(l)];
    for (int r = 0; r < s->R; ++r) {
      ext[r] = 1;
      for (int m = 0; m < l; ++m) ext[r] *= chosen[m].t[r] * chosen[m].x[r] * chosen[m].y[r];
    }
  }
  if (s->spec_.bound_scalar) {
    // Levels below l are fixed under this call: the bounds reuse their summaries.
    if (l > 0) summarize(l - 1, chosen[static_cast<size_t>(l - 1)]);
    // So is the reservation at the backing level, if it is below l (for bounds of level l's open tile).
    backing_words(l - 1, open_level[static_cast<size_t>(l)], open_words[static_cast<size_t>(l)]);
    // Branch and bound: a level's spatial factors alone bound the compute steps and what serving
    // compute costs, whatever its temporal factors and kept set; beaten ones are not expanded.
    const auto spatial_beaten = [&](const LevelChoice& spatial) {
      chosen[l] = spatial;
      std::array<int64_t, kMaxRanks> rest = remaining;
      for (int r = 0; r < s->R; ++r) rest[r] /= spatial.x[r] * spatial.y[r];
      double energy = 0, cycles = 0;
      bool beaten;
      if (split_at(l)) {
        beaten = split_beaten(l, rest, true, false, energy, cycles);
      } else {
        bounds_of(l, rest, energy, cycles, true);
        beaten = sink->beaten(energy, cycles, open_level[static_cast<size_t>(l)], open_words[static_cast<size_t>(l)]);
      }
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
  if (s->symmetric() && mirror_tied[static_cast<size_t>(l)])
    choices.erase(std::remove_if(choices.begin(), choices.end(),
                                 [&](const LevelChoice& ch) { return s->mirror_cmp(ch) > 0; }),
                  choices.end());
  if (s->spec_.max_work > 0) s->add_work(static_cast<int64_t>(choices.size()) + 1, sink->has_incumbent());
  if (probing) {
    descend_probe(l, remaining, choices);
    return;
  }
  if (s->spec_.bound_scalar && s->spec_.best_first) {
    descend_best_first(l, remaining, choices);
    return;
  }
  const std::vector<TensorMask>& keeps = s->keep_options[l];
  for (const LevelChoice& ch : choices) {
    std::array<int64_t, kMaxRanks> rest = remaining;
    for (int r = 0; r < s->R; ++r) rest[r] /= ch.t[r] * ch.x[r] * ch.y[r];
    const bool b_next = split_at(l) && l + 1 == s->spec_.backing_level;
    admit_keeps(l, ch, rest, l == s->spec_.backing_level && b_dead_set ? b_dead.data() : nullptr);
    for (size_t i = 0; i < keeps.size(); ++i) {
      if (!keep_ok[static_cast<size_t>(l)][i]) continue;  // (descend(l + 1) leaves level l's buffers alone)
      if (b_next) inherit_b_dead(&keep_split[static_cast<size_t>(l)][i * split_sets.size()]);
      const KeepBound& b = keep_bound[static_cast<size_t>(l)][i];
      chosen[l] = ch;
      chosen[l].keep = keeps[i];
      last_energy_lb = b.energy;
      last_cycles_lb = b.cycles;
      last_level = b.level;
      last_words = b.words;
      mirror_tied[static_cast<size_t>(l) + 1] = mirror_tied[static_cast<size_t>(l)] && s->mirror_cmp(ch) == 0;
      descend(l + 1, rest);
    }
  }
}

void TileWorker::State::extend(int l, const std::array<int64_t, kMaxRanks>& remaining, const LevelChoice& ch,
                               const Ranked& rk) {
  std::array<int64_t, kMaxRanks> rest = remaining;
  for (int r = 0; r < s->R; ++r) rest[r] /= ch.t[r] * ch.x[r] * ch.y[r];
  chosen[l] = ch;
  chosen[l].keep = rk.keep;
  last_energy_lb = rk.energy;
  last_cycles_lb = rk.cycles;
  last_level = rk.level;
  last_words = rk.words;
  mirror_tied[static_cast<size_t>(l) + 1] = mirror_tied[static_cast<size_t>(l)] && s->mirror_cmp(ch) == 0;
  if (l + 1 == s->spec_.backing_level) {
    b_dead_set = false;
    if (rk.split != kNoSplit) inherit_b_dead(&ranked_split[static_cast<size_t>(l)][rk.split]);
  }
  descend(l + 1, rest);
}

// The kept-set bound of a spatial set (descend_best_first) is made only for sets with at least
// this many temporal choices.
constexpr size_t kKeepBoundMinChoices = 32;

void TileWorker::State::descend_best_first(int l, const std::array<int64_t, kMaxRanks>& remaining,
                                           const std::vector<LevelChoice>& choices) {
  // Every admissible choice that fits is bounded first, then extended in the order of its bound
  // under the sink's objective: the most promising subtree is searched first, so a good incumbent
  // comes early and cuts the rest. Each is bounded again when its turn comes (the incumbent may
  // have improved meanwhile). Ties keep the enumeration order, so the order is deterministic.
  std::vector<Ranked>& ranked = ranked_at[static_cast<size_t>(l)];
  ranked.clear();
  ranked_split[static_cast<size_t>(l)].clear();
  // level_choices gives the temporal choices of one set of spatial factors one after another. Per
  // set and kept set, one bound with the level's temporal factors left to the levels above (a
  // lower bound for every temporal choice: the tile and the inner iterations only move from the
  // level to the rest) skips the kept sets it beats for every temporal choice at once.
  const std::vector<TensorMask>& keeps = s->keep_options[l];
  std::vector<uint8_t>& keep_dead = keep_dead_at[static_cast<size_t>(l)];
  keep_dead.assign(keeps.size(), 0);
  if (l == s->spec_.backing_level && b_dead_set) keep_dead = b_dead;  // beaten below b (split_at)
  FanoutKey spatial_set{};
  bool have_set = false;
  for (size_t i = 0; i < choices.size(); ++i) {
    const LevelChoice& ch = choices[i];
    // Only worth it for a set with several temporal choices (the top level has one per set; so do
    // many levels of Stream's seven-level cores, where the extra bound cost 15 % of the time).
    if (const FanoutKey fk = fanout_key(ch, s->R); l < s->top && (!have_set || fk != spatial_set)) {
      spatial_set = fk;
      have_set = true;
      size_t end = i + 1;
      while (end < choices.size() && end - i < kKeepBoundMinChoices && fanout_key(choices[end], s->R) == fk) ++end;
      std::fill(keep_dead.begin(), keep_dead.end(), 0);
      if (end - i >= kKeepBoundMinChoices) {
        std::array<int64_t, kMaxRanks> open_rest = remaining;
        for (int r = 0; r < s->R; ++r) open_rest[r] /= ch.x[r] * ch.y[r];
        chosen[l] = ch;
        chosen[l].t.fill(1);
        summarize(l, chosen[l]);
        // Split by the backing level's kept sets (split_at): beaten when every one of them is.
        const bool split = split_at(l);
        const size_t nj = split ? split_sets.size() : 1;
        const int b = s->spec_.backing_level;
        keep_energy.resize(keeps.size() * nj);
        keep_cycles.resize(keeps.size() * nj);
        s->scalar_bounds_keeps(chosen.data(), sums.data(), l, open_rest, keeps.data(), static_cast<int>(keeps.size()),
                               keep_energy.data(), keep_cycles.data(), true, split ? split_sets.data() : nullptr,
                               static_cast<int>(nj), split ? b : -1);
        for (size_t ki = 0; ki < keeps.size(); ++ki) {
          keep_dead[ki] = 1;
          for (size_t j = 0; j < nj && keep_dead[ki]; ++j)
            keep_dead[ki] = sink->beaten(keep_energy[ki * nj + j], keep_cycles[ki * nj + j],
                                         split ? b : open_level[static_cast<size_t>(l)],
                                         split ? split_full_words[j] : open_words[static_cast<size_t>(l)]);
        }
      }
    }
    std::array<int64_t, kMaxRanks> rest = remaining;
    for (int r = 0; r < s->R; ++r) rest[r] /= ch.t[r] * ch.x[r] * ch.y[r];
    for (size_t ki = 0; ki < keeps.size(); ++ki) owner->bound_pruned[static_cast<size_t>(l)] += keep_dead[ki];
    admit_keeps(l, ch, rest, keep_dead.data());
    const bool split = split_at(l);
    for (size_t ki = 0; ki < keeps.size(); ++ki) {
      if (!keep_ok[static_cast<size_t>(l)][ki]) continue;
      const KeepBound& b = keep_bound[static_cast<size_t>(l)][ki];
      ranked.push_back({sink->priority(b.energy, b.cycles), b.energy, b.cycles, static_cast<uint32_t>(i), keeps[ki],
                        0.0, b.level, b.words});
      if (split) {
        std::vector<KeepBound>& to = ranked_split[static_cast<size_t>(l)];
        ranked.back().split = static_cast<uint32_t>(to.size());
        const KeepBound* from = &keep_split[static_cast<size_t>(l)][ki * split_sets.size()];
        to.insert(to.end(), from, from + split_sets.size());
      }
    }
  }
  // Bounds that tie on the priority (the fewest cycles of Stream's per-tile criterion: most
  // choices share the compute-bound cycles) go by the energy bound, then the cycles bound.
  std::stable_sort(ranked.begin(), ranked.end(), Ranked::by_bound);
  // descend() below reuses deeper buffers only, so `ranked` and `choices` stay valid.
  for (const Ranked& rk : ranked) {
    if (s->over()) return;
    if (ranked_beaten(l, rk)) {
      ++owner->bound_pruned[static_cast<size_t>(l)];
      continue;
    }
    extend(l, remaining, choices[rk.choice], rk);
  }
}

void TileWorker::State::descend_probe(int l, const std::array<int64_t, kMaxRanks>& remaining,
                                      const std::vector<LevelChoice>& choices) {
  // A probe dives to good mappings to set the incumbent early, so it takes each level's choices
  // that spread over the most instances of its fan-out first (a compute-bound CT's cycles are its
  // MACs over the PEs used: a probe that filled buffers first found 4-36x the least cycles on
  // FSRCNN's whole layers on Stream's WS cores), then those that keep the most words at the level,
  // then the best bound. Lower bounds
  // alone leave every loop to the levels above, which can still take it, and such a dive ends with
  // all of them at the top (on Gemmini's stride-2 ResNet-18 layers, mappings 10x the optimum's
  // EDP, which cut little). Only the kProbeWidth first choices are bounded: one level of a large
  // layer offers 10^5 choices (VGG-16's conv2 at Gemmini's accumulator: 180,432).
  std::vector<Ranked>& ranked = ranked_at[static_cast<size_t>(l)];
  ranked.clear();
  const Level& lv = s->c_.levels[static_cast<size_t>(l)];
  const int64_t* below = below_ext[static_cast<size_t>(l)].data();
  for (size_t i = 0; i < choices.size(); ++i)
    for (TensorMask keep : s->keep_options[l]) {
      LevelChoice ch = choices[i];
      ch.keep = keep;
      if (!s->admissible(ch, l)) continue;
      const int64_t words = s->kept_words(below, ch);
      if (lv.entries != 0 && words * lv.multiple_buffering > lv.entries) continue;
      int64_t instances = 1;  // the level's spatial instances: the probe's first order
      for (int r = 0; r < s->R; ++r) instances *= ch.x[r] * ch.y[r];
      ranked.push_back({0, 0, 0, static_cast<uint32_t>(i), keep, -static_cast<double>(words)});
      ranked.back().spread = instances;
    }
  // The most spread, then the fullest; ties keep the enumeration order, so the probe is deterministic.
  const auto fuller = [](const Ranked& a, const Ranked& b) {
    if (a.spread != b.spread) return a.spread > b.spread;
    if (a.fill != b.fill) return a.fill < b.fill;
    if (a.choice != b.choice) return a.choice < b.choice;
    return a.keep < b.keep;
  };
  const size_t width = std::min(ranked.size(), kProbeWidth);
  std::partial_sort(ranked.begin(), ranked.begin() + static_cast<std::ptrdiff_t>(width), ranked.end(), fuller);
  ranked.resize(width);
  size_t kept = 0;
  for (const Ranked& rk : ranked) {
    const LevelChoice& ch = choices[rk.choice];
    std::array<int64_t, kMaxRanks> rest = remaining;
    for (int r = 0; r < s->R; ++r) rest[r] /= ch.t[r] * ch.x[r] * ch.y[r];
    if (!admit(l, ch, rk.keep, rest)) continue;
    ranked[kept++] = {sink->priority(last_energy_lb, last_cycles_lb), last_energy_lb, last_cycles_lb, rk.choice,
                      rk.keep, rk.fill, last_level, last_words, kNoSplit, rk.spread};
  }
  ranked.resize(kept);
  probe_work += static_cast<int64_t>(width);
  std::stable_sort(ranked.begin(), ranked.end(), [](const Ranked& a, const Ranked& b) {
    if (a.spread != b.spread) return a.spread > b.spread;
    return a.fill != b.fill ? a.fill < b.fill : Ranked::by_bound(a, b);
  });
  for (const Ranked& rk : ranked) {
    if (s->over() || probe_done()) return;
    if (sink->beaten(rk.energy, rk.cycles, rk.level, rk.words)) continue;
    extend(l, remaining, choices[rk.choice], rk);
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
  // Mirror symmetry: a root above its mirror image is searched as that image.
  if (s.symmetric() && s.mirror_cmp(root) > 0) return;
  st.mirror_tied[0] = true;
  st.mirror_tied[1] = s.mirror_cmp(root) == 0;
  st.b_dead_set = false;
  st.chosen[0] = root;
  st.below_ext[0].fill(1);  // nothing below the innermost level (backing_words at b = 0)
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

int64_t TileWorker::probe(const TileSearch& s, size_t i, TileSink& sink) {
  st_->probing = true;
  st_->probe_until = evaluated + State::kProbeLeaves;
  st_->probe_work = 0;
  run(s, i, sink);
  st_->flush_all();
  st_->probing = false;
  return st_->probe_work + 1;
}

void TileWorker::finish() {
  if (st_->s) st_->flush_all();
}

}  // namespace mapfuse
