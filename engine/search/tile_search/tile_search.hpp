#pragma once
// The tile search shared by the exhaustive mapper (exhaustive.hpp) and FFM's pmapping generation
// (ffm/pmappings.hpp): every factorisation of one Einsum's ranks over the levels' temporal and
// spatial slots (divisor tables worked out once), every kept-tensor choice, levels innermost first
// with exact capacity pruning, and every loop-order class that changes reuse (docs/mapper.md).
// Complete choices are parked in buckets by their *support* (per level: iterated ranks, spread
// ranks, kept tensors); a full bucket is evaluated once per loop-order class through the SIMD lane
// evaluator (evaluate_lanes, bit-identical to the scalar model) and every lane is handed to a sink
// with its CompactCost. Nothing is allocated per candidate; the sink materialises a Mapping only
// when it keeps one.
//
// The parts, one file each in this folder: search.cpp (the mapspace worked out once),
// tile_shapes.cpp (a level's factor choices, capacity), orders.cpp (loop-order classes),
// evaluate.cpp (buckets and SIMD evaluation), worker.cpp (the enumeration), partial.cpp (partial
// pruning), bounds.cpp (scalar and completion lower bounds), checks.cpp (testing hooks);
// worker_state.hpp is the worker's state they share.
//
// Parallel use: the search is read-only after construction; each thread owns a TileWorker (the
// buckets) and feeds it roots (innermost level choices) of one or several searches.
#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <unordered_map>
#include <vector>

#include "engine/cost/lanes.hpp"
#include "engine/cost/model.hpp"
#include "engine/search/mapspace.hpp"

