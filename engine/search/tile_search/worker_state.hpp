#pragma once
// Internal to engine/search/tile_search/: a TileWorker's state (buckets, caches, partial choices,
// bounds) shared by the parts of the search, each in its own file:
//   orders.cpp    loop-order classes (reuse-distinct orders) and the minimal orders bounds try
//   evaluate.cpp  parking complete choices in buckets by support; SIMD evaluation of a bucket
//   worker.cpp    the enumeration of levels innermost first (descend) and TileWorker's entry points
//   partial.cpp   partial pruning: inner-level choices compared on every count, level by level
//   bounds.cpp    lower bounds: scalar (branch and bound) and completion bounds per outer fan-out
//   checks.cpp    testing hooks that hold the bounds and classifications against the lanes
// Nothing outside this folder includes it.
#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/search/tile_search/tile_search.hpp"

namespace mapfuse {

// A window dimension's extent for a tile whose per-rank extents are `cum`: 1 + sum coeff * (extent
// - 1), a box around the projections (exact for one term; for several, what the model counts).
double window_extent(const PlanDim& dim, const double* cum);
namespace tile_search_detail {

struct Support {
  std::array<uint32_t, kMaxLevels> w{};
  std::array<uint32_t, kMaxLevels> o{};
  bool operator==(const Support&) const = default;
};
// Parked choices live in one pool per worker: bucket i holds kLanes choices of W = 3 * L * R
// factors each (slot order of TileCandidate). The pool bounds how many buckets may be live at once
// (partial ones are then flushed); more live buckets fill more lanes when supports are many.
inline constexpr size_t kPoolWords = size_t{4} << 20;  // 16 MB per worker
// A level's spatial factors: x per rank, then y per rank (1 = none).
using FanoutKey = std::array<int64_t, 2 * kMaxRanks>;
inline FanoutKey fanout_key(const LevelChoice& ch, int R) {
  FanoutKey k;
  k.fill(1);
  for (int r = 0; r < R; ++r) {
    k[static_cast<size_t>(r)] = ch.x[r];
    k[static_cast<size_t>(kMaxRanks + r)] = ch.y[r];
  }
  return k;
}
// A level's choice as the bounds classify it: spatial factors and kept tensors.
using ChoiceKey = std::pair<FanoutKey, TensorMask>;

// Bounds classified per key (several bounds may share one): one entry per key, beaten only if
// every bound of the key is, and only the beaten keys stay, sorted for in_beaten.
template <class Key>
void only_beaten(std::vector<std::pair<Key, bool>>& v) {
  std::sort(v.begin(), v.end());
  size_t m = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    if (m > 0 && v[m - 1].first == v[i].first)
      v[m - 1].second = v[m - 1].second && v[i].second;
    else
      v[m++] = v[i];
  }
  v.resize(m);
  std::erase_if(v, [](const std::pair<Key, bool>& e) { return !e.second; });
}
template <class Key>
bool in_beaten(const std::vector<std::pair<Key, bool>>& v, const Key& k) {
  const auto it = std::lower_bound(v.begin(), v.end(), k, [](const std::pair<Key, bool>& a, const Key& b) { return a.first < b; });
  return it != v.end() && it->first == k;
}

}  // namespace tile_search_detail

using tile_search_detail::ChoiceKey;
using tile_search_detail::FanoutKey;
using tile_search_detail::Support;
using tile_search_detail::fanout_key;
using tile_search_detail::in_beaten;
using tile_search_detail::kPoolWords;
using tile_search_detail::only_beaten;

