// Partial pruning (TileSearchSpec::prune_partial; the idea is documented in worker_state.hpp and
// docs/mapper.md): inner-level choices stored as rows, grouped by what the outer levels can tell
// apart, compared on every count under a reference completion; the survivors are completed row
// by row with their completion bounds.
#include <algorithm>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>

#include "engine/common/error.hpp"
#include "engine/search/tile_search/worker_state.hpp"

namespace mapfuse {

void TileWorker::State::load(const int32_t* p, int d, std::array<int64_t, kMaxRanks>& rem) {
  const int R = s->R;
  for (int l = 0; l < d; ++l) {
    const int32_t* q = level_slot(p, l);
    LevelChoice& ch = chosen[l];
    for (int r = 0; r < R; ++r) ch.t[r] = q[r], ch.x[r] = q[R + r], ch.y[r] = q[2 * R + r];
    ch.keep = static_cast<TensorMask>(q[3 * R]);
    fixed_code[l] = static_cast<uint32_t>(q[3 * R + 1]);
  }
  rem.fill(1);
  for (int r = 0; r < R; ++r) rem[r] = rem_slot(p)[r];
}

void TileWorker::State::store(int32_t* p, int d, const std::array<int64_t, kMaxRanks>& rem) const {
  const int R = s->R;
  for (int l = 0; l < d; ++l) {
    int32_t* q = level_slot(p, l);
    const LevelChoice& ch = chosen[l];
    for (int r = 0; r < R; ++r)
      q[r] = static_cast<int32_t>(ch.t[r]), q[R + r] = static_cast<int32_t>(ch.x[r]), q[2 * R + r] = static_cast<int32_t>(ch.y[r]);
    q[3 * R] = ch.keep;
    q[3 * R + 1] = static_cast<int32_t>(fixed_code[l]);
  }
  for (int r = 0; r < R; ++r) rem_slot(p)[r] = static_cast<int32_t>(rem[r]);
}

TileWorker::State::GroupKey TileWorker::State::group_key(int d, const std::array<int64_t, kMaxRanks>& rem) const {
  const int R = s->R, T = s->T;
  GroupKey k{};
  for (int r = 0; r < R; ++r) k[r] = rem[r];
  for (int t = 0; t < T; ++t) {
    const uint32_t ranks = s->plan_.tensors[t].relevant_ranks;
    // loop_above[l]: a real temporal loop over the tensor's ranks at levels l+1..d-1.
    bool loop_above = false;
    int64_t mask = 0;
    int outermost = -1;
    for (int l = d - 1; l >= 0; --l) {
      const bool kept = chosen[l].keep >> t & 1;
      if (kept && outermost < 0) {
        outermost = l;
        if (loop_above) mask |= int64_t{1} << 15;
      }
      if (kept && loop_above) mask |= int64_t{1} << l;
      for (int r = 0; r < R; ++r) loop_above = loop_above || ((ranks >> r & 1) && chosen[l].t[r] > 1);
    }
    if (outermost < 0) mask |= int64_t{1} << 15;  // compute: one fetch per operation
    k[R + t] = mask;
  }
  return k;
}

bool TileWorker::State::reference(int d, const std::array<int64_t, kMaxRanks>& rem) {
  const int L = s->L, R = s->R, top = s->top;
  const TileSearchSpec& spec = s->spec_;
  FlatMapping fm;
  fm.n_levels = static_cast<int8_t>(L);
  auto add = [&](int l, int r, LoopKind k, int64_t f) {
    if (fm.n_loops == kMaxLoops) throw InputError({}, "mapping", "more than " + std::to_string(kMaxLoops) + " loops");
    fm.loops[fm.n_loops++] = {static_cast<int8_t>(l), static_cast<int8_t>(r), k, f};
  };
  for (int l = L - 1; l >= 0; --l) {
    if (l < d) {
      const LevelChoice& ch = chosen[l];
      fm.keep[l] = ch.keep;
      for (uint32_t code = fixed_code[l]; code; code >>= 4) {
        const int r = static_cast<int>(code & 15) - 1;
        if (ch.t[r] > 1) add(l, r, LoopKind::Temporal, ch.t[r]);
      }
      for (int r = 0; r < R; ++r)
        if (ch.x[r] > 1) add(l, r, LoopKind::SpatialX, ch.x[r]);
      for (int r = 0; r < R; ++r)
        if (ch.y[r] > 1) add(l, r, LoopKind::SpatialY, ch.y[r]);
    } else if (l == top) {
      fm.keep[l] = s->keep_options[l].front();
      for (int r = 0; r < R; ++r)
        if (rem[r] > 1) add(l, r, LoopKind::Temporal, rem[r]);
    } else {
      fm.keep[l] = l > top ? s->keep_options[l].front() : TensorMask{0};
    }
  }
  if (spec.onchip_backing) {
    fm.keep[L - 1] = static_cast<TensorMask>(fm.keep[L - 1] & ~spec.onchip_backing);
    fm.onchip_backing = spec.onchip_backing;
  }
  int64_t factors[kMaxLoops];
  for (int i = 0; i < fm.n_loops; ++i) factors[i] = fm.loops[static_cast<size_t>(i)].factor;
  evaluate(s->relaxed_, nest_of(fm, true), factors, &part_cost);
  ref_keep = fm.keep;
  return part_cost.valid();
}

bool TileWorker::State::components(int d, const std::array<int64_t, kMaxRanks>& rem) {
  const int L = s->L, R = s->R, T = s->T;
  ++owner->partial_evaluated;
  if (!reference(d, rem)) return false;
  const CostResult& c = part_cost;
  comp.clear();
  for (int l = 0; l < L; ++l) {
    const PlanLevel& lv = s->plan_.levels[l];
    const bool per_instance = lv.block_size > 1 || lv.read_bw > 0 || lv.write_bw > 0 || lv.shared_bw > 0;
    const double inst = static_cast<double>(std::max<int64_t>(1, c.level_instances[l]));
    for (int t = 0; t < T; ++t) {
      const TensorAccesses& a = c.access[l][t];
      comp.push_back(static_cast<double>(a.reads));
      comp.push_back(static_cast<double>(a.fills));
      comp.push_back(static_cast<double>(a.updates));
      if (per_instance) {
        comp.push_back(static_cast<double>(a.reads) / inst);
        comp.push_back(static_cast<double>(a.fills) / inst);
        comp.push_back(static_cast<double>(a.updates) / inst);
      }
    }
    if (lv.block_size > 1) comp.push_back(inst);
  }
  comp.push_back(c.compute_cycles);
  for (int l = 0; l < d; ++l) comp.push_back(static_cast<double>(c.level_occupancy[l]));
  // The outputs' first updates: more instances sharing a value (spatial loops over ranks it
  // does not index) and more splitting it (over ranks it indexes) both discount more.
  const int out_t = s->plan_.output;
  if (out_t >= 0) {
    const uint32_t ranks = s->plan_.tensors[out_t].relevant_ranks;
    for (int l = 0; l + 1 < d; ++l) {
      int64_t share = 1, split = 1;
      for (int k = l + 1; k < d; ++k)
        for (int r = 0; r < R; ++r) {
          const int64_t f = chosen[k].x[r] * chosen[k].y[r];
          (ranks >> r & 1 ? split : share) *= f;
        }
      comp.push_back(1.0 / static_cast<double>(share));
      comp.push_back(1.0 / static_cast<double>(split));
    }
  }
  return true;
}

size_t TileWorker::State::comp_size(int d) const {
  size_t D = 0;
  for (int l = 0; l < s->L; ++l) {
    const PlanLevel& lv = s->plan_.levels[l];
    const bool per_instance = lv.block_size > 1 || lv.read_bw > 0 || lv.write_bw > 0 || lv.shared_bw > 0;
    D += static_cast<size_t>(s->T) * (per_instance ? 6 : 3) + (lv.block_size > 1 ? 1 : 0);
  }
  D += 1 + static_cast<size_t>(d);
  if (s->plan_.output >= 0 && d > 1) D += 2 * static_cast<size_t>(d - 1);
  return D;
}

void TileWorker::State::extend_level(int d, const int32_t* rows, size_t n, bool last) {
  const int R = s->R;
  std::vector<int> ranks;
  std::array<int64_t, kMaxRanks> rem{};
  int64_t rejected = 0;  // choices the model rejects, each in a group of its own
  size_t dead = 0;       // dropped after they were stored
  next_pool.clear();
  comps.clear();
  alive.clear();
  groups.clear();
  const size_t D = comp_size(d + 1);
  for (size_t i = 0; i < n; ++i) {
    load(rows + i * pstride, d, rem);
    uint32_t below = 0;
    for (int l = 0; l < d; ++l) below |= chosen[l].keep;
    std::vector<LevelChoice>& choices = scratch[d];
    s->level_choices(d, rem, choices);
    for (const LevelChoice& ch : choices) {
      if (d == filter_level && fanout_beaten(ch)) {
        ++owner->fanout_skipped;
        continue;
      }
      std::array<int64_t, kMaxRanks> rest = rem;
      for (int r = 0; r < R; ++r) rest[r] /= ch.t[r] * ch.x[r] * ch.y[r];
      uint32_t iterated = 0;
      for (int r = 0; r < R; ++r) iterated |= uint32_t(ch.t[r] > 1) << r;
      s->loop_ranks(d, iterated, ranks);
      const std::vector<uint32_t>& codes = codes_of(d, order_classes(d, ranks, below));
      for (TensorMask keep : s->keep_options[d]) {
        if (d == filter_level && keep_beaten(ch, keep)) {
          ++owner->fanout_skipped;
          continue;
        }
        chosen[d] = ch;
        chosen[d].keep = keep;
        if (!s->admissible(chosen[d], d)) continue;
        if (!s->fits(chosen.data(), d)) {
          ++owner->pruned;
          continue;
        }
        const bool compare = !last || top_orders(rest) >= s->spec_.last_level_min_orders;
        for (uint32_t code : codes) {
          fixed_code[d] = code;
          if (!compare) {  // few completions: evaluating them is cheaper than comparing
            complete_top(d + 1, rest);
            continue;
          }
          const bool ok = components(d + 1, rest);
          // Rejected by the model: kept on its own (never compared).
          GroupKey key = group_key(d + 1, rest);
          if (!ok) key[0] = -(++rejected);
          if (ok && comp.size() != D) throw std::logic_error("partial pruning: comparison vector length");
          std::vector<uint32_t>& g = groups[key];
          bool dropped = false;
          if (ok)
            for (uint32_t j : g) {
              const double* o = comps.data() + static_cast<size_t>(j) * D;
              bool le = true;
              for (size_t q = 0; q < D && le; ++q) le = o[q] <= comp[q];
              if (le) {  // dominated or equal: the earlier one stays
                dropped = true;
                break;
              }
            }
          if (dropped) {
            ++owner->partial_dropped;
            continue;
          }
          if (ok)
            std::erase_if(g, [&](uint32_t j) {
              const double* o = comps.data() + static_cast<size_t>(j) * D;
              for (size_t q = 0; q < D; ++q)
                if (comp[q] > o[q]) return false;
              alive[j] = 0;
              ++dead;
              ++owner->partial_dropped;
              return true;
            });
          const uint32_t idx = static_cast<uint32_t>(alive.size());
          g.push_back(idx);
          alive.push_back(1);
          comps.resize(comps.size() + D, 0.0);
          if (ok) std::copy(comp.begin(), comp.end(), comps.end() - static_cast<std::ptrdiff_t>(D));
          next_pool.resize(next_pool.size() + pstride);
          store(next_pool.data() + next_pool.size() - pstride, d + 1, rest);
          if (dead > 65536 && 2 * dead > alive.size()) {  // reclaim the dropped ones' rows
            std::vector<uint32_t> to(alive.size());
            uint32_t m = 0;
            for (size_t j = 0; j < alive.size(); ++j) {
              if (!alive[j]) continue;
              to[j] = m;
              if (m != j) {
                std::copy_n(comps.begin() + static_cast<std::ptrdiff_t>(j * D), D, comps.begin() + static_cast<std::ptrdiff_t>(m * D));
                std::copy_n(next_pool.begin() + static_cast<std::ptrdiff_t>(j * pstride), pstride,
                            next_pool.begin() + static_cast<std::ptrdiff_t>(size_t{m} * pstride));
              }
              ++m;
            }
            alive.assign(m, 1);
            comps.resize(size_t{m} * D);
            next_pool.resize(size_t{m} * pstride);
            for (auto& [gk, members] : groups)
              for (uint32_t& j : members) j = to[j];
            dead = 0;
          }
        }
      }
    }
  }
}

void TileWorker::State::prune_levels(PartialChoices& out) {
  const int R = s->R, top = s->top;
  pstride = static_cast<size_t>(s->L) * (3 * R + 2) + static_cast<size_t>(R);
  part_pool.assign(pstride, 0);  // one empty partial choice
  {
    std::array<int64_t, kMaxRanks> rem{};
    rem.fill(1);
    for (int r = 0; r < R; ++r) rem[r] = s->e_.ranks[r].size;
    store(part_pool.data(), 0, rem);
  }
  const int stop = top - 1;  // the level below the top is compared block by block (complete)
  for (int d = 0; d < stop && !s->over(); ++d) {
    extend_level(d, part_pool.data(), part_pool.size() / pstride, false);
    // Survivors, in the order they were found.
    part_pool.clear();
    for (size_t i = 0; i < alive.size(); ++i)
      if (alive[i]) part_pool.insert(part_pool.end(), next_pool.begin() + i * pstride, next_pool.begin() + (i + 1) * pstride);
  }
  out.levels = stop;
  out.stride = pstride;
  // The most promising first (smallest bounds), so that the sink's front holds good points
  // early and later rows can be skipped (complete).
  const size_t n = part_pool.size() / pstride;
  std::vector<double> score(n, 0.0);
  std::array<int64_t, kMaxRanks> rem{};
  for (size_t i = 0; i < n && !s->over(); ++i) {
    load(part_pool.data() + i * pstride, stop, rem);
    if (!completion_bounds(stop, rem)) continue;
    double e = std::numeric_limits<double>::infinity(), c = e;
    for (const Bound& bd : bounds) e = std::min(e, bd.energy), c = std::min(c, bd.cycles);
    score[i] = e * c;
  }
  std::vector<uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return score[a] < score[b]; });
  out.rows.resize(part_pool.size());
  for (size_t i = 0; i < n; ++i)
    std::copy_n(part_pool.begin() + static_cast<std::ptrdiff_t>(order[i] * pstride), pstride,
                out.rows.begin() + static_cast<std::ptrdiff_t>(i * pstride));
}

void TileWorker::State::complete(const PartialChoices& p, size_t begin, size_t end) {
  pstride = p.stride;
  const int d = p.levels;
  fixed_levels = d + 1;
  std::array<int64_t, kMaxRanks> rem{};
  for (size_t row = begin; row < end && !s->over(); ++row) {
    const int32_t* r = p.rows.data() + row * pstride;
    flush_all();
    load(r, d, rem);
    // The bounds of every outer fan-out: the row is skipped if all are beaten, else the
    // choices of level d whose fan-out is beaten in every completion.
    bool all_beaten = false;
    if (classify_fanouts(d, rem, all_beaten)) {
      if (all_beaten) {
        ++owner->bound_skipped;
        continue;
      }
      if (!fanout_dead.empty() || !keep_dead.empty()) filter_level = d;  // else no choice can be skipped
    }
    extend_level(d, r, 1, true);
    filter_level = -1;
    for (size_t i = 0; i < alive.size() && !s->over(); ++i) {
      if (!alive[i]) continue;
      load(next_pool.data() + i * pstride, d + 1, rem);
      complete_top(d + 1, rem);
    }
  }
  fixed_levels = 0;
}

}  // namespace mapfuse