namespace mapfuse {

struct TileSearchSpec {
  int top = -1;                  // outermost level with loops (it takes the rest); -1 = the outermost level
  int backing_level = -1;        // fused: level keeping the on-chip backed tensors (>= 0: levels above it
                                 // up to the outermost keep nothing)
  TensorMask onchip_backing = 0; // fused: tensors backed at backing_level (FlatMapping::onchip_backing)
  bool prune = true;             // cut partial choices whose kept tiles overflow a level
  bool reduce_orders = true;     // false: every temporal loop order (testing)
  // Bucket by whole loop structure instead of support: every rank a level may iterate is a loop
  // there (factor 1 = no loop), so choices of different supports share SIMD calls. Fills lanes
  // when supports are many and sparse (small tiles, FFM contexts); costs wider structures. Used
  // only when the loops fit kMaxLoops.
  bool merge_supports = false;
  // Exact pruning of partial choices, level by level up to two below the top (TCM's idea, FFM section 6.1;
  // docs/mapper.md, "Partial pruning"): choices of the inner levels that the outer levels cannot
  // tell apart (same remaining rank extents, same reuse pattern per kept tile) are compared on
  // every access count, per-instance count, compute step and occupancy, and the dominated ones are
  // dropped before any outer level is enumerated. Used by TileWorker::prune and complete when
  // the Einsum qualifies (TileSearch::partial_pruning()): merged supports, every tensor
  // dimension one rank. With the top at level 1 (a context backed on the level above the
  // innermost) nothing is compared, but the innermost level's choices are still classified by
  // the completion bounds of the top level's fan-outs and kept sets (complete_top).
  bool prune_partial = false;
  // The level just below the top is compared (within blocks of completed rows) only where the top
  // level has at least this many loop-order classes to complete a choice with: a comparison (one
  // scalar evaluation, a group lookup and the comparisons) costs about as much as evaluating a few
  // completions in lanes. On matmul_chain_2 (at most six classes at the top), comparing them all
  // took 1.0x (gemmini_default, ffm_edge) to 6.7x (accelforge_tpu_v4i) the time of comparing none.
  size_t last_level_min_orders = 8;
  // A level that keeps no tensor is no storage boundary: its temporal loops and those of the level
  // above it form one nest, in which a rank split over both is never better than the rank's whole
  // factor at its inner place (every tensor's innermost run of loops over ranks it does not index
  // can only grow). So when the level above has no fan-out and no constraint, such a level's
  // temporal factors are all 1 and the level above takes them: LoopTree's one loop per rank
  // between storage nodes. Cuts the splits that differ only in which side of an empty level a
  // factor sits (docs/mapper.md, "Pass-through levels").
  bool merge_passthrough = false;
  // Branch and bound (docs/mapper.md, "Branch and bound"): after each level run() chooses, lower
  // bounds on the energy and cycles of every completion of the choice (scalar_bounds) go to the
  // sink's beaten(energy, cycles, level, words), with the words kept at backing_level once it is
  // chosen (else -1, 0), and a beaten choice is not extended. The sink decides
  // what beats: a scalar objective's incumbent, or a front that strictly dominates the bounds
  // (the exhaustive mapper's front, FFM's contexts). With a backing level or accumulating tiles
  // the bounds are per tile: the sink scales them (PmappingSink::beaten). Ignored where partial
  // pruning applies (it has its own bounds).
  bool bound_scalar = false;
  // With bound_scalar: a level's choices are bounded first and extended best first (the sink's
  // priority() of their bounds), so that a good mapping is found early and the bound cuts more.
  // The answer does not change, only how much is evaluated.
  bool best_first = false;
  // Per level, words moved by every evaluation outside the mapping's loops (PlanLevel::
  // extra_read_words / extra_write_words): a fused context's resident fill.
  std::array<double, kMaxLevels> extra_read_words{}, extra_write_words{};
  // A fused context with shared loops over reduction ranks (FusedContext::reduction): with
  // rest_tiles > 0 every lane's cost is the whole Einsum's, first_tiles tiles with its output
  // starting from zero and rest_tiles accumulating onto partial sums (EvalPlan::output_accumulates),
  // as fused_total adds them; the sink's bounds stay per tile.
  int64_t first_tiles = 1, rest_tiles = 0;
  int64_t max_evaluations = 0;   // 0 = no limit; beyond it over() becomes true and work stops
  // An anytime search (a MIP solver's node limit): beyond this much work (level choices
  // enumerated, one per choice, plus one per node) the search stops with what it has found and
  // truncated() is true; not before the sink holds a mapping (TileSink::has_incumbent). Counted,
  // not timed, so that a search on one thread stops at the same place on any machine. Sets the
  // search's own over flag: not for searches sharing `over`. 0 = no limit.
  int64_t max_work = 0;
  // Mirror symmetry (docs/mapper.md, "Mirror symmetry"): where swapping pairs of ranks (a square
  // convolution's P and Q with R and S) maps the Einsum, the core's fan-outs and the mapspace onto
  // themselves, a mapping and its mirror cost the same to the bit; only the choices whose factors
  // are lexicographically at most their mirror's are searched. Whole-Einsum searches without
  // constraints or backing only (TileSearch::symmetric says whether one was found).
  bool break_symmetry = false;
  std::atomic<int64_t>* budget = nullptr;  // shared evaluation counter (several searches); null = own
  std::atomic<bool>* over = nullptr;
};

// The factors one level takes from each rank: temporal, spatial X, spatial Y; and what it keeps.
struct LevelChoice {
  std::array<int64_t, kMaxRanks> t{}, x{}, y{};
  TensorMask keep = 0;
};

class TileSearch;

// One evaluated lane: a complete factor choice under one loop order per level.
struct TileCandidate {
  int slot(int l, LoopKind k, int r) const { return (l * 3 + static_cast<int>(k)) * R + r; }
  const TileSearch* search = nullptr;
  int R = 0;                                                    // ranks of the Einsum
  const int32_t* factors = nullptr;                            // by slot(l, kind, r)
  const std::array<const std::vector<int>*, kMaxLevels>* order = nullptr;  // temporal order per level
  const std::array<TensorMask, kMaxLevels>* keep = nullptr;    // as the Mapping keeps (outermost: all)
  int64_t factor(int l, LoopKind k, int r) const { return factors[slot(l, k, r)]; }
  Mapping build() const;
  // A total order on candidates (keep, temporal loops in order, spatial factors per level): a
  // deterministic tie-break that needs no text. key() fills `out` and returns the used length.
  static constexpr int kKeyLen = kMaxLevels * (2 + 4 * kMaxRanks);
  using Key = std::array<int32_t, kKeyLen>;
  void key(Key& out) const;
};

class TileSink {
 public:
  virtual ~TileSink() = default;
  // Every evaluated lane, valid or not (cost.invalid says why).
  virtual void consume(const TileCandidate& cand, const CompactCost& cost) = 0;
  // Whether no mapping costing at least `energy_pj` and `cycles` and keeping at least `words`
  // at `level` (-1: none) could enter the sink's result (partial pruning skips the completions
  // of a partial choice with these lower bounds, TileWorker::complete). Must be exact: true only
  // if something already kept strictly beats every such mapping. The default keeps everything.
  virtual bool beaten(double /*energy_pj*/, double /*cycles*/, int /*level*/, int64_t /*words*/) { return false; }
  // Branch and bound (TileSearchSpec::bound_scalar): whether the sink holds a mapping whose value
  // can cut (until then choices are evaluated as soon as they are complete), and the order in
  // which choices with these lower bounds are best extended (smaller first).
  virtual bool has_incumbent() const { return false; }
  virtual double priority(double energy_pj, double cycles) const { return energy_pj * cycles; }
};

class TileWorker;

// Choices of the inner levels that survive partial pruning (TileWorker::prune): `levels` levels
// fixed per row, `stride` ints per row (factors, kept tensors, order class per level, then what
// remains of every rank). Completing disjoint ranges of rows on several workers enumerates the
// search's remaining mappings once.
struct PartialChoices {
  int levels = 0;
  size_t stride = 0;
  std::vector<int32_t> rows;  // most promising first (smallest lower bounds on their completions)
  size_t size() const { return stride ? rows.size() / stride : 0; }
};

class TileSearch {
 public:
  TileSearch(const Einsum& e, const Core& c, const Mapspace& space, const TileSearchSpec& spec);
  TileSearch(const TileSearch&) = delete;