struct TileWorker::State {
  const TileSearch* s = nullptr;
  uint64_t search_id = 0;  // TileSearch::id_ of s: the caches below are its
  TileSink* sink = nullptr;
  // A choice's lower bounds and its reservation at the backing level (TileSink::beaten's).
  struct KeepBound {
    double energy = 0, cycles = 0;
    int level = -1;
    int64_t words = 0;
  };
  TileWorker* owner = nullptr;
  std::unordered_map<uint64_t, std::vector<std::vector<int>>> orders;  // see order_classes()
  // analyze() per loop structure (levels, ranks and kinds of the loops, kept tensors): a bucket is
  // refilled and flushed many times with the same structures, and analyze() reads no factor.
  struct NestKey {
    std::array<uint8_t, 3 * kMaxLoops + kMaxLevels + 2> b{};
    bool operator==(const NestKey&) const = default;
  };
  struct NestKeyHash {
    size_t operator()(const NestKey& k) const {
      return std::hash<std::string_view>{}(std::string_view(reinterpret_cast<const char*>(k.b.data()), k.b.size()));
    }
  };
  // Per plan: the search's, and the relaxed one partial choices are compared with (reference()).
  std::unordered_map<NestKey, NestStructure, NestKeyHash> nests, relaxed_nests;
  static constexpr size_t kMaxNests = 8192;  // about 20 MB per thread and plan at most
  const NestStructure& nest_of(const FlatMapping& fm, bool relaxed = false);
  // Open-addressing table support -> live bucket + 1 (0 = empty), at most half full.
  std::vector<uint32_t> table;
  std::vector<uint32_t> table_used;  // the slots in use (flush_all clears only those)
  size_t table_mask = 0;
  std::vector<int> counts;  // per live bucket
  std::vector<Support> bucket_support;
  std::unique_ptr<int32_t[]> pool;  // uninitialised; only written slots are read
  // Branch and bound: each parked choice's lower bounds (energy, cycles) and its serving energy
  // (TileSearch::serving_energy, or -1), beside its pool slot. A choice may wait in its bucket while
  // the incumbent improves; flush drops the ones then beaten, and per loop-order combination the
  // ones its top traffic beats (order_alive).
  static constexpr size_t kBoundWords = 3;
  std::unique_ptr<double[]> pool_bounds;
  size_t pool_bounds_size = 0;
  double park_serving = -1;  // park(): the serving energy of the choice being parked
  double last_energy_lb = 0, last_cycles_lb = 0;  // of the choice bound_beaten passed last
  // TileWorker::probe: a dive that fills each level first (descend_probe), until kProbeLeaves
  // complete choices are evaluated (each as it is parked) or kProbeWork choices bounded, whichever
  // comes first. The leaves give a subtree's good mappings (a depthwise layer on Eyeriss: 200 s ->
  // 18 s; one dive per root was not enough); the work limit stops a probe whose choices the
  // incumbent all beats from running the whole subtree (a stride-2 conv on Gemmini took 12x
  // longer without it). Each level bounds only its kProbeWidth first choices (most spread, then fullest).
  static constexpr int64_t kProbeLeaves = 32, kProbeWork = 4096;
  static constexpr size_t kProbeWidth = 256;
  bool probing = false;
  int64_t probe_until = 0, probe_work = 0;
  bool probe_done() const { return owner->evaluated >= probe_until || probe_work >= kProbeWork; }
  size_t W = 0, max_live = 0;
  std::vector<std::vector<LevelChoice>> scratch = std::vector<std::vector<LevelChoice>>(kMaxLevels);
  std::array<LevelChoice, kMaxLevels> chosen{};
  // below_ext[l]: per rank, the product of the factors of chosen[0..l-1] (descend(l) sets it), for
  // the capacity check of level l's choices.
  std::array<std::array<int64_t, kMaxRanks>, kMaxLevels> below_ext{};
  std::array<std::vector<int>, kMaxLevels> merged_orders;
  std::array<std::vector<std::vector<int>>, kMaxLevels> merged_class;

  // One order per class of temporal orders of `ranks` at level l that cost the same (or every
  // order), given the tensors kept below l. Worked out once per (level, ranks, below).
  // Direct-mapped front of the cache: (level, below, iterated) -> classes.
  std::vector<const std::vector<std::vector<int>>*> order_fast =
      std::vector<const std::vector<std::vector<int>>*>(kMaxLevels << (kMaxTensors + kMaxRanks), nullptr);

  const std::vector<std::vector<int>>& order_classes(int l, const std::vector<int>& ranks, uint32_t below);
  // Branch and bound: drops the classes another class beats on every refill (orders.cpp).
  void drop_dominated_orders(std::vector<std::vector<int>>& classes, uint32_t below) const;

  // Merged mode: one parked copy per order class combination of the choice, in the bucket of its
  // whole loop structure (class representative, then the level's other loopable ranks at factor
  // 1, which the model treats as no loop), so choices of different supports share SIMD calls.
  std::vector<int> park_ranks;

