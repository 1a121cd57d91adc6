// Evaluation: complete choices parked in buckets by their support (per level: iterated, spread and
// kept), a full bucket evaluated 16 lanes at a time by the SIMD evaluator once per loop-order
// combination of its support, every lane handed to the sink; loop-nest analyses cached per
// structure.
#include <algorithm>
#include <bit>
#include <string>

#include "engine/common/error.hpp"
#include "engine/search/tile_search/worker_state.hpp"

namespace mapfuse {

const NestStructure& TileWorker::State::nest_of(const FlatMapping& fm, bool relaxed) {
  auto& cache = relaxed ? relaxed_nests : nests;
  NestKey k;
  size_t i = 0;
  k.b[i++] = static_cast<uint8_t>(fm.n_loops);
  k.b[i++] = fm.onchip_backing;
  for (int l = 0; l < fm.n_levels; ++l) k.b[i++] = fm.keep[static_cast<size_t>(l)];
  for (int j = 0; j < fm.n_loops; ++j) {
    const FlatLoop& lp = fm.loops[static_cast<size_t>(j)];
    k.b[i++] = static_cast<uint8_t>(lp.level);
    k.b[i++] = static_cast<uint8_t>(lp.rank);
    k.b[i++] = static_cast<uint8_t>(lp.kind);
  }
  if (auto it = cache.find(k); it != cache.end()) return it->second;
  if (cache.size() >= kMaxNests) cache.clear();
  return cache.emplace(k, analyze(relaxed ? s->relaxed_ : s->plan_, fm)).first->second;
}

void TileWorker::State::park_merged() {
  const int L = s->L, R = s->R;
  Support key;
  uint32_t below = 0;
  int64_t combos = 1;
  for (int l = 0; l < L; ++l) {
    const LevelChoice& ch = chosen[l];
    if (l < fixed_levels) {
      uint32_t x = 0, y = 0;
      for (int r = 0; r < R; ++r) {
        x |= uint32_t(ch.x[r] > 1) << r;
        y |= uint32_t(ch.y[r] > 1) << r;
      }
      if (s->always_x[l] | s->always_y[l]) x = s->always_x[l], y = s->always_y[l];
      key.w[l] = x << 8 | y << 16 | uint32_t(ch.keep) << 24;
      fixed_single[l].assign(1, fixed_code[l]);
      park_codes[l] = &fixed_single[l];
      key.o[l] = fixed_code[l];
      below |= ch.keep;
      continue;
    }
    uint32_t t = 0, x = 0, y = 0;
    for (int r = 0; r < R; ++r) {
      t |= uint32_t(ch.t[r] > 1) << r;
      x |= uint32_t(ch.x[r] > 1) << r;
      y |= uint32_t(ch.y[r] > 1) << r;
    }
    if (s->always_x[l] | s->always_y[l]) x = s->always_x[l], y = s->always_y[l];
    key.w[l] = x << 8 | y << 16 | uint32_t(ch.keep) << 24;
    const size_t fast = (static_cast<size_t>(l) << (kMaxTensors + kMaxRanks)) | (below << kMaxRanks) | t;
    const std::vector<std::vector<int>>* cls = order_fast[fast];
    if (!cls) {
      s->loop_ranks(l, t, park_ranks);
      cls = &order_classes(l, park_ranks, below);
    }
    const std::vector<uint32_t>*& codes = code_fast[fast];
    if (!codes) codes = &codes_of(l, *cls);
    park_codes[l] = codes;
    key.o[l] = (*park_codes[l])[0];
    combos *= static_cast<int64_t>(cls->size());
    below |= ch.keep;
  }
  std::array<size_t, kMaxLevels> pick{};
  for (int64_t combo = 0; combo < combos; ++combo) {
    put(key);
    for (int l = 0; l < L; ++l) {
      if (++pick[l] < park_codes[l]->size()) {
        key.o[l] = (*park_codes[l])[pick[l]];
        break;
      }
      pick[l] = 0;
      key.o[l] = (*park_codes[l])[0];
    }
  }
}

void TileWorker::State::park() {
  park_serving = -1;
  if (order_cut_possible()) {
    summarize(s->L - 1, chosen[static_cast<size_t>(s->L - 1)]);  // the top's, for this choice
    park_serving = s->serving_energy(chosen.data(), sums.data());
  }
  if (s->merge) {
    park_merged();
    return;
  }
  const int L = s->L, R = s->R;
  Support key;
  for (int l = 0; l < L; ++l) {
    uint32_t t = 0, x = 0, y = 0;
    const LevelChoice& ch = chosen[l];
    for (int r = 0; r < R; ++r) {
      t |= uint32_t(ch.t[r] > 1) << r;
      x |= uint32_t(ch.x[r] > 1) << r;
      y |= uint32_t(ch.y[r] > 1) << r;
    }
    key.w[l] = t | x << 8 | y << 16 | uint32_t(ch.keep) << 24;
  }
  put(key);
}

void TileWorker::State::put(const Support& key) {
  const int L = s->L, R = s->R;
  uint64_t h = 0x9E3779B97F4A7C15ull;
  for (int l = 0; l < L; ++l) {
    h = (h ^ (uint64_t(key.w[l]) << 32 | key.o[l])) * 0xFF51AFD7ED558CCDull;
    h ^= h >> 32;
  }
  size_t pos = static_cast<size_t>(h) & table_mask;
  while (table[pos] != 0 && !(bucket_support[table[pos] - 1] == key)) pos = (pos + 1) & table_mask;
  if (table[pos] == 0) {
    if (counts.size() == max_live) {
      flush_all();
      pos = static_cast<size_t>(h) & table_mask;
    }
    table[pos] = static_cast<uint32_t>(counts.size()) + 1;
    table_used.push_back(static_cast<uint32_t>(pos));
    counts.push_back(0);
    bucket_support.push_back(key);
  }
  const size_t bi = table[pos] - 1;
  if (s->spec_.bound_scalar) {
    double* b = pool_bounds.get() + (bi * kLanes + static_cast<size_t>(counts[bi])) * kBoundWords;
    b[0] = last_energy_lb;
    b[1] = last_cycles_lb;
    b[2] = park_serving;
  }
  int32_t* f = pool.get() + (bi * kLanes + static_cast<size_t>(counts[bi]++)) * W;
  for (int l = 0; l < L; ++l)
    for (int r = 0; r < R; ++r) {
      f[(l * 3 + 0) * R + r] = static_cast<int32_t>(chosen[l].t[r]);
      f[(l * 3 + 1) * R + r] = static_cast<int32_t>(chosen[l].x[r]);
      f[(l * 3 + 2) * R + r] = static_cast<int32_t>(chosen[l].y[r]);
    }
  if (counts[bi] == kLanes) {
    flush_bucket(bi);
    counts[bi] = 0;
  }
}

void TileWorker::State::flush_bucket(size_t bi) {
  int32_t* lanes = pool.get() + bi * kLanes * W;
  int count = counts[bi];
  double* b = nullptr;
  if (s->spec_.bound_scalar) {
    // Only the choices the incumbent does not beat by now (their bounds were made when parked),
    // compacted in place: the bucket is emptied after this.
    b = pool_bounds.get() + bi * kLanes * kBoundWords;
    int alive = 0;
    for (int k = 0; k < count; ++k) {
      if (sink->beaten(b[kBoundWords * k], b[kBoundWords * k + 1], -1, 0)) continue;
      if (alive != k) {
        std::copy_n(lanes + static_cast<size_t>(k) * W, W, lanes + static_cast<size_t>(alive) * W);
        std::copy_n(b + kBoundWords * k, kBoundWords, b + kBoundWords * alive);
      }
      ++alive;
    }
    owner->stale_dropped += count - alive;
    count = alive;
  }
  if (count > 0) flush(bucket_support[bi], lanes, count, b);
}

void TileWorker::State::flush_all() {
  for (size_t i = 0; i < counts.size(); ++i)
    if (counts[i] > 0) flush_bucket(i);
  counts.clear();
  bucket_support.clear();
  // Only the slots in use: before the first incumbent (and in probes) every parked choice is
  // flushed at once, and clearing the whole table each time was 27 % of the instructions of
  // layer2.0.conv2's search (callgrind; cheap ones: no measurable time).
  for (uint32_t pos : table_used) table[pos] = 0;
  table_used.clear();
}

void TileWorker::State::flush(const Support& key, const int32_t* lanes, int count, const double* bounds) {
  const int L = s->L, R = s->R;
  const TileSearchSpec& spec = s->spec_;
  std::array<const std::vector<std::vector<int>>*, kMaxLevels> classes{};
  std::array<TensorMask, kMaxLevels> keep{};
  uint32_t below = 0;
  int64_t combos = 1;
  std::vector<int> ranks;
  for (int l = 0; l < L; ++l) {
    const uint32_t iterated = key.w[l] & 0xFF;
    keep[l] = static_cast<TensorMask>(key.w[l] >> 24);
    if (s->merge) {  // the structure is the key's: one combination
      merged_orders[l].clear();
      for (uint32_t code = key.o[l]; code; code >>= 4) merged_orders[l].push_back(static_cast<int>(code & 15) - 1);
      merged_class[l].assign(1, merged_orders[l]);
      classes[l] = &merged_class[l];
      continue;
    }
    s->loop_ranks(l, iterated, ranks);
    classes[l] = &order_classes(l, ranks, below);
    combos *= static_cast<int64_t>(classes[l]->size());
    below |= keep[l];
  }
  if (spec.max_evaluations > 0 &&
      s->budget_->fetch_add(combos * count, std::memory_order_relaxed) + combos * count > spec.max_evaluations) {
    s->over_->store(true, std::memory_order_relaxed);
    return;
  }
  std::array<size_t, kMaxLevels> pick{};
  std::array<const std::vector<int>*, kMaxLevels> order{};
  FlatMapping fm;
  LaneFactors lf;
  order_setup(key, lanes, count, bounds);
  int alive[kLanes];
  CompactCost out[kLanes];
  TileCandidate cand;
  cand.search = s;
  cand.R = R;
  cand.order = &order;
  cand.keep = &keep;
  for (int64_t combo = 0; combo < combos; ++combo) {
    // The combination's loop nest, outermost first, as flatten() lays it out.
    fm = FlatMapping{};
    fm.n_levels = static_cast<int8_t>(L);
    for (int l = L - 1; l >= 0; --l) {
      fm.keep[l] = keep[l];
      order[l] = &(*classes[l])[pick[l]];
      auto add = [&](int r, LoopKind k) {
        if (fm.n_loops == kMaxLoops) throw InputError({}, "mapping", "more than " + std::to_string(kMaxLoops) + " loops");
        fm.loops[fm.n_loops++] = {static_cast<int8_t>(l), static_cast<int8_t>(r), k, 2};
      };
      for (int r : *order[l]) add(r, LoopKind::Temporal);
      for (int r = 0; r < R; ++r)
        if (key.w[l] >> (8 + r) & 1) add(r, LoopKind::SpatialX);
      for (int r = 0; r < R; ++r)
        if (key.w[l] >> (16 + r) & 1) add(r, LoopKind::SpatialY);
    }
    if (spec.onchip_backing) {  // fused: the on-chip tensors are backed at their level, not DRAM
      fm.keep[L - 1] = static_cast<TensorMask>(fm.keep[L - 1] & ~spec.onchip_backing);
      fm.onchip_backing = spec.onchip_backing;
    }
    const int n = order_alive(fm, lanes, count, bounds, alive);
    if (n > 0) {
      const NestStructure& ns = nest_of(fm);
      for (int i = 0; i < fm.n_loops; ++i) {
        const size_t sl = static_cast<size_t>(cand.slot(fm.loops[i].level, fm.loops[i].kind, fm.loops[i].rank));
        for (int k = 0; k < n; ++k) lf[i][k] = lanes[static_cast<size_t>(alive[k]) * W + sl];
      }
      evaluate_lanes(s->plan_, ns, lf, n, out);
      if (spec.rest_tiles > 0) {  // the whole Einsum: first tiles plus accumulating ones (fused_total)
        CompactCost rest[kLanes];
        evaluate_lanes(s->rest_plan_, ns, lf, n, rest);
        const double n1 = static_cast<double>(spec.first_tiles), n2 = static_cast<double>(spec.rest_tiles);
        for (int k = 0; k < n; ++k) {
          if (out[k].invalid == Invalid::None && rest[k].invalid != Invalid::None &&
              rest[k].invalid != Invalid::CapacityExceeded)
            out[k].invalid = rest[k].invalid;
          out[k].energy_pj = out[k].energy_pj * n1 + rest[k].energy_pj * n2;
          out[k].cycles = out[k].cycles * n1 + rest[k].cycles * n2;
        }
      }
      ++owner->lane_calls;
      owner->evaluated += n;
      for (int k = 0; k < n; ++k) {
        cand.factors = lanes + static_cast<size_t>(alive[k]) * W;
        sink->consume(cand, out[k]);
      }
    }
    owner->order_pruned += count - n;
    for (int l = 0; l < L; ++l) {  // next combination (odometer, level 0 fastest)
      if (++pick[l] < classes[l]->size()) break;
      pick[l] = 0;
    }
  }
}

bool TileWorker::State::order_cut_possible() const {
  // A search of the whole Einsum down from the outermost level, nothing backed on chip: the top's
  // fills are then the model's parent reads and updates of each tensor's outermost keeper below it.
  const TileSearchSpec& spec = s->spec_;
  return spec.bound_scalar && s->top == s->L - 1 && s->L >= 2 && spec.backing_level < 0 && !spec.onchip_backing &&
         spec.rest_tiles == 0 && !s->plan_.output_accumulates && !s->partial_;
}

void TileWorker::State::order_setup(const Support& key, const int32_t* lanes, int count, const double* bounds) {
  OrderCut& oc = order_cut;
  oc.on = false;
  oc.n = 0;
  if (!bounds || !order_cut_possible()) return;
  for (int k = 0; k < count; ++k)
    if (!(bounds[kBoundWords * k + 2] >= 0)) return;
  const int L = s->L, R = s->R, top = L - 1;
  const EvalPlan& p = s->plan_;
  TensorMask keep[kMaxLevels];
  for (int l = 0; l < L && l < kMaxLevels; ++l) keep[l] = static_cast<TensorMask>(key.w[l] >> 24);
  for (int t = 0; t < s->T; ++t) {
    if (!(keep[top] >> t & 1)) continue;
    int k = top - 1;
    while (k >= 0 && !(keep[k] >> t & 1)) --k;
    if (k < 0) continue;  // served from the top itself: its serving is in the serving energy
    const PlanTensor& pt = p.tensors[static_cast<size_t>(t)];
    const int i = oc.n++;
    oc.tensor[i] = t;
    oc.keeper[i] = k;
    for (int lane = 0; lane < count; ++lane) {
      const int32_t* f = lanes + static_cast<size_t>(lane) * W;
      // The keeper's tile (every factor of the levels up to it) and the distinct tiles the spatial
      // factors between it and the top spread over ranks alone in one of t's dimensions.
      double cum[kMaxRanks];
      for (int r = 0; r < R; ++r) {
        double e = 1;
        for (int l = 0; l <= k; ++l) e *= static_cast<double>(f[(l * 3) * R + r]) * f[(l * 3 + 1) * R + r] * f[(l * 3 + 2) * R + r];
        cum[r] = e;
      }
      double tile = 1;
      for (int d = 0; d < pt.n_dims; ++d)
        tile *= pt.plain_rank[d] >= 0 ? cum[pt.plain_rank[d]] : window_extent(pt.dims[d], cum);
      for (int l = k + 1; l <= top; ++l)
        for (int r = 0; r < R; ++r)
          if (pt.rank_terms[r] == 1 && pt.plain_rank[pt.rank_dim[r][0]] == r)
            tile *= static_cast<double>(f[(l * 3 + 1) * R + r]) * f[(l * 3 + 2) * R + r];
      oc.tile[i][lane] = tile;
    }
  }
  oc.on = oc.n > 0;
}

int TileWorker::State::order_alive(const FlatMapping& fm, const int32_t* lanes, int count, const double* bounds,
                                   int* alive) {
  if (!order_cut.on) {
    for (int k = 0; k < count; ++k) alive[k] = k;
    return count;
  }
  double energy[kLanes], rd[kLanes], wr[kLanes];
  order_bounds(fm, lanes, count, bounds, energy, rd, wr);
  // The top's bandwidth time only for the lanes the energy alone does not beat (every sink's
  // criterion is monotone in the cycles).
  const int top = s->L - 1;
  int n = 0;
  for (int k = 0; k < count; ++k) {
    const double cycles = bounds[kBoundWords * k + 1];
    if (sink->beaten(energy[k], cycles, -1, 0)) continue;
    if (!sink->beaten(energy[k], std::max(cycles, s->bandwidth_cycles(top, rd[k], wr[k])), -1, 0)) alive[n++] = k;
  }
  return n;
}

void TileWorker::State::order_bounds(const FlatMapping& fm, const int32_t* lanes, int count, const double* bounds,
                                     double* energy_lb, double* top_rd, double* top_wr) const {
  const OrderCut& oc = order_cut;
  // Per tensor, the temporal loops above its keeper, outermost first (their factors by slot, and
  // whether the loop is over one of t's plain ranks). The keeper takes its whole tile once per
  // iteration of the loops down to the innermost one over a plain rank that steps (factor > 1):
  // plain_tile_moves with the order known. Its parent, the top, reads (updates) that many words
  // times the distinct tiles; all but the first update of each output value also read.
  const int R = s->R, top = s->L - 1;
  const EvalPlan& p = s->plan_;
  const PlanLevel& tl = p.levels[static_cast<size_t>(top)];
  int slot[kMaxTensors][kMaxLoops];
  bool plain[kMaxTensors][kMaxLoops];
  int loops[kMaxTensors];
  for (int i = 0; i < oc.n; ++i) {
    const int t = oc.tensor[i];
    loops[i] = 0;
    for (int j = 0; j < fm.n_loops; ++j) {
      const FlatLoop& lp = fm.loops[static_cast<size_t>(j)];
      if (lp.kind != LoopKind::Temporal || lp.level <= oc.keeper[i]) continue;
      slot[i][loops[i]] = (lp.level * 3) * R + lp.rank;
      plain[i][loops[i]++] = s->plain_ranks_[static_cast<size_t>(t)] >> lp.rank & 1;
    }
  }
  const double volume = p.output >= 0 ? static_cast<double>(p.tensors[static_cast<size_t>(p.output)].volume) : 0;
  for (int k = 0; k < count; ++k) {
    const int32_t* f = lanes + static_cast<size_t>(k) * W;
    double energy = bounds[kBoundWords * k + 2], rd = 0, wr = 0;
    for (int i = 0; i < oc.n; ++i) {
      double run = 1, moves = 1;
      for (int j = 0; j < loops[i]; ++j) {
        const int32_t fj = f[slot[i][j]];
        run *= fj;
        if (plain[i][j] && fj > 1) moves = run;
      }
      const double words = moves * oc.tile[i][k];
      if (oc.tensor[i] == p.output) {
        const double reads = std::max(0.0, words - volume);
        energy += words * tl.update_pj + reads * tl.read_pj;
        wr += words;
        rd += reads;
      } else {
        energy += words * tl.read_pj;
        rd += words;
      }
    }
    energy_lb[k] = std::max(energy * (1 - 1e-9), bounds[kBoundWords * k]);
    top_rd[k] = rd;
    top_wr[k] = wr;
  }
}

void TileWorker::State::bind(const TileSearch& search, TileSink* to) {
  if (s == &search && search_id == search.id_ && sink == to) return;
  if (s) flush_all();
  if (s != &search || search_id != search.id_) {
    search_id = search.id_;
    for (auto& c : spatial_sums) c.valid = false;
    s = &search;
    make_split_sets();
    orders.clear();
    code_cache.clear();
    nests.clear();
    relaxed_nests.clear();
    fanout_cache.clear();
    std::fill(code_fast.begin(), code_fast.end(), nullptr);
    std::fill(order_fast.begin(), order_fast.end(), nullptr);
    bound_orders.clear();
  }
  s = &search;
  W = static_cast<size_t>(3 * search.L * search.R);
  max_live = kPoolWords / (kLanes * W);
  table.assign(std::bit_ceil(2 * max_live), 0u);
  table_used.clear();
  table_mask = table.size() - 1;
  if (!pool) pool.reset(new int32_t[kPoolWords]);
  if (search.spec_.bound_scalar) {
    if (pool_bounds_size < max_live * kLanes * kBoundWords) {
      pool_bounds_size = max_live * kLanes * kBoundWords;
      pool_bounds.reset(new double[pool_bounds_size]);
    }
  }
  sink = to;
}

}  // namespace mapfuse