  // Roots: the innermost level's choices (factors and kept tensors); none with partial pruning.
  size_t roots() const { return roots_.size(); }
  // Branch and bound: lower bounds on the energy and cycles of every mapping under root i
  // (scalar_bounds of the innermost level alone), for taking the roots best first.
  void root_bounds(size_t i, double& energy, double& cycles) const;
  // Branch and bound's order of the roots: by the sink's priority() of their bounds, ties in
  // enumeration order (the subtree of the first root in enumeration order, the innermost level
  // keeping nothing, can hold most of the mapspace and none of the good mappings).
  std::vector<size_t> roots_best_first(const TileSink& sink) const;
  // How much probing (TileWorker::probe's returns) a search's roots get before the full search:
  // a few hundred roots. Gemmini's ResNet-18 layers have up to ~9,000 roots, whose probes cost
  // more than they saved; Eyeriss's depthwise layer has 130.
  static constexpr int64_t kProbeBudget = int64_t{1} << 19;
  const EvalPlan& plan() const { return plan_; }
  const Einsum& einsum() const { return e_; }
  int levels() const { return L; }
  bool over() const { return over_->load(std::memory_order_relaxed); }
  // Whether TileSearchSpec::max_work stopped the search (over() is then true as well).
  bool truncated() const { return truncated_.load(std::memory_order_relaxed); }
  int64_t work() const { return work_.load(std::memory_order_relaxed); }
  // Counts n units of work against TileSearchSpec::max_work (callers skip it without a limit); past the
  // limit the search stops, but only once `found` (the sink holds a mapping): an anytime search
  // returns a mapping whenever one exists.
  void add_work(int64_t n, bool found) const {
    if (spec_.max_work > 0 && work_.fetch_add(n, std::memory_order_relaxed) + n > spec_.max_work && found) {
      truncated_.store(true, std::memory_order_relaxed);
      over_->store(true, std::memory_order_relaxed);
    }
  }
  // Mirror symmetry (TileSearchSpec::break_symmetry): the rank pairs (a < b) swapped, if any.
  bool symmetric() const { return !mirror_pairs_.empty(); }
  const std::vector<std::pair<int, int>>& mirror_pairs() const { return mirror_pairs_; }
  // The order of a level's factors against its mirror's: per pair, temporal, then x, then y
  // factors of a against b; -1, 0 or 1 at the first difference. Levels compared innermost first,
  // a mapping is searched only if its first differing level compares below 0.
  int mirror_cmp(const LevelChoice& ch) const {
    for (const auto& [a, b] : mirror_pairs_) {
      if (ch.t[a] != ch.t[b]) return ch.t[a] < ch.t[b] ? -1 : 1;
      if (ch.x[a] != ch.x[b]) return ch.x[a] < ch.x[b] ? -1 : 1;
      if (ch.y[a] != ch.y[b]) return ch.y[a] < ch.y[b] ? -1 : 1;
    }
    return 0;
  }
  // `m` with every pair's ranks swapped (spatial loops in rank order, as the search lays them out).
  Mapping mirrored(const Mapping& m) const;
  // Whether partial choices are pruned (TileSearchSpec::prune_partial and the Einsum qualifies):
  // then TileWorker::prune and complete enumerate it, not run().
  bool partial_pruning() const { return partial_; }
  // Whether run() bounds each level's choices (TileSearchSpec::bound_scalar; partial pruning
  // takes precedence) and takes them best first.
  bool best_first() const { return spec_.bound_scalar && spec_.best_first; }
  // A lower bound on the mapspace's size: the ways to split every rank over the levels' temporal
  // loops (within the constraints' factor bounds) times the kept sets of every level; spatial
  // factors and loop orders only multiply it. For messages about a mapspace too large to search.
  double temporal_mapspace_size() const;
  // The level with the most loop orders to try (ranks it may iterate), for the same messages.
  int most_orders_level() const;
  // Lower bounds on the energy and cycles of every complete mapping whose levels 0..l are
  // `chosen` (what remains of each rank above them: `rest`). Cycles: the compute steps, i.e. the
  // inner temporal iterations times what remains spread over at most the fan-outs above l. Energy:
  // the operations, plus one access per compute step of each tensor at its innermost keeping level
  // (the cheapest level above l that may keep it, if none below does).
  // `open_keep`: what level l keeps is not chosen yet (chosen[l].keep is ignored; a tensor not
  // kept below l is served at l or above, whichever is cheaper). `open_temporal`: level l's
  // temporal factors are left to the levels above (chosen[l].t all 1), so its tile is not final.
  // The least energy of serving compute `words` accesses of tensor t (before the sharing of the
  // fan-outs above l) from a level above l that may keep it (or l itself, `from_l`), over the
  // sharing the fan-outs of levels l+1.. allow with `rest` left of every rank; `compulsory`:
  // with the top's access of each of t's values, and the fill of a serving level between.
  // What each level may keep, must keep, and what a level above it may keep (per level, a bit per
  // tensor): the search's (keep_options), or with one level's kept set fixed (fix_keep).
  struct KeepSets {
    std::array<TensorMask, kMaxLevels> may{}, must{}, above{};
  };
  const KeepSets& keep_sets() const { return keep_sets_; }
  // The search's KeepSets with level m (above the chosen levels, below the outermost) keeping
  // exactly `keep`.
  void fix_keep(int m, TensorMask keep, KeepSets& out) const;
  double serve_from_above(int l, const std::array<int64_t, kMaxRanks>& rest, int t, double words, bool from_l,
                          bool compulsory, const KeepSets* ks = nullptr) const;
  // The least energy of `words` accesses (an input's fill reads, the output's drain updates) at
  // the next level above `below` keeping tensor t, with the top's access of each value and the
  // fill of a level between; for the output, besides, `reads` of partial sums sent back down.
  double via_parent_energy(int below, int t, double words, const KeepSets* ks = nullptr, double reads = 0) const;
  // Whole cycles level l needs to read r and write w words per instance, at least.
  double bandwidth_cycles(int l, double r, double w) const;
  void scalar_bounds(const LevelChoice* chosen, int l, const std::array<int64_t, kMaxRanks>& rest,
                     double& energy_lb, double& cycles_lb, bool open_keep = false, bool open_temporal = false) const;
  // What scalar_bounds needs of one level's factors, worked out once per choice: a search extends
  // the same inner levels with many choices of the next, so it keeps these per level and passes
  // them (`sums[m]` for m <= l, each made by summarize from chosen[m]'s factors).
  struct LevelSummary {
    int64_t temporal = 1;                        // the product of the temporal factors
    double spatial = 1;                          // the product of the spatial factors
    double reducing = 1;                         // spatial factors over ranks the output does not index
    std::array<double, kMaxTensors> per_op{};    // per tensor: multicast groups / spatial factors
    std::array<double, kMaxTensors> own{};       // temporal factors over the tensor's plain ranks
    std::array<double, kMaxTensors> tile{};      // factors over the ranks of its dimensions (plain)
    std::array<double, kMaxTensors> distinct{};  // spatial factors over ranks that alone move a dimension
  };
  void summarize(const LevelChoice& ch, int m, LevelSummary& out) const;
  // summarize from `spatial`, the summary of ch's spatial factors alone (its temporal factors all
  // 1): a level's temporal choices come in runs of one set of spatial factors.
  void summarize_temporal(const LevelChoice& ch, const LevelSummary& spatial, LevelSummary& out) const;
  // Of tensor t, ch's temporal factors over its plain ranks (`own`) and over the ranks of its
  // plain dimensions (`tile`): summarize's per-tensor products with no spatial factor.
  void temporal_products(const LevelChoice& ch, int t, double& own, double& tile) const;
  // Whether tensor t has halos and every rank indexes one of its dimensions once, with a positive
  // coefficient (a depthwise or strided conv's input): window_step_fills applies to it.
  bool window_disjoint(int t) const { return window_disjoint_ >> t & 1; }
  // Fills per instance of a window tensor's tile at level k, at least, from the steps and wraps of
  // the innermost loop above k over one of its ranks: levels up to l chosen, `rest` left of every
  // rank above them, at least `above_l` temporal iterations there; `cums[m]` the per-rank extents
  // of level m's tile (all factors of levels 0..m), for m up to max(k, l - 1).
  double window_step_fills(const LevelChoice* chosen, const LevelSummary* sums, int k, int l, int t,
                           const double (*cums)[kMaxRanks], double above_l, const std::array<int64_t, kMaxRanks>& rest) const;