  // Extended order codes of a level's classes (see Support::o), cached with the classes.
  std::unordered_map<const void*, std::vector<uint32_t>> code_cache;
  std::array<const std::vector<uint32_t>*, kMaxLevels> park_codes{};
  std::vector<const std::vector<uint32_t>*> code_fast =
      std::vector<const std::vector<uint32_t>*>(kMaxLevels << (kMaxTensors + kMaxRanks), nullptr);

  const std::vector<uint32_t>& codes_of(int l, const std::vector<std::vector<int>>& classes);

  // Partial pruning: levels below fixed_levels take the order fixed_code[l] (Support::o form).
  int fixed_levels = 0;
  std::array<uint32_t, kMaxLevels> fixed_code{};
  std::array<std::vector<uint32_t>, kMaxLevels> fixed_single;

  void park_merged();

  void park();

  void put(const Support& key);

  void flush_all();

  // Evaluates live bucket bi (with branch and bound, only its choices not beaten by now).
  void flush_bucket(size_t bi);

  // Evaluates the bucket's choices under every order combination of its support.
  // `bounds`: the choices' parked bounds (kBoundWords each), or null.
  void flush(const Support& key, const int32_t* lanes, int count, const double* bounds = nullptr);
  // Per loop-order combination, the words the top moves for each tensor's outermost keeper below
  // it bound the combination's energy and latency (with the serving energy, order-free): the lanes
  // they beat are not evaluated. Set up per bucket (order_setup), then per combination
  // (order_alive: the lanes not beaten into `alive`, how many).
  struct OrderCut {
    bool on = false;
    int n = 0;                                   // tensors with a keeper below the top
    int tensor[kMaxTensors], keeper[kMaxTensors];
    double tile[kMaxTensors][kLanes];            // per lane: the keeper's tile x its distinct tiles
  } order_cut;
  bool order_cut_possible() const;
  void order_setup(const Support& key, const int32_t* lanes, int count, const double* bounds);
  int order_alive(const FlatMapping& fm, const int32_t* lanes, int count, const double* bounds, int* alive);
  // The bounds themselves, per lane: the energy bound and the words the top reads and writes, whose
  // bandwidth time bounds the cycles (order_alive; TileWorker::check_order_bound).
  void order_bounds(const FlatMapping& fm, const int32_t* lanes, int count, const double* bounds, double* energy_lb,
                    double* top_rd, double* top_wr) const;