  void scalar_bounds(const LevelChoice* chosen, const LevelSummary* sums, int l,
                     const std::array<int64_t, kMaxRanks>& rest, double& energy_lb, double& cycles_lb,
                     bool open_keep = false, bool open_temporal = false) const;
  // The same for each kept set keeps[i] of level l (chosen[l].keep is ignored) into energy_lb[i],
  // cycles_lb[i]: what does not depend on the kept sets is worked out once, and each tensor's terms
  // once per whether level l keeps it. A search bounds a level's choice under all its kept sets.
  // With `sets` (m of them, each the search's KeepSets with level `fixed` keeping one set:
  // fix_keep), the bounds under each: keeps[i] under sets[j] into energy_lb[i * m + j]; a tensor's
  // terms then differ only by whether level l and level `fixed` keep it, so each is made at most
  // four times. `open_keep` (n = 1, keeps unread): level l's kept set left open, as scalar_bounds.
  // A complete choice (every level chosen, `sums` of each): the operations' energy and what every
  // tensor's innermost keeping level spends serving compute, at least. No loop order changes
  // these, so with the top's fills of a given order (TileWorker's flush) it bounds that order's
  // energy.
  double serving_energy(const LevelChoice* chosen, const LevelSummary* sums) const;
  void scalar_bounds_keeps(const LevelChoice* chosen, const LevelSummary* sums, int l,
                           const std::array<int64_t, kMaxRanks>& rest, const TensorMask* keeps, int n,
                           double* energy_lb, double* cycles_lb, bool open_temporal = false,
                           const KeepSets* sets = nullptr, int m = 1, int fixed = -1, bool open_keep = false) const;