  // Branch and bound: whether the sink already beats every completion of levels 0..l.
  bool bound_beaten(int l, const std::array<int64_t, kMaxRanks>& rest) {
    if (split_at(l)) return split_beaten(l, rest, false, false, last_energy_lb, last_cycles_lb);
    bounds_of(l, rest, last_energy_lb, last_cycles_lb);
    backing_words(l, last_level, last_words);
    return sink->beaten(last_energy_lb, last_cycles_lb, last_level, last_words);
  }
  // A fused context's backing level b (TileSearchSpec::backing_level), the top, with several kept
  // sets: the completions of chosen[0..l], l < b, are bounded per kept set K of b. The top takes
  // the rest, so each reserves exactly K's whole tiles at b, and is served where K says: a front
  // whose points keep few words at b cuts the branches that would keep more before b is chosen
  // (one bound with no reservation cut only where a point of the front reserved nothing).
  // Beaten when every kept set is.
  std::vector<TileSearch::KeepSets> split_sets;  // per keep_options[b] (bind)
  std::vector<int64_t> split_full_words;         // per kept set: its words at b
  bool split_at(int l) const { return !split_sets.empty() && l < s->spec_.backing_level; }
  // Per kept set of b, whether the bounds of the choice being extended at the level below b beat
  // it: b's choices keeping it are then skipped unbounded (set by the level below b, read by b).
  std::vector<uint8_t> b_dead;
  bool b_dead_set = false;
  void inherit_b_dead(const KeepBound* kb) {
    b_dead.resize(split_sets.size());
    for (size_t j = 0; j < split_sets.size(); ++j)
      b_dead[j] = kb[j].level == -2 || sink->beaten(kb[j].energy, kb[j].cycles, kb[j].level, kb[j].words);
    b_dead_set = true;
  }
  // One bound per kept set of b for chosen[0..l] (bounds_of's flags): false if some kept set's is
  // not beaten; then `energy`, `cycles` are the least over those (for the order of extension) and,
  // given `out`, every kept set's bound goes there (a beaten one with level -2).
  bool split_beaten(int l, const std::array<int64_t, kMaxRanks>& rest, bool open_keep, bool open_temporal, double& energy,
                    double& cycles, KeepBound* out = nullptr);
  // Whether the sink now beats every kept set's bound of `kb` (split_beaten's `out`).
  bool split_still_beaten(const KeepBound* kb);
  void make_split_sets();
  int last_level = -1;      // of the choice bound_beaten passed last: backing_words
  int64_t last_words = 0;
  // Per level l: backing_words of levels 0..l-1, made once by descend(l) for the bounds of level
  // l's choices whose tile is still open (spatial factors alone, temporal factors open).
  std::array<int, kMaxLevels> open_level{};
  std::array<int64_t, kMaxLevels> open_words{};
  // A fused context's reservation at its backing level b (TileSearchSpec::backing_level): once
  // levels 0..l (l >= b) are chosen, the words the branch keeps at b besides its exchanged and
  // resident tensors, exactly as the sink will count them; for the sink's reservation criterion
  // (TileSink::beaten's `level` and `words`). Before that, or without a backing level: (-1, 0).
  void backing_words(int l, int& level, int64_t& words) const {
    const int b = s->spec_.backing_level;
    level = -1;
    words = 0;
    if (b < 0 || l < b) return;
    LevelChoice ch = chosen[static_cast<size_t>(b)];
    ch.keep = static_cast<TensorMask>(ch.keep & ~s->spec_.onchip_backing);
    level = b;
    words = s->kept_words(below_ext[static_cast<size_t>(b)].data(), ch);
  }
  // TileSearch::scalar_bounds of chosen[0..l], with the summaries of levels below l kept from
  // descend(l)'s entry (they do not change under it) and level l's made now.
  std::array<TileSearch::LevelSummary, kMaxLevels> sums{};
  // Per level, the summary of the last set of spatial factors summarized there (TileSearch::
  // summarize_temporal): sums[l] for a choice of level l from it.
  struct SpatialSummary {
    bool valid = false;
    FanoutKey key{};
    TileSearch::LevelSummary sum;
  };
  std::array<SpatialSummary, kMaxLevels> spatial_sums{};
  void summarize(int l, const LevelChoice& ch) {
    SpatialSummary& c = spatial_sums[static_cast<size_t>(l)];
    const FanoutKey k = fanout_key(ch, s->R);
    if (!c.valid || c.key != k) {
      LevelChoice spatial = ch;
      spatial.t.fill(1);
      s->summarize(spatial, l, c.sum);
      c.key = k;
      c.valid = true;
    }
    s->summarize_temporal(ch, c.sum, sums[static_cast<size_t>(l)]);
  }
  void bounds_of(int l, const std::array<int64_t, kMaxRanks>& rest, double& energy, double& cycles,
                 bool open_keep = false, bool open_temporal = false) {
    summarize(l, chosen[static_cast<size_t>(l)]);
    s->scalar_bounds(chosen.data(), sums.data(), l, rest, energy, cycles, open_keep, open_temporal);
  }

  // Mirror symmetry (TileSearch::symmetric): whether levels 0..l-1 equal their mirror image, so that
  // level l's choices must compare at most equal to theirs (TileSearch::mirror_cmp).
  std::array<bool, kMaxLevels + 1> mirror_tied{};
  void descend(int l, const std::array<int64_t, kMaxRanks>& remaining);
  // Sets chosen[l] to (ch, keep) and says whether it may be extended: not skipped by the top
  // level's classification, admissible, within capacity and (branch and bound) not beaten, its
  // bounds then in last_energy_lb / last_cycles_lb. Counts what it cuts.
  bool admit(int l, const LevelChoice& ch, TensorMask keep, const std::array<int64_t, kMaxRanks>& rest);
  // admit's checks before the bound: the top level's classification, admissible, within capacity
  // (chosen[l] is then (ch, keep)).
  bool allowed(int l, const LevelChoice& ch, TensorMask keep);
  // admit for `ch` under every kept set keep_options[l][i] at once (but those `skip` marks):
  // keep_ok[l][i] whether it may be extended; if so, its bounds and reservation in keep_bound[l][i].
  // The bounds of all its kept sets are made together (TileSearch::scalar_bounds_keeps).
  std::array<std::vector<uint8_t>, kMaxLevels> keep_ok;
  std::array<std::vector<KeepBound>, kMaxLevels> keep_bound;
  // split_at(l): per kept set i of level l, split_sets.size() bounds from keep_split[l][i * n].
  std::array<std::vector<KeepBound>, kMaxLevels> keep_split;
  std::vector<TensorMask> keep_masks;  // scratch: the kept sets being bounded
  std::vector<double> keep_energy, keep_cycles;
  void admit_keeps(int l, const LevelChoice& ch, const std::array<int64_t, kMaxRanks>& rest,
                   const uint8_t* skip = nullptr);