 private:
  // Parts of scalar_bounds (bounds.cpp). Per instance of level k keeping tensor t, the words its
  // tile moves at least (an input's fills, an output's drains; exact-count for a tensor whose every
  // dimension is one rank, a lower bound through its plain dimensions for one with halos), given
  // levels 0..l chosen; the distinct tiles the spatial factors of levels from..to spread over t's
  // ranks; the energy of the output's drains from every chosen keeper below the top to the next
  // (adding the parents' words to `wr`).
  // `all_each`: the same with the spatial factors above l spreading nothing, which times the
  // instances of k chosen so far (inst_least) bounds the fills of all of k's instances: what a
  // fan-out above l saves an instance in iterations it adds in instances.
  double plain_tile_moves(const LevelSummary* sums, int k, int l, int t, const std::array<int64_t, kMaxRanks>& rest,
                          double above_l, double tile_values = 0, double rest_all = 0, double* all_each = nullptr) const;
  double relevant_spread(const LevelSummary* sums, int from, int to, int t) const;
  // The most instances the spatial factors of the levels above l can spread ranks `ranks` over,
  // with `rest` left of every rank (at most fanout_above[l]).
  double spread_above(int l, const std::array<int64_t, kMaxRanks>& rest, uint32_t ranks) const;
  // Besides the drains, each partial sum sent back down (the child's fills after the first-update
  // discount, and the parent's reads of them: `rd`, and `down` for an unchosen top).
  double output_drains(const TensorMask* keep_at, const LevelSummary* sums, int l, int kept_to, int m,
                       const std::array<int64_t, kMaxRanks>& rest, double above_l, double rest_all, const double* inst_least,
                       const double* inst_reducing, double* rd, double* wr, double* up, double* down,
                       const KeepSets& ks) const;

  // scalar_bounds in parts: what the kept sets do not change (bound_frame), each tensor's terms
  // (tensor_terms, given what every level 0..l keeps: `keep_at`), and their sum turned into the
  // two bounds (finish_bounds). The terms are sums, so tensors' terms made apart add up.
  struct BoundFrame {
    const KeepSets* ks = nullptr;
    int l = 0, kept_to = 0;
    const std::array<int64_t, kMaxRanks>* rest = nullptr;
    bool open_keep = false, open_temporal = false, top_open = false;
    double spread = 1, steps = 0, above_l = 1, rest_all = 1;
    double inst[kMaxLevels], inst_reducing[kMaxLevels], inst_least[kMaxLevels];
    double cum[kMaxLevels][kMaxRanks];  // window tensors: per rank, the tile factor of levels 0..k
  };
  // Made by clear(kept_to): only the levels up to kept_to are used (the arrays are left
  // uninitialised above, since a bound makes and sums many of these).
  struct TensorTerms {
    double served, moved, top_rd, top_wr;  // energy; words the unchosen top moves
    double rd[kMaxLevels], wr[kMaxLevels], wr_each[kMaxLevels];  // words per chosen level
    void clear(int kept_to);
    void add(const TensorTerms& o, int kept_to);
  };
  void bound_frame(const LevelChoice* chosen, const LevelSummary* sums, int l, const std::array<int64_t, kMaxRanks>& rest,
                   bool open_keep, bool open_temporal, const KeepSets* ks, BoundFrame& f) const;
  void tensor_terms(const BoundFrame& f, const LevelChoice* chosen, const LevelSummary* sums, const TensorMask* keep_at,
                    int t, TensorTerms& out) const;
  void finish_bounds(const BoundFrame& f, const TensorTerms& sum, double& energy_lb, double& cycles_lb) const;

  friend class TileWorker;
  friend struct TileCandidate;
  struct Impl;
  // Distinct per search made in this process: a worker's caches belong to one search, and a new
  // search may be made at a freed one's address.
  const uint64_t id_;
  const Einsum& e_;
  const Core& c_;
  const Mapspace& space_;
  TileSearchSpec spec_;
  EvalPlan plan_;
  EvalPlan rest_plan_;  // spec.rest_tiles > 0: plan_ with output_accumulates
  int L, R, T, top;
  std::vector<uint32_t> x_ok, y_ok;
  std::vector<std::array<uint8_t, kMaxRanks>> rank_class;
  std::vector<bool> plain;
  std::array<std::array<int64_t, kMaxRanks>, kMaxLevels> t_min{}, t_max{};
  std::array<std::array<int64_t, kMaxRanks>, kMaxLevels> reach_above{};  // levels l+1..top: most of rank r
  std::vector<std::vector<int64_t>> divisor_lists;  // divisors of every divisor of a rank size
  std::vector<int32_t> divisor_index;               // n -> its list in divisor_lists (n <= max rank size)
  std::vector<std::vector<TensorMask>> keep_options;
  std::vector<LevelChoice> roots_;
  std::array<uint32_t, kMaxLevels> loopable{};  // per level: ranks it may iterate (merged mode)
  // Per level: keeping nothing, its temporal factors must be 1 (TileSearchSpec::merge_passthrough).
  std::array<bool, kMaxLevels> passthrough{};
  // Merged mode: per level, the spatial loops always present (factor 1 = none), when adding them
  // makes no tensor dimension move under two spatial loops of the level (which would send the
  // lanes to the scalar multicast count); 0 = the choice's own spatial ranks.
  std::array<uint32_t, kMaxLevels> always_x{}, always_y{};
  bool merge = false;
  bool partial_ = false;
  // The vector unit's level when this search maps a non-MAC Einsum onto a core's vector unit (else
  // -1): its lanes store nothing and share nothing, so choices there that differ only in how each
  // rank's factor is split between loops and lanes cost the same; one of each is kept.
  int lanes_level = -1;
  // The plan partial choices are compared with: no capacity, fan-out minimum or must-keep rule
  // (decided elsewhere), and output fills counted before the first-update discount, so that every
  // count is a product of an inner and an outer part (partial.cpp, "Partial pruning").
  EvalPlan relaxed_;
  // Rows classified per kept set of the level below the top (TileWorker::complete), and how many
  // of them had a kept set beaten: that classification costs a bound per kept set, so a search
  // whose first rows never gain from it stops making it (exact either way).
  mutable std::atomic<int64_t> keep_rows{0}, keep_hits{0};
  // scalar_bounds: per level l, the product of the fan-outs above l (at most 2^40); per level and
  // tensor the energy of serving one compute step (update for the output, else read).
  std::array<int64_t, kMaxLevels> fanout_above{};
  std::array<std::array<double, kMaxTensors>, kMaxLevels> serve_pj{};
  std::array<TensorMask, kMaxLevels> may_keep_at{};  // per level: tensors some kept-set choice keeps
  std::array<TensorMask, kMaxLevels> must_keep_at{};  // per level: tensors every kept-set choice keeps
  // Per tensor, how many distinct values compute touches (at most its volume: a stride longer than
  // the kernel skips some), which every non-backing level keeping it must be filled with.
  std::array<double, kMaxTensors> touched_{};
  // Per tensor, the ranks that alone index one of its dimensions (coefficient 1): moving one of
  // them moves the whole tile, halos or not (plain_tile_moves).
  std::array<uint32_t, kMaxTensors> plain_ranks_{};
  uint32_t window_tensors_ = 0;  // bit t: tensor t has a dimension that is not plain (a halo)
  uint32_t reduction_ranks_ = 0;  // ranks the output does not index (bound_frame's inst_reducing)
  // The reads of the output's partial sums among `words` updates at its keeper: all but the first
  // update of each value per instance that starts its own sums (at most `reducing` of them), or
  // all of them when the tile accumulates onto earlier tiles (TileSearchSpec::rest_tiles).
  double output_reads(double words, double reducing) const {
    return plan_.output_accumulates
               ? words
               : std::max(0.0, words - static_cast<double>(plan_.tensors[static_cast<size_t>(plan_.output)].volume) * reducing);
  }
  std::vector<std::pair<int, int>> mirror_pairs_;  // break_symmetry: find_mirror's pairs
  void find_mirror();
  // Per level and window tensor, the axes (bit 0: x, bit 1: y) whose spatial loops can share the
  // tensor's values beyond the multicast groups: the axis may spread a rank of a dimension with
  // several ranks (or of several dimensions) and the level may have a second loop on that dimension
  // (serve_from_above).
  std::array<std::array<uint8_t, kMaxTensors>, kMaxLevels> window_axes_{};
  // Window tensors whose every rank indexes one dimension once (a depthwise or strided conv's
  // input): the distinct positions of a tile are then a product over dimensions
  // (window_position_fills).
  uint32_t window_disjoint_ = 0;
  // The outermost level's read (update) energy per word of tensor t, 0 if it cannot keep t.
  double top_read_pj(int t) const {
    return may_keep_at[L - 1] >> t & 1 ? plan_.levels[static_cast<size_t>(L - 1)].read_pj : 0;
  }
  double top_update_pj(int t) const {
    return may_keep_at[L - 1] >> t & 1 ? plan_.levels[static_cast<size_t>(L - 1)].update_pj : 0;
  }
  // Fills of a window tensor's tile whose per-rank extents are `cum` (all the factors of the levels
  // up to its keeper), at least: each of the tile's distinct positions in the data is visited, every
  // change of position brings at least the values of the shortest nonzero shift, whatever the loop
  // order and wherever the factors above sit. `total`: over all instances; `each`: per instance,
  // with at most `instances` of them.
  void window_position_fills(int t, const double* cum, double instances, double& total, double& each) const;