  // Branch and bound with TileSearchSpec::best_first: level l's choices that pass their bound,
  // extended in the order of the sink's priority of their bounds (one buffer per level, reused).
  static constexpr uint32_t kNoSplit = ~uint32_t{0};
  struct Ranked {
    double priority, energy, cycles;
    uint32_t choice;
    TensorMask keep;
    double fill;  // descend_probe's order: minus the words the choice keeps at its level
    int level = -1;      // backing_words of the choice
    int64_t words = 0;
    uint32_t split = kNoSplit;  // split_at: its kept sets' bounds in ranked_split[level of the choice]
    int64_t spread = 1;         // descend_probe's first order: the level's spatial instances (more first)
    // Best first: the objective of the bounds, then the energy bound, then the cycles bound.
    static bool by_bound(const Ranked& a, const Ranked& b) {
      if (a.priority != b.priority) return a.priority < b.priority;
      if (a.energy != b.energy) return a.energy < b.energy;
      return a.cycles < b.cycles;
    }
  };
  std::array<std::vector<Ranked>, kMaxLevels> ranked_at;
  std::array<std::vector<KeepBound>, kMaxLevels> ranked_split;
  // Whether the sink now beats every completion of a ranked choice of level l.
  bool ranked_beaten(int l, const Ranked& rk) {
    if (rk.split != kNoSplit) return split_still_beaten(&ranked_split[static_cast<size_t>(l)][rk.split]);
    return sink->beaten(rk.energy, rk.cycles, rk.level, rk.words);
  }
  std::array<std::vector<uint8_t>, kMaxLevels> keep_dead_at;  // per kept-set option: beaten for the spatial set
  void descend_best_first(int l, const std::array<int64_t, kMaxRanks>& remaining, const std::vector<LevelChoice>& choices);
  void descend_probe(int l, const std::array<int64_t, kMaxRanks>& remaining, const std::vector<LevelChoice>& choices);
  // Takes a ranked choice at level l and searches the levels above it.
  void extend(int l, const std::array<int64_t, kMaxRanks>& remaining, const LevelChoice& ch, const Ranked& rk);

  // `to` may be null while nothing is parked (partial pruning evaluates no lanes).
  void bind(const TileSearch& search, TileSink* to);

  // ---- Partial pruning (TileSearchSpec::prune_partial) ------------------------------------
  // After levels 0..d-1 are chosen, every count of the model is, for any choice O of the levels
  // above, (a part fixed by the inner choice) x (a part fixed by O), or a monotone function of
  // such products, provided two inner choices agree on
  //   - what remains of every rank (the boundary tile: outer tiles, occupancies and loop
  //     extents are then equal), and
  //   - per tensor, which of its inner tiles have a real loop over a rank it indexes among the
  //     inner levels above them: a tile with one is refilled (its inner iterations) x (every
  //     outer temporal iteration), one without (its volume) x (the outer iterations down to the
  //     innermost outer loop over its ranks) -- a moved tile shares nothing with the previous
  //     one when every dimension is one rank (TileSearch::partial_). The same holds for the
  //     tile the outer levels refill (the outermost inner one, or compute).
  // Spatial groups multiply level by level. The outputs' first-update discount subtracts
  // (tensor volume) x (instances that share each value), whose inner part is compared too.
  // Energy and latency (block rounding, per-instance bandwidth, the maximum over levels) are
  // monotone in those counts, so an inner choice no worse in every one of them under one
  // reference completion is no worse under every completion: the dominated one is dropped.
  // Completions that stay are enumerated and evaluated as usual.
  std::vector<int32_t> part_pool, next_pool;  // partial choices, `pstride` ints each
  size_t pstride = 0;
  CostResult part_cost;
  std::vector<double> comp;