  // Per level, 1 / its read, write and shared bandwidth (0 where it has none): bandwidth_cycles.
  std::array<std::array<double, 3>, kMaxLevels> inv_bw_{};
  std::array<TensorMask, kMaxLevels> may_keep_above{};  // per level l: tensors a level above l may keep
  KeepSets keep_sets_;  // the three above
  // Per level with a fan-out: the most instances its spatial factors can use with what is left of
  // the ranks its axes accept (each factor a divisor of what is left, each axis at most its
  // fan-out), by the position of each such rank's rest among its size's divisors; empty when the
  // table would be too large (then the fan-out and the rests' product bound it).
  struct SpreadTable {
    std::vector<int> ranks;      // accepted on x or y, size > 1
    std::vector<size_t> stride;  // per rank, in the table
    std::vector<double> most;
  };
  std::array<SpreadTable, kMaxLevels> spread_table{};
  void make_spread_tables();
  std::atomic<int64_t> own_budget{0};
  std::atomic<bool> own_over{false};
  mutable std::atomic<int64_t> work_{0};
  mutable std::atomic<bool> truncated_{false};
  std::atomic<int64_t>* budget_;
  std::atomic<bool>* over_;

  const LevelConstraints* constraint(int l) const {
    return l < static_cast<int>(space_.levels.size()) ? &space_.levels[l] : nullptr;
  }
  const std::vector<int64_t>& divs(int64_t n) const { return divisor_lists[static_cast<size_t>(divisor_index[static_cast<size_t>(n)])]; }
  std::vector<int> order_signature(const std::vector<int>& order, uint32_t below) const;
  // The ranks of `iterated` (a bit per rank) in level l's loop order: its constraint's fixed order,
  // else rank order. Into `out` (cleared first).
  void loop_ranks(int l, uint32_t iterated, std::vector<int>& out) const;
  // Rejects a level's spatial factors (t all 1) before its temporal ones are enumerated. A
  // non-owning callable: descend makes one per node, and a std::function would allocate there.
  struct SpatialFilter {
    const void* context;
    bool (*rejects)(const void* context, const LevelChoice& spatial);
    bool operator()(const LevelChoice& spatial) const { return rejects(context, spatial); }
  };
  void level_choices(int l, const std::array<int64_t, kMaxRanks>& remaining, std::vector<LevelChoice>& out,
                     const SpatialFilter* spatial_dead = nullptr) const;
  bool fits(const LevelChoice* chosen, int l) const;
  // The same, with the per-rank extents of the levels below l given (`below`: the product of
  // their factors), as a search extending one inner choice has them.
  bool fits(const int64_t* below, const LevelChoice& ch, int l) const;
  // The words of the tiles `ch` keeps at its level, over the extents `below` of the levels under it.
  int64_t kept_words(const int64_t* below, const LevelChoice& ch) const;
  // False for a choice merge_passthrough leaves to the level above (keeps nothing, iterates).
  bool admissible(const LevelChoice& ch, int l) const {
    if (!passthrough[l] || ch.keep) return true;
    for (int r = 0; r < R; ++r)
      if (ch.t[r] > 1) return false;
    return true;
  }
};

// A thread's buckets and caches. Feeding it roots of another search first flushes what it holds.
class TileWorker {
 public:
  TileWorker();
  ~TileWorker();
  // Enumerates everything above root `i` of `s`, parking complete choices; full buckets are
  // evaluated and handed to `sink`.
  void run(const TileSearch& s, size_t i, TileSink& sink);
  // Branch and bound, best first: run() from root `i` for a few complete mappings or a bounded
  // amount of enumeration (worker_state.hpp, kProbeLeaves and kProbeWork), each evaluated as
  // it is found. Probes of the roots before the full search let each subtree's most promising
  // mappings set the incumbent early. Returns the choices it enumerated (at least 1).
  int64_t probe(const TileSearch& s, size_t i, TileSink& sink);
  // With partial pruning (TileSearch::partial_pruning), instead of run() per root, in two steps
  // that several workers can share: the pruned inner levels (one worker), then rows [begin, end)
  // completed into `sink`. Parked choices may remain: call finish().
  void prune(const TileSearch& s, PartialChoices& out);
  void complete(const TileSearch& s, const PartialChoices& p, size_t begin, size_t end, TileSink& sink);
  // Evaluates every parked choice (call once a thread is done).
  void finish();
  // Testing the lower bounds that let complete() skip a row: completes row `i` of `p` with
  // nothing pruned and hands every lane the sink would consider (valid, or over capacity) to
  // `check` with the bounds for the lane's outer fan-out. `level_more`: the bounds of every
  // choice of the row's next level (those complete() checks where the top level has kept-tensor
  // or fan-out choices) instead. False if no bound was made.
  using BoundCheck = std::function<void(const CompactCost& cost, double energy_lb, double cycles_lb)>;
  bool check_bounds(const TileSearch& s, const PartialChoices& p, size_t i, const BoundCheck& check,
                    bool level_more = false);
  // Testing how complete() classifies (which choices it skips by their fan-out and kept set):
  // row `i` is classified against a front holding one point of `threshold` pJ (it beats every
  // bound above that), then completed with nothing skipped; `check` gets every lane the sink
  // would consider with whether the classification skips it (a skipped one must cost more than
  // the threshold). `level_more`: the top level's classification of every choice of the row's
  // next level instead. False if nothing was classified.
  using ClassCheck = std::function<void(const CompactCost& cost, bool skipped)>;
  bool check_classification(const TileSearch& s, const PartialChoices& p, size_t i, double threshold,
                            const ClassCheck& check, bool level_more = false);
  // Testing the per-order bound of flush (a complete choice's lanes under one loop-order
  // combination are cut when the top's traffic in that order beats them): the bound for the
  // complete mapping `fm` of search `s`, whose serving energy (TileSearch::serving_energy) is
  // `serving` and whose other bounds are 0. False where the cut does not apply.
  bool check_order_bound(const TileSearch& s, const FlatMapping& fm, double serving, double& energy_lb,
                         double& cycles_lb);
  int64_t evaluated = 0, pruned = 0, lane_calls = 0;
  int64_t partial_evaluated = 0, partial_dropped = 0;  // partial pruning: choices compared, dropped
  int64_t bound_skipped = 0;  // partial rows whose completions the sink's bound check skipped
  int64_t stale_dropped = 0;   // branch and bound: parked choices the incumbent beat before their evaluation
  int64_t order_pruned = 0;    // branch and bound: (choice, loop-order combination) lanes cut by their top traffic
  int64_t fanout_skipped = 0;  // choices of the level below the top skipped: their fan-out's bounds are beaten
  // Branch and bound (TileSearchSpec::bound_scalar): choices whose completions' lower bounds the
  // sink beat, per level they were made at (each cut the whole subtree above it).
  std::array<int64_t, kMaxLevels> bound_pruned{};

 private:
  struct State;
  std::unique_ptr<State> st_;
};

}  // namespace mapfuse