  // Layout of one partial choice: per level l < s->L: t[R], x[R], y[R], keep, order code; then
  // the remaining extent of every rank.
  int32_t* level_slot(int32_t* p, int l) const { return p + static_cast<size_t>(l) * (3 * s->R + 2); }
  int32_t* rem_slot(int32_t* p) const { return p + static_cast<size_t>(s->L) * (3 * s->R + 2); }
  const int32_t* level_slot(const int32_t* p, int l) const { return p + static_cast<size_t>(l) * (3 * s->R + 2); }
  const int32_t* rem_slot(const int32_t* p) const { return p + static_cast<size_t>(s->L) * (3 * s->R + 2); }

  void load(const int32_t* p, int d, std::array<int64_t, kMaxRanks>& rem);

  void store(int32_t* p, int d, const std::array<int64_t, kMaxRanks>& rem) const;

  // The comparison key of chosen[0..d) (see above): remaining extents, then per tensor the inner
  // tiles refilled per outer iteration (bit l) and whether the outermost one is (bit 15).
  using GroupKey = std::array<int64_t, kMaxRanks + kMaxTensors>;
  struct GroupKeyHash {
    template <size_t N>
    size_t operator()(const std::array<int64_t, N>& k) const {
      uint64_t h = 0x9E3779B97F4A7C15ull;
      for (int64_t v : k) h = (h ^ static_cast<uint64_t>(v)) * 0xFF51AFD7ED558CCDull, h ^= h >> 29;
      return static_cast<size_t>(h);
    }
  };

  GroupKey group_key(int d, const std::array<int64_t, kMaxRanks>& rem) const;

  // Evaluates chosen[0..d) under the reference completion into part_cost (what ref_keep says
  // each level keeps): the remaining extents as temporal loops of the top level in rank order,
  // nothing kept between. False if the model rejects it.
  std::array<TensorMask, kMaxLevels> ref_keep{};
  bool reference(int d, const std::array<int64_t, kMaxRanks>& rem);

  // Fills `comp` with the comparison vector of chosen[0..d) under the reference completion.
  // False if the model rejects it (then it is never dropped).
  bool components(int d, const std::array<int64_t, kMaxRanks>& rem);

  // Length of the comparison vector of a partial choice of levels 0..d-1 (components()).
  size_t comp_size(int d) const;

  // Lower bounds on the energy and latency of the completions of chosen[0..d) (the levels from
  // d up choose their factors, fan-out, kept tensors and orders; docs/mapper.md, "Completion
  // bounds"), from the reference evaluation: one per way the free levels can use their fan-out
  // (`outer`: a factor per rank, level and axis; every completion uses one of them) and, in a
  // fused context whose backing level b is free and the top, per set of tensors b keeps. Given
  // the fan-out (S instances added; per tensor, `irr` of them over ranks it does not index, `mc`
  // of those on axes that multicast it):
  //   - compute steps: the reference's (all that remains temporal at the top) over S;
  //   - a kept inner tile refilled per outer iteration (group_key bit) is filled exactly as often
  //     in total over its instances under every completion; any other is refilled (volume) x
  //     (outer iterations down to the innermost outer loop over its ranks) x irr. The free levels
  //     are relaxed into one loop per rank (splitting a rank's loop over two levels can only
  //     lengthen the runs that count) and every order of those loops is tried, after a first
  //     order-free pass with each tensor at its fewest iterations. Reads and updates follow the
  //     tile they serve (compute: one per step); an output's first-update discount is at most the
  //     reference's times the output's irr;
  //   - what the outermost inner tile takes from above is its count over mc, and at least the
  //     tensor's volume, served at the cheapest per-word cost of a level that may keep it, plus
  //     the volume that level takes from the backing level;
  //   - a level's bandwidth takes at least its per-instance words over its bandwidth; a backing
  //     level at least the volumes it serves, and all of what a tensor takes from above where no
  //     level between may keep it.
  // Energy is a positive sum of these counts (block rounding only adds) and latency their
  // maximum (whole cycles), so no such completion costs less. False where the model rejects the
  // reference (no bound); no bounds at all means no completion is valid.
  struct OuterFanout {
    double used = 1;                             // S
    std::array<int64_t, kMaxRanks> temporal{};   // what the free levels leave each rank to iterate
    std::array<double, kMaxTensors> irr{}, mc{};
    std::array<double, kMaxLevels> inst{};       // instances of each free level
    FanoutKey at_d{};                            // the spatial factors of level d (x per rank, then y)
  };
  std::vector<OuterFanout> outer_made;           // make_outer_fanouts' result
  const std::vector<OuterFanout>* outer_last = nullptr;  // the last outer_fanouts' result
  // outer_fanouts per (d, rem) of the bound search: a level's choices are bounded one by one,
  // with few distinct remainders among them.
  using FanoutsKey = std::array<int64_t, kMaxRanks + 1>;
  std::unordered_map<FanoutsKey, std::vector<OuterFanout>, GroupKeyHash> fanout_cache;

  const std::vector<OuterFanout>& outer_fanouts(int d, const std::array<int64_t, kMaxRanks>& rem);

  void make_outer_fanouts(int d, const std::array<int64_t, kMaxRanks>& rem);

  // One bound: no completion with this fan-out (and, fused, these tensors kept at the backing
  // level b) costs less energy or time, or reserves fewer own words at b.
  struct Bound {
    double energy = 0, cycles = 0;
    int64_t own = 0;         // words at b beyond the exchanged tiles (0 unfused)
    TensorMask kept_b = 0;   // what b keeps (by_keep)
    bool by_keep = false;
    TensorMask kept_d = 0;   // what level d keeps (by_keep_d: per_keep_d)
    bool by_keep_d = false;
  };
  std::vector<Bound> bounds;
  // The orders of the free levels' ranks (one loop each) that a bound must try, per set of ranks
  // they still iterate: a tensor's refills grow with its run, the loops from the innermost up to
  // the outermost over one of its ranks (mult below), and every term of the bound only grows with
  // the runs. An order whose run of every tensor contains another order's is never cheaper or
  // faster, so only the orders whose runs are minimal are tried (of equal runs, the first). For
  // GPT-3's five-rank projections and matmuls that is 3 orders of 120 (3 of 5,040 for a convolution).
  std::unordered_map<uint32_t, std::vector<std::array<int8_t, kMaxRanks>>> bound_orders;
  const std::vector<std::array<int8_t, kMaxRanks>>& minimal_orders(uint32_t ranks);
  std::vector<TensorMask> bound_keeps;
  std::vector<int64_t> bound_own;
  std::vector<double> bound_best, bound_energy, bound_fastest;

  bool completion_bounds(int d, const std::array<int64_t, kMaxRanks>& rem);
  // The bound for all fan-outs at once, per kept set (check_bounds tests it: record_relaxed).
  bool record_relaxed = false;
  std::vector<double> relaxed_energy, relaxed_cycles;
  // classify_fanouts, classify_top: whether the sink beats each bound (outer_keep_beaten).
  bool classify = false;
  // classify_top: the bound for all fan-outs at once first; relaxed_beaten when it is beaten
  // (then nothing else is made).
  bool classify_relaxed = false, relaxed_beaten = false;
  std::vector<uint8_t> outer_keep_beaten;  // per bound (classify): whether the sink beats it
  // Bounds per kept set of level d as well (the row classification of complete, check_bounds).
  bool per_keep_d = false;
  std::vector<TensorMask> bound_keeps_d;

  // Level d's spatial factors after classify_fanouts whose every completion is beaten (all outer
  // fan-outs that include them), sorted; extend_level skips the choices of level `filter_level`
  // with these factors.
  std::vector<std::pair<FanoutKey, bool>> fanout_dead;
  int filter_level = -1;

  // Classifies the outer fan-outs of chosen[0..d) (bounds above, computed for every fan-out);
  // false if no bound was made. `all_beaten`: every completion is beaten.
  bool classify_fanouts(int d, const std::array<int64_t, kMaxRanks>& rem, bool& all_beaten);
  static constexpr int64_t kKeepTrial = 8;  // rows classified per kept set before giving up on it
  bool force_keep_d = false;                // check_classification: always per kept set
  // Level d's (spatial factors, kept set) after classify_fanouts whose every completion is
  // beaten: a choice keeping one set at d is bounded apart from those keeping another (what d
  // keeps decides which levels serve each tensor), so beaten kept sets are skipped before any of
  // their temporal factors is enumerated.
  std::vector<std::pair<ChoiceKey, bool>> keep_dead;
  bool keep_beaten(const LevelChoice& ch, TensorMask keep) const {
    return in_beaten(keep_dead, ChoiceKey{fanout_key(ch, s->R), keep});
  }

  // The top level's choices (spatial factors, what it keeps) whose every completion is beaten,
  // sorted; descend skips them at level `top_filter`. Fused with b the top, the bounds are per
  // kept set of b, so a choice is skipped by its fan-out and what it keeps together: GPT-3's
  // projections complete 39 top-level choices per choice of the level below on average, of which
  // few can reach the front.
  std::vector<std::pair<ChoiceKey, bool>> top_dead;
  int top_filter = -1;

  // Bounds chosen[0..top) at the top level: false if every completion is beaten; else the
  // beaten top-level choices go to top_dead.
  bool classify_top(int d, const std::array<int64_t, kMaxRanks>& rem);
  bool top_by_keep = false;
  bool top_beaten(const LevelChoice& ch, TensorMask keep) const {
    return in_beaten(top_dead, ChoiceKey{fanout_key(ch, s->R), top_by_keep ? keep : TensorMask{0}});
  }

  // Completes chosen[0..top) (d = top): skipped if every completion is beaten, else the top
  // level's beaten choices are skipped.
  void complete_top(int d, const std::array<int64_t, kMaxRanks>& rem);

  bool fanout_beaten(const LevelChoice& ch) const { return in_beaten(fanout_dead, fanout_key(ch, s->R)); }

  std::vector<double> comps;  // per stored partial choice of the next level, `D` each
  std::vector<uint8_t> alive;
  std::unordered_map<GroupKey, std::vector<uint32_t>, GroupKeyHash> groups;
  std::vector<int> top_ranks;

  // Loop-order classes of the top level over the ranks it still iterates, given the tensors the
  // chosen levels below it keep (chosen[0..top)).
  size_t top_orders(const std::array<int64_t, kMaxRanks>& rest);

  // Extends `n` rows (levels 0..d-1 chosen) by every choice of level d; the choices that another
  // one of their group dominates are dropped, the survivors left in next_pool where alive[i].
  // `last` (d = top - 1, a sink bound): choices with fewer top-level order classes than
  // TileSearchSpec::last_level_min_orders are completed at once instead.
  void extend_level(int d, const int32_t* rows, size_t n, bool last);

  // Levels 0..top-2 chosen and pruned; the survivors go to `out`.
  void prune_levels(PartialChoices& out);


  // Testing (check_bounds, check_classification): every choice of level d (kept tensors, order
  // class) as extend_level makes them, each set in chosen[d] / fixed_code[d] while `fn` runs
  // with what it leaves of every rank.
  template <class Fn>
  void each_choice(int d, const std::array<int64_t, kMaxRanks>& rem, Fn&& fn) {
    std::vector<LevelChoice> choices;
    s->level_choices(d, rem, choices);
    uint32_t below = 0;
    for (int l = 0; l < d; ++l) below |= chosen[l].keep;
    for (const LevelChoice& ch : choices) {
      std::array<int64_t, kMaxRanks> rest = rem;
      for (int r = 0; r < s->R; ++r) rest[r] /= ch.t[r] * ch.x[r] * ch.y[r];
      std::vector<int> ranks;
      uint32_t iterated = 0;
      for (int r = 0; r < s->R; ++r) iterated |= uint32_t(ch.t[r] > 1) << r;
      s->loop_ranks(d, iterated, ranks);
      const std::vector<uint32_t> codes = codes_of(d, order_classes(d, ranks, below));
      for (TensorMask keep : s->keep_options[d]) {
        chosen[d] = ch;
        chosen[d].keep = keep;
        if (!s->admissible(chosen[d], d) || !s->fits(chosen.data(), d)) continue;
        for (uint32_t code : codes) {
          fixed_code[d] = code;
          fn(rest);
        }
      }
    }
  }

  // Rows [begin, end) completed one by one. Everything parked so far is evaluated first, so that
  // the front holds the earlier rows' best; then the bounds of each outer fan-out of the row
  // (classify_fanouts). The row is skipped if what the sink holds beats all of them; otherwise
  // the choices of the level below the top are made (extend_level) except those whose spatial
  // factors only occur in beaten fan-outs, compared where their completions are many, and each
  // survivor is bounded on its own before the top level completes it, every order. (Bounding
  // each survivor costs about one scalar evaluation. Also where the top level only adds loop
  // orders it pays: GPT-3 at 1,024 tokens on ffm_edge takes 94 CPU-s instead of 125, and the
  // same on accelforge_tpu_v4i.)
  void complete(const PartialChoices& p, size_t begin, size_t end);
};

}  // namespace mapfuse
