#include "engine/search/ffm/pmappings.hpp"

#include <algorithm>
#include <atomic>
#include <map>
#include <tuple>
#include <unordered_set>
#include <memory>
#include <numeric>

#include "engine/common/error.hpp"
#include "engine/search/ffm/pareto.hpp"
#include "engine/search/tile_search/tile_search.hpp"
#include "engine/search/mapspace.hpp"
#include "engine/search/rank_merge.hpp"

#include <omp.h>

namespace mapfuse::ffm {

const TensorCompat* PmappingContext::find(int tensor) const {
  for (const TensorCompat& tc : compat)
    if (tc.tensor == tensor) return &tc;
  return nullptr;
}

std::vector<int> tracked_levels(const Core& c) {
  std::vector<int> out;
  for (size_t l = 0; l < c.levels.size(); ++l)
    if (c.levels[l].entries > 0) out.push_back(static_cast<int>(l));
  return out;
}

std::vector<int> reservation_levels(const Core& c, const PmappingContext& ctx) {
  const int b = ctx.fused.backing_level;
  if (b >= 0 && c.levels[static_cast<size_t>(b)].entries > 0) return {b};
  return {};
}

namespace {

// The nested variants of a fused context (nested fusion, two levels): up to `max_loops` loops
// over ranks the group's loops leave alone, shared by a run of consecutive Einsums of the group,
// and each on-chip tensor stored below them (exchanged inside the run) or above them. Every
// nested loop steps the Einsum's output and each tensor stored below it along one plain
// dimension; a tensor it consumes from above the run it steps plainly or not at all (then the
// Einsum reads that tile again in every iteration).
void add_nested(const Einsum& e, const PmappingContext& base, const std::vector<std::pair<int, int>>& inter,
                int max_loops, std::vector<PmappingContext>& out) {
  const int R = static_cast<int>(e.ranks.size()), out_t = e.output_index();
  std::vector<int> onchip;  // positions in `inter` (and in base.compat) of the on-chip tensors
  for (size_t k = 0; k < inter.size(); ++k)
    if (base.fused.onchip >> inter[k].first & 1) onchip.push_back(static_cast<int>(k));
  const int n = static_cast<int>(onchip.size());
  for (int below = 0; below < (1 << n); ++below) {
    // The output on chip and stored above the run's loops (produced for an Einsum after the
    // run): a loop over a rank it lacks accumulates it there (FusedContext::reduction).
    bool out_above = false;
    for (int j = 0; j < n; ++j) out_above |= inter[onchip[j]].first == out_t && !(below >> j & 1);
    std::vector<int> eligible;
    for (int r = 0; r < R; ++r) {
      const bool reduces = out_above && !e.rank_relevant(out_t, r);
      bool ok = base.shared[r] == 1 && e.ranks[r].size > 1 && (plain_dim(e, out_t, r) >= 0 || reduces);
      for (int j = 0; j < n && ok; ++j) {
        const int ti = inter[onchip[j]].first;
        if (below >> j & 1)
          ok = plain_dim(e, ti, r) >= 0;
        else if (ti != out_t)
          ok = !e.rank_relevant(ti, r) || plain_dim(e, ti, r) >= 0;
      }
      if (ok) eligible.push_back(r);
    }
    const int m = static_cast<int>(eligible.size());
    for (int set = 1; set < (1 << m); ++set) {
      if (__builtin_popcount(static_cast<unsigned>(set)) > max_loops) continue;
      std::vector<int> ranks;
      std::vector<std::vector<int64_t>> choices;
      for (int k = 0; k < m; ++k)
        if (set >> k & 1) {
          ranks.push_back(eligible[k]);
          std::vector<int64_t> d = divisors(e.ranks[eligible[k]].size);
          d.erase(d.begin());  // factor 1 is no loop
          choices.push_back(std::move(d));
        }
      std::vector<size_t> pick(ranks.size(), 0);
      while (true) {
        PmappingContext ctx = base;
        for (size_t k = 0; k < ranks.size(); ++k) {
          ctx.inner[ranks[k]] = choices[k][pick[k]];
          ctx.shared[ranks[k]] = choices[k][pick[k]];
          ctx.fused.iterations *= choices[k][pick[k]];
          if (!e.rank_relevant(out_t, ranks[k])) ctx.fused.reduction *= choices[k][pick[k]];
        }
        const Einsum tile = tile_einsum(e, ctx.shared);
        for (int j = 0; j < n; ++j) {
          if (!(below >> j & 1)) continue;
          TensorCompat& tc = ctx.compat[static_cast<size_t>(onchip[j])];
          const int ti = inter[onchip[j]].first;
          tc.inner.fill(1);
          for (int r : ranks) tc.inner[plain_dim(e, ti, r)] = ctx.inner[r];
          tc.tile = tile.tensor_volume(ti);
        }
        out.push_back(std::move(ctx));
        size_t k = 0;
        while (k < pick.size() && ++pick[k] == choices[k].size()) pick[k++] = 0;
        if (k == pick.size()) break;
      }
    }
  }
}

// Storage above the split: the variants of every fused context with shared loops (from
// out[from] on) that keep a non-empty set of resident candidates at b. A candidate is read from
// the outermost level by this Einsum alone (one storage node serves one reader, so that each
// pmapping's fill and reservation are the whole LoopTree's) and indexed by no shared rank.
void add_resident(const Workload& w, const Einsum& e, const Core& c, size_t from, std::vector<PmappingContext>& out) {
  const size_t n = out.size();
  for (size_t k = from; k < n; ++k) {
    const FusedContext& f = out[k].fused;
    if (f.backing_level < 0 || f.iterations <= 1) continue;
    std::vector<int> candidates;
    for (int ti = 0; ti < static_cast<int>(e.tensors.size()); ++ti) {
      const TensorInfo& info = w.tensors[w.tensor_index(e.tensors[ti].name)];
      if (ti == e.output_index() || (f.onchip >> ti & 1) || info.consumers.size() != 1) continue;
      if (!(c.levels[f.backing_level].may_keep & role_bit(e.tensors[ti].role))) continue;
      bool stepped = false;
      for (int r = 0; r < static_cast<int>(e.ranks.size()); ++r) stepped |= out[k].shared[r] > 1 && e.rank_relevant(ti, r);
      if (!stepped) candidates.push_back(ti);
    }
    for (unsigned set = 1; set < (1u << candidates.size()); ++set) {
      PmappingContext ctx = out[k];
      for (size_t j = 0; j < candidates.size(); ++j)
        if (set >> j & 1) ctx.fused.resident |= static_cast<TensorMask>(1u << candidates[j]);
      out.push_back(std::move(ctx));
    }
  }
}

// Whether the tiles a context stores at its backing level (every on-chip tensor the Einsum
// touches, every resident one) fit that level together.
bool stored_tiles_fit(const Einsum& e, const Core& c, const PmappingContext& ctx) {
  const int b = ctx.fused.backing_level;
  if (b < 0) return true;
  const Level& lv = c.levels[static_cast<size_t>(b)];
  if (lv.entries <= 0) return true;
  int64_t words = 0;
  for (const TensorCompat& tc : ctx.compat)
    if (tc.fused() && tc.level == b) words += tc.tile;
  for (int ti = 0; ti < static_cast<int>(e.tensors.size()); ++ti)
    if (ctx.fused.resident >> ti & 1) words += e.tensor_volume(ti);
  return words * lv.multiple_buffering <= lv.entries;
}

}  // namespace

std::vector<PmappingContext> make_contexts(const Workload& w, int ei, const Core& core, const PmappingOptions& o) {
  const Einsum& e = w.einsums[ei];
  const Core& c = core_for(core, e);
  const int L = static_cast<int>(c.levels.size());
  const int out_t = e.output_index();
  // Intermediate tensors: (index in e.tensors, workload tensor index), by workload index.
  std::vector<std::pair<int, int>> inter;
  for (int ti = 0; ti < static_cast<int>(e.tensors.size()); ++ti) {
    const int wt = w.tensor_index(e.tensors[ti].name);
    const TensorInfo& info = w.tensors[wt];
    if (ti == out_t ? !info.consumers.empty() : info.producer >= 0) inter.push_back({ti, wt});
  }
  std::sort(inter.begin(), inter.end(), [](auto a, auto b) { return a.second < b.second; });

  std::vector<PmappingContext> out;
  {
    PmappingContext u;
    u.shared.fill(1);
    u.inner.fill(1);
    u.top_level = L - 1;
    for (auto [ti, wt] : inter) {
      TensorCompat tc;
      tc.tensor = wt;
      tc.level = L - 1;
      tc.factor.fill(1);
      u.compat.push_back(tc);
    }
    out.push_back(u);
  }
  if (!o.allow_fusion || inter.empty()) return out;
  // A level that backs every on-chip intermediate (Level::backs_intermediates, AccelForge's
  // MainMemory `keep: ~Intermediates, may_keep: All` over a level keeping `~MainMemory.tensors`):
  // an intermediate goes through DRAM or is backed there, at no other level.
  int forced = -1;
  for (int l = 0; l < L - 1; ++l)
    if (c.levels[l].backs_intermediates) forced = l;
  const int n_inter = static_cast<int>(inter.size());
  for (int subset = 1; subset < (1 << n_inter); ++subset) {
    TensorMask onchip = 0;
    for (int k = 0; k < n_inter; ++k)
      if (subset >> k & 1) onchip |= static_cast<TensorMask>(1u << inter[k].first);
    // Ranks that may carry a shared loop: each indexes one plain dimension of the output and of
    // every on-chip tensor.
    std::vector<int> eligible;
    for (int r = 0; r < static_cast<int>(e.ranks.size()); ++r) {
      bool ok = plain_dim(e, out_t, r) >= 0;
      for (int ti = 0; ti < static_cast<int>(e.tensors.size()); ++ti)
        if ((onchip >> ti & 1) && plain_dim(e, ti, r) < 0) ok = false;
      if (ok) eligible.push_back(r);
    }
    std::vector<std::vector<int64_t>> choices;
    for (int r : eligible) choices.push_back(divisors(e.ranks[r].size));
    for (int b = 0; b < L - 1; ++b) {
      if (forced >= 0 && b != forced) continue;
      bool may = true;
      for (int ti = 0; ti < static_cast<int>(e.tensors.size()); ++ti)
        if ((onchip >> ti & 1) && !(c.levels[b].may_keep & role_bit(e.tensors[ti].role))) may = false;
      if (!may) continue;
      std::vector<size_t> pick(eligible.size(), 0);
      while (true) {
        PmappingContext ctx;
        ctx.shared.fill(1);
        ctx.inner.fill(1);
        ctx.top_level = b;
        ctx.fused.backing_level = b;
        ctx.fused.onchip = onchip;
        for (size_t k = 0; k < eligible.size(); ++k) {
          ctx.shared[eligible[k]] = choices[k][pick[k]];
          ctx.fused.iterations *= choices[k][pick[k]];
        }
        const Einsum tile = tile_einsum(e, ctx.shared);
        for (auto [ti, wt] : inter) {
          TensorCompat tc;
          tc.tensor = wt;
          tc.factor.fill(1);
          if (onchip >> ti & 1) {
            tc.level = b;
            for (int r = 0; r < static_cast<int>(e.ranks.size()); ++r)
              if (ctx.shared[r] > 1) tc.factor[plain_dim(e, ti, r)] *= ctx.shared[r];
            tc.tile = tile.tensor_volume(ti);
          } else {
            tc.level = L - 1;
          }
          ctx.compat.push_back(tc);
        }
        out.push_back(ctx);
        if (o.nested_loops > 0) add_nested(e, ctx, inter, o.nested_loops, out);
        size_t k = 0;
        while (k < pick.size() && ++pick[k] == choices[k].size()) pick[k++] = 0;
        if (k == pick.size()) break;
      }
    }
  }
  // Capacity pruning of whole contexts (exact): every on-chip tensor the Einsum touches is live at
  // b during its branch with its whole stored tile, so a context whose stored tiles alone overflow
  // b has no valid pmapping. Its tile search would still enumerate every inner choice before the
  // top level rejects them all (GPT-3 at batch 64 / 4,096 tokens: 226 CPU-s in 1,659 such
  // contexts). Kept without pruning, so that the brute forces of the tests see them.
  if (o.resident) add_resident(w, e, c, 1, out);
  if (o.prune) std::erase_if(out, [&](const PmappingContext& ctx) { return !stored_tiles_fit(e, c, ctx); });
  return out;
}

namespace {

// Depth-first enumeration of tile mappings, innermost level first.
struct Enumerator {
  const Einsum& e;
  const Core& c;
  const PmappingContext& ctx;
  const PmappingOptions& o;
  const std::function<void(const Mapping&)>& emit;
  int L, R, T, top, b;
  Mapping m;
  int64_t cut = 0;

  int64_t volume(int t, const int64_t* ext) const {
    int64_t v = 1;
    for (const Projection& p : e.tensors[t].dims) v *= Einsum::dim_extent(p, ext);
    return v;
  }

  std::vector<TensorMask> keep_choices(int l) const {
    const TensorMask all = static_cast<TensorMask>((1u << T) - 1);
    if (l == L - 1) return {all};
    if (b >= 0 && l > b) return {0};  // no copies between the backing level and DRAM
    TensorMask allowed = 0;
    for (int t = 0; t < T; ++t)
      if (c.levels[l].may_keep & role_bit(e.tensors[t].role)) allowed |= static_cast<TensorMask>(1u << t);
    const TensorMask must = (b >= 0 && l == b) ? ctx.fused.at_b() : TensorMask{0};
    std::vector<TensorMask> out;
    for (unsigned k = 0; k <= allowed; ++k)
      if ((k & ~allowed) == 0 && (k & must) == must) out.push_back(static_cast<TensorMask>(k));
    return out;
  }

  // Spatial factors along one axis: per rank a divisor of rem, product within the fan-out.
  void spatial(int l, LoopKind axis, int r, int64_t budget, const int64_t* rem, int64_t* f,
               std::vector<std::array<int64_t, kMaxRanks>>& out) const {
    if (r == R) {
      std::array<int64_t, kMaxRanks> a{};
      std::copy(f, f + kMaxRanks, a.begin());
      out.push_back(a);
      return;
    }
    f[r] = 1;
    spatial(l, axis, r + 1, budget, rem, f, out);
    if (!axis_accepts(c.levels[l].fanout, axis, e, r)) return;
    for (int64_t d : divisors(rem[r]))
      if (d > 1 && d <= budget) {
        f[r] = d;
        spatial(l, axis, r + 1, budget / d, rem, f, out);
      }
    f[r] = 1;
  }

  void level(int l, const std::array<int64_t, kMaxRanks>& rem, const std::array<int64_t, kMaxRanks>& ext) {
    if (l > top) {
      for (int k = top + 1; k < L; ++k) {
        m.levels[k].loops.clear();
        m.levels[k].keep = k == L - 1 ? static_cast<TensorMask>((1u << T) - 1) : TensorMask{0};
      }
      emit(m);
      return;
    }
    const Fanout& fo = c.levels[l].fanout;
    std::vector<std::array<int64_t, kMaxRanks>> xs, ys;
    int64_t tmp[kMaxRanks];
    std::fill_n(tmp, kMaxRanks, int64_t{1});
    spatial(l, LoopKind::SpatialX, 0, fo.x, rem.data(), tmp, xs);
    const std::vector<TensorMask> keeps = keep_choices(l);
    for (const auto& sx : xs) {
      std::array<int64_t, kMaxRanks> rem_x{};
      for (int r = 0; r < R; ++r) rem_x[r] = rem[r] / sx[r];
      ys.clear();
      std::fill_n(tmp, kMaxRanks, int64_t{1});
      spatial(l, LoopKind::SpatialY, 0, fo.y, rem_x.data(), tmp, ys);
      for (const auto& sy : ys) {
        std::array<int64_t, kMaxRanks> rem_s{};
        for (int r = 0; r < R; ++r) rem_s[r] = rem_x[r] / sy[r];
        // Temporal factors: divisors of what is left; the top level takes the rest.
        std::vector<std::vector<int64_t>> tch(R);
        for (int r = 0; r < R; ++r) tch[r] = l == top ? std::vector<int64_t>{rem_s[r]} : divisors(rem_s[r]);
        std::vector<size_t> pick(R, 0);
        while (true) {
          std::array<int64_t, kMaxRanks> tf{}, next_rem{}, next_ext{};
          for (int r = 0; r < kMaxRanks; ++r) next_ext[r] = 1;
          for (int r = 0; r < R; ++r) {
            tf[r] = tch[r][pick[r]];
            next_rem[r] = rem_s[r] / tf[r];
            next_ext[r] = ext[r] * tf[r] * sx[r] * sy[r];
          }
          for (TensorMask keep : keeps) {
            const Level& lv = c.levels[l];
            if (o.prune && lv.entries > 0) {
              int64_t occ = 0;
              for (int t = 0; t < T; ++t)
                if (keep >> t & 1) occ += volume(t, next_ext.data());
              if (occ * lv.multiple_buffering > lv.entries) {
                ++cut;
                continue;
              }
            }
            std::vector<int> order;
            for (int r = 0; r < R; ++r)
              if (tf[r] > 1) order.push_back(r);
            do {
              LevelMapping& lm = m.levels[l];
              lm.loops.clear();
              lm.keep = keep;
              for (int r : order) lm.loops.push_back({r, tf[r], LoopKind::Temporal});
              for (int r = 0; r < R; ++r)
                if (sx[r] > 1) lm.loops.push_back({r, sx[r], LoopKind::SpatialX});
              for (int r = 0; r < R; ++r)
                if (sy[r] > 1) lm.loops.push_back({r, sy[r], LoopKind::SpatialY});
              level(l + 1, next_rem, next_ext);
            } while (o.explore_orders && std::next_permutation(order.begin(), order.end()));
          }
          int r = 0;
          while (r < R && ++pick[r] == tch[r].size()) pick[r++] = 0;
          if (r == R) break;
        }
      }
    }
  }
};

}  // namespace

int64_t enumerate_tile_mappings(const Einsum& tile, const Core& c, const PmappingContext& ctx,
                                const PmappingOptions& o, const std::function<void(const Mapping&)>& emit) {
  // A non-MAC Einsum runs on the vector unit's view of the core, as in TileSearch.
  const Core& core = core_for(c, tile);
  Enumerator en{tile, core, ctx, o, emit};
  en.L = static_cast<int>(core.levels.size());
  en.R = static_cast<int>(tile.ranks.size());
  en.T = static_cast<int>(tile.tensors.size());
  en.top = ctx.top_level;
  en.b = ctx.fused.backing_level;
  en.m.levels.resize(en.L);
  std::array<int64_t, kMaxRanks> rem{}, ext{};
  for (int r = 0; r < kMaxRanks; ++r) rem[r] = ext[r] = 1;
  for (int r = 0; r < en.R; ++r) rem[r] = tile.ranks[r].size;
  en.level(0, rem, ext);
  return en.cut;
}

uint64_t hash_value(const TensorCompat& tc, uint64_t h) {
  auto mix = [&](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
  mix(static_cast<uint64_t>(tc.tensor));
  mix(static_cast<uint64_t>(tc.level));
  for (int64_t f : tc.factor) mix(static_cast<uint64_t>(f));
  for (int64_t f : tc.inner) mix(static_cast<uint64_t>(f));
  mix(static_cast<uint64_t>(tc.tile));
  return h;
}

void drop_unmatched_contexts(const Workload& w, std::vector<std::vector<PmappingContext>>& contexts) {
  const int E = static_cast<int>(w.einsums.size());
  // What each Einsum's contexts offer, per pass (a context's tensors are its own, so a set over
  // all of them answers "does Einsum j offer this compatibility of tensor t").
  std::vector<std::unordered_set<TensorCompat, TensorCompatHash>> offers(static_cast<size_t>(E));
  auto offered = [&](int j, const TensorCompat& tc) { return offers[static_cast<size_t>(j)].count(tc) > 0; };
  for (bool changed = true; changed;) {
    changed = false;
    for (int j = 0; j < E; ++j) {
      offers[static_cast<size_t>(j)].clear();
      for (const PmappingContext& ctx : contexts[j])
        for (const TensorCompat& tc : ctx.compat) offers[static_cast<size_t>(j)].insert(tc);
    }
    for (int i = 0; i < E; ++i) {
      auto& list = contexts[i];
      const size_t before = list.size();
      list.erase(std::remove_if(list.begin(), list.end(),
                                [&](const PmappingContext& ctx) {
                                  for (const TensorCompat& tc : ctx.compat) {
                                    const TensorInfo& ti = w.tensors[tc.tensor];
                                    if (ti.producer != i && !offered(ti.producer, tc)) return true;
                                    if (ti.producer == i)
                                      for (int j : ti.consumers)
                                        if (!offered(j, tc)) return true;
                                  }
                                  return false;
                                }),
                 list.end());
      changed |= list.size() != before;
    }
  }
}

EinsumPmappings generate_pmappings(const Workload& w, int ei, const Core& c, const PmappingOptions& o) {
  return generate_pmappings(w, ei, c, o, make_contexts(w, ei, c, o));
}

EinsumPmappings generate_pmappings_reference(const Workload& w, int ei, const Core& c, const PmappingOptions& o,
                                             std::vector<PmappingContext> contexts) {
  const Einsum& e = w.einsums[ei];
  const int L = static_cast<int>(c.levels.size());
  const std::vector<int> tracked = tracked_levels(c);
  EinsumPmappings out;
  out.einsum = ei;
  out.contexts = std::move(contexts);
  out.pmappings.resize(out.contexts.size());
  CostResult scratch;
  FusedEinsumCost fc;
  for (size_t k = 0; k < out.contexts.size(); ++k) {
    const PmappingContext& ctx = out.contexts[k];
    const Einsum tile = tile_einsum(e, ctx.shared);
    const FusedTilePlan plan = fused_tile_plan(tile, c, ctx.fused);
    std::vector<Pmapping>& list = out.pmappings[k];
    out.capacity_pruned += enumerate_tile_mappings(tile, c, ctx, o, [&](const Mapping& m) {
      if (o.max_evaluations > 0 && out.evaluated >= o.max_evaluations)
        throw InputError({}, "ffm", "Einsum '" + e.name + "' has more than " + std::to_string(o.max_evaluations) +
                                        " pmappings to evaluate; narrow the mapspace or raise the limit");
      ++out.evaluated;
      const FlatMapping fm = flatten_fused(m, ctx.fused, L);
      const NestStructure s = analyze(plan.first, fm);
      int64_t f[kMaxLoops];
      for (int i = 0; i < fm.n_loops; ++i) f[i] = fm.loops[i].factor;
      evaluate_fused_einsum(plan, s, f, ctx.fused, fc, scratch);
      if (!fc.tile.valid()) return;
      if (o.prune) {
        // The branch holds at least its own tiles, the exchanged tiles it touches and the group's
        // resident tensors (its own among them).
        for (int l : tracked) {
          int64_t usage = fc.own[l];
          if (l == ctx.fused.backing_level) {
            usage += fc.resident;
            for (int t = 0; t < static_cast<int>(e.tensors.size()); ++t) usage += fc.exchanged_tile[t];
          }
          if (usage * c.levels[l].multiple_buffering > c.levels[l].entries) return;
        }
      }
      list.push_back({fc.energy_pj, fc.cycles, fc.own, m});
    });
    if (o.prune) {
      const std::vector<int> res = reservation_levels(c, ctx);
      const std::vector<size_t> keep = pareto_front(list.size(), 2 + res.size(), [&](size_t i, size_t j) {
        return j == 0 ? list[i].energy_pj : j == 1 ? list[i].cycles : static_cast<double>(list[i].own[res[j - 2]]);
      });
      std::vector<Pmapping> kept;
      kept.reserve(keep.size());
      for (size_t i : keep) kept.push_back(std::move(list[i]));
      list = std::move(kept);
    }
    out.kept += static_cast<int64_t>(list.size());
  }
  return out;
}

namespace {

// One context's pmappings as one thread finds them: with pruning, the Pareto front on (energy,
// latency, own words at the reservation levels), ties (equal criteria) going to the smaller
// TileCandidate::key; without, every structurally valid tile mapping.
struct PmappingSink final : TileSink {
  struct Entry {
    std::array<double, 2 + kMaxLevels> crit{};
    TileCandidate::Key key{};
    Pmapping pm;
  };
  const Einsum& e;
  const Core& c;
  const PmappingContext& ctx;
  const std::vector<int>& tracked;
  const std::vector<int> res;  // reservation_levels: the criteria after energy and latency
  bool prune;
  int L, T, K;
  std::vector<Entry> list;  // with pruning: the front, by energy ascending
  TileCandidate::Key scratch_key{};

  const ResidentFill fill;  // the context's resident tensors: words held at b, energy of their one fill

  PmappingSink(const Einsum& e_, const Core& c_, const PmappingContext& ctx_, const std::vector<int>& tracked_,
               bool prune_, const ResidentFill& fill_)
      : e(e_), c(c_), ctx(ctx_), tracked(tracked_), res(reservation_levels(c_, ctx_)), prune(prune_), fill(fill_) {
    L = static_cast<int>(c.levels.size());
    T = static_cast<int>(e.tensors.size());
    K = 2 + static_cast<int>(res.size());
    for (int t = 0; t < T; ++t)
      for (size_t d = 0; d < e.tensors[t].dims.size(); ++d) {
        const auto& dim = e.tensors[t].dims[d];
        plain_rank[t][d] = dim.size() == 1 && dim[0].coeff == 1 ? static_cast<int8_t>(dim[0].rank) : int8_t{-1};
      }
  }
  std::array<std::array<int8_t, kMaxTensorDims>, kMaxTensors> plain_rank{};  // dimension = one rank, or -1

  void consume(const TileCandidate& cand, const CompactCost& cost) override {
    // Capacity is decided on the reservations of the whole group (evaluate_fused_einsum).
    if (cost.invalid != Invalid::None && cost.invalid != Invalid::CapacityExceeded) return;
    // The branch's words per level, as the model counts the tiles it keeps (level_occupancy),
    // without the exchanged tiles at b.
    const int b = ctx.fused.backing_level;
    const TensorMask onchip = b >= 0 ? ctx.fused.onchip : TensorMask{0};
    const TensorMask resident = b >= 0 ? ctx.fused.resident : TensorMask{0};
    std::array<int64_t, kMaxLevels> own{};
    int64_t exchanged = 0;
    int64_t ext[kMaxRanks];
    for (int r = 0; r < kMaxRanks; ++r) ext[r] = 1;
    const int R = static_cast<int>(e.ranks.size());
    for (int l = 0; l < L; ++l) {
      for (int r = 0; r < R; ++r)
        ext[r] *= cand.factor(l, LoopKind::Temporal, r) * cand.factor(l, LoopKind::SpatialX, r) *
                  cand.factor(l, LoopKind::SpatialY, r);
      TensorMask keep = (*cand.keep)[l];
      if (l == L - 1) keep = static_cast<TensorMask>(keep & ~(onchip | resident));
      if (l == b) keep = static_cast<TensorMask>(keep & ~resident);  // the group's: fill.words
      for (int t = 0; t < T; ++t) {
        if (!(keep >> t & 1)) continue;
        int64_t v = 1;
        for (size_t d = 0; d < e.tensors[t].dims.size(); ++d) {
          const int pr = plain_rank[t][d];
          v *= pr >= 0 ? ext[pr] : Einsum::dim_extent(e.tensors[t].dims[d], ext);
        }
        if (l == b && (onchip >> t & 1)) exchanged += v;
        else own[l] += v;
      }
    }
    if (prune)  // the branch holds at least its own tiles, the exchanged tiles it touches and its resident tensors
      for (int l : tracked)
        if ((own[l] + (l == b ? exchanged + fill.words : 0)) * c.levels[l].multiple_buffering > c.levels[l].entries)
          return;
    std::array<double, 2 + kMaxLevels> crit{};
    if (ctx.fused.reduction > 1) {  // the search's lanes are whole-Einsum totals (TileSearchSpec::rest_tiles)
      crit[0] = cost.energy_pj + fill.energy_pj;
      crit[1] = cost.cycles;
    } else {
      crit[0] = fused_total(cost.energy_pj, cost.energy_pj, ctx.fused, fill.energy_pj);
      crit[1] = fused_total(cost.cycles, cost.cycles, ctx.fused);
    }
    for (size_t j = 0; j < res.size(); ++j) crit[2 + j] = static_cast<double>(own[res[j]]);
    if (prune && dominated(crit)) return;  // cheap rejection before anything is built
    Entry x;
    x.crit = crit;
    x.pm.energy_pj = crit[0];
    x.pm.cycles = crit[1];
    x.pm.own = own;
    if (!prune) {
      cand.key(x.key);
      x.pm.mapping = cand.build();
      list.push_back(std::move(x));
      return;
    }
    insert(x, &cand);
  }

  // Tile mappings that cost at least (energy, cycles) and keep at least `words` at `level`
  // (nothing elsewhere): beaten by a point of the front no worse in every criterion and better in
  // one of the two objectives, which then strictly dominates every such mapping.
  bool beaten(double energy_pj, double cycles, int level, int64_t words) override {
    if (!prune) return false;
    // Per-tile bounds: every tile, accumulating or not, costs at least them.
    const double en = fused_total(energy_pj, energy_pj, ctx.fused, fill.energy_pj),
                 cy = fused_total(cycles, cycles, ctx.fused);
    std::array<double, 2 + kMaxLevels> lb{};
    for (size_t j = 0; j < res.size(); ++j) lb[2 + j] = res[j] == level ? static_cast<double>(words) : 0;
    for (const Entry& p : list) {
      if (p.crit[0] > en) break;  // by energy ascending
      bool ok = p.crit[1] <= cy && (p.crit[0] < en || p.crit[1] < cy);
      for (int k = 2; k < K && ok; ++k) ok = p.crit[k] <= lb[k];
      if (ok) return true;
    }
    return false;
  }

  // Branch and bound (TileSearchSpec::bound_scalar) cuts once the front has a point.
  bool has_incumbent() const override { return prune && !list.empty(); }

  // Strictly dominated by a point of the front (equal criteria are not: they tie).
  // The point that rejected the last candidate is tried first (neighbouring candidates tend to be
  // dominated by the same point).
  bool dominated(const std::array<double, 2 + kMaxLevels>& c) {
    auto beats = [&](const Entry& p) {
      bool le = p.crit[0] <= c[0], eq = p.crit[0] == c[0];
      for (int k = 1; k < K && le; ++k) le = p.crit[k] <= c[k], eq = eq && p.crit[k] == c[k];
      return le && !eq;
    };
    if (last_hit < list.size() && beats(list[last_hit])) return true;
    for (size_t i = 0; i < list.size(); ++i) {
      if (list[i].crit[0] > c[0]) break;
      if (beats(list[i])) {
        last_hit = i;
        return true;
      }
    }
    return false;
  }
  size_t last_hit = 0;

  // Front insertion of x (criteria and pmapping without its Mapping, built here from `cand` only
  // if x is kept); `cand` is null when x already carries its key and Mapping (merging).
  void insert(Entry& x, const TileCandidate* cand) {
    const double en = x.crit[0];
    const auto upper = std::upper_bound(list.begin(), list.end(), en, [](double v, const Entry& p) { return v < p.crit[0]; });
    for (auto it = list.begin(); it != upper; ++it) {
      bool le = true, eq = true;
      for (int k = 1; k < K && le; ++k) {
        le = it->crit[k] <= x.crit[k];
        eq = eq && it->crit[k] == x.crit[k];
      }
      if (!le) continue;
      if (!(eq && it->crit[0] == en)) return;  // dominated
      // Equal criteria: the smaller key wins.
      if (cand) cand->key(scratch_key);
      const TileCandidate::Key& k = cand ? scratch_key : x.key;
      if (k < it->key) {
        it->key = k;
        it->pm = std::move(x.pm);
        if (cand) it->pm.mapping = cand->build();
      }
      return;
    }
    // x dominates the points with energy >= its own and every other criterion >= its own.
    const auto lower = std::lower_bound(list.begin(), list.end(), en, [](const Entry& p, double v) { return p.crit[0] < v; });
    auto out = lower;
    for (auto it = lower; it != list.end(); ++it) {
      bool ge = true;
      for (int k = 1; k < K && ge; ++k) ge = it->crit[k] >= x.crit[k];
      if (!ge) {
        if (out != it) *out = std::move(*it);
        ++out;
      }
    }
    list.erase(out, list.end());
    if (cand) {
      cand->key(x.key);
      x.pm.mapping = cand->build();
    }
    const auto at = std::upper_bound(list.begin(), list.end(), en, [](double v, const Entry& p) { return v < p.crit[0]; });
    list.insert(at, std::move(x));
  }
};

// Rows of pruned partial choices completed per work item: a context's completions are shared by
// the threads (its pruning is one thread's).
constexpr size_t kRowsPerItem = 64;
// Contexts pruned and completed together: bounds the surviving partial choices held at once (all
// of them at once took 7.8 GiB for GPT-3 at batch 64 / 1,024 tokens).
constexpr size_t kContextsPerWave = 16;

}  // namespace

namespace {

// Every context is searched over its tile with `merge`'s ranks merged (generation_merge); the
// pmappings' mappings are of that merged tile.
EinsumPmappings generate_each(const Workload& w, int ei, const Core& c, const PmappingOptions& o,
                              std::vector<PmappingContext> contexts, const RankMerge& merge) {
  const Einsum& e = w.einsums[ei];
  const std::vector<int> tracked = tracked_levels(c);
  EinsumPmappings out;
  out.einsum = ei;
  out.contexts = std::move(contexts);
  const size_t K = out.contexts.size();
  out.pmappings.resize(K);
  Mapspace space = o.constraints.empty() ? Mapspace{} : make_mapspace(o.constraints, e, c);
  if (!o.explore_orders) {  // rank order only: one fixed order per level the constraints leave open
    std::vector<int> all(e.ranks.size());
    std::iota(all.begin(), all.end(), 0);
    space.levels.resize(c.levels.size());
    for (LevelConstraints& lc : space.levels)
      if (!lc.order) lc.order = all;
  }
  std::atomic<int64_t> budget{0};
  std::atomic<bool> over{false};
  std::vector<Einsum> tiles;
  tiles.reserve(K);
  for (const PmappingContext& ctx : out.contexts) tiles.push_back(merge_ranks(tile_einsum(e, ctx.shared), merge));
  std::vector<ResidentFill> fills(K);  // per context, made with its search
  auto make_search = [&](size_t k) {
    const PmappingContext& ctx = out.contexts[k];
    TileSearchSpec spec;
    spec.top = ctx.top_level;
    spec.backing_level = ctx.fused.backing_level;
    spec.onchip_backing = ctx.fused.backing_level >= 0 ? ctx.fused.at_b() : TensorMask{0};
    EvalPlan with_fill = compile_plan(tiles[k], c);
    fills[k] = apply_resident_fill(with_fill, ctx.fused);
    if (ctx.fused.reduction > 1) {
      spec.first_tiles = ctx.fused.iterations / ctx.fused.reduction;
      spec.rest_tiles = ctx.fused.iterations - spec.first_tiles;
    }
    for (int l = 0; l < with_fill.n_levels; ++l) {
      spec.extra_read_words[l] = with_fill.levels[l].extra_read_words;
      spec.extra_write_words[l] = with_fill.levels[l].extra_write_words;
    }
    spec.prune = o.prune;
    spec.reduce_orders = o.reduce_orders;
    spec.merge_supports = true;
    spec.prune_partial = o.prune_partial;
    spec.merge_passthrough = o.merge_passthrough && o.prune;
    // The bounds are per tile (the tile Einsum with its exchanged and resident tensors backed at
    // b, as for Stream's on-chip operands); PmappingSink::beaten scales them to the context's
    // tiles as it does the completion bounds. An accumulating tile also reads its partial sums,
    // and the resident fill and extra words only add: the bounds stay lower bounds.
    spec.bound_scalar = o.bound_front && o.prune;
    spec.best_first = spec.bound_scalar;
    spec.last_level_min_orders = o.last_level_min_orders;
    spec.max_evaluations = o.max_evaluations;
    spec.budget = &budget;
    spec.over = &over;
    return std::make_unique<TileSearch>(tiles[k], c, space, spec);
  };
  // Searches exist for one wave of contexts at a time (with nested fusion an Einsum has tens of
  // thousands of contexts, and every search holds its tables and buffers).
  std::vector<std::unique_ptr<TileSearch>> searches(K);
  std::vector<std::pair<uint32_t, uint32_t>> items;  // (context, root) of a wave's contexts without partial pruning
  std::vector<size_t> partial;                      // a wave's contexts pruned level by level
  std::vector<std::pair<uint32_t, uint32_t>> probes;  // (context, root) of a wave's bounded contexts, best first
  std::unique_ptr<std::atomic<int64_t>[]> probe_work(new std::atomic<int64_t>[K]);
  const int threads = omp_get_max_threads();
  // Sinks per thread and context, made when a thread first works on the context.
  std::vector<std::vector<std::unique_ptr<PmappingSink>>> sinks(static_cast<size_t>(threads));
  for (auto& v : sinks) v.resize(K);
  int64_t evaluated = 0, pruned = 0, lane_calls = 0, partial_evaluated = 0, partial_dropped = 0, bound_skipped = 0,
          fanout_skipped = 0;
  std::vector<PartialChoices> survivors(K);
  std::vector<std::pair<uint32_t, uint32_t>> blocks;  // (context, block of kRowsPerItem rows) of a wave
#pragma omp parallel reduction(+ : evaluated, pruned, lane_calls, partial_evaluated, partial_dropped, bound_skipped, fanout_skipped)
  {
    auto& mine = sinks[static_cast<size_t>(omp_get_thread_num())];
    TileWorker worker;
    // Contexts go in waves: their searches made, those with partial pruning pruned one per thread
    // and their rows completed by all, the others' innermost choices run by all; then the wave's
    // searches and surviving partial choices are freed.
    for (size_t w0 = 0; w0 < K; w0 += kContextsPerWave) {
      const size_t w1 = std::min(K, w0 + kContextsPerWave);
#pragma omp for schedule(dynamic, 1)
      for (int64_t n = static_cast<int64_t>(w0); n < static_cast<int64_t>(w1); ++n)
        searches[static_cast<size_t>(n)] = make_search(static_cast<size_t>(n));
#pragma omp single
      {
        partial.clear();
        items.clear();
        probes.clear();
        for (size_t k = w0; k < w1; ++k) {
          probe_work[k] = 0;
          if (searches[k]->partial_pruning()) {  // items once its inner levels are pruned
            partial.push_back(k);
          } else if (searches[k]->best_first()) {
            // Roots best first, probed in that order for a front that cuts early (as the
            // exhaustive mapper does for its incumbent).
            const PmappingSink order_by(tiles[k], c, out.contexts[k], tracked, o.prune, fills[k]);
            for (size_t i : searches[k]->roots_best_first(order_by)) {
              items.emplace_back(static_cast<uint32_t>(k), static_cast<uint32_t>(i));
              probes.emplace_back(static_cast<uint32_t>(k), static_cast<uint32_t>(i));
            }
          } else {
            for (size_t i = 0; i < searches[k]->roots(); ++i)
              items.emplace_back(static_cast<uint32_t>(k), static_cast<uint32_t>(i));
          }
        }
      }
#pragma omp for schedule(dynamic, 1)
      for (int64_t n = 0; n < static_cast<int64_t>(probes.size()); ++n) {
        const auto [k, i] = probes[static_cast<size_t>(n)];
        if (probe_work[k].load(std::memory_order_relaxed) >= TileSearch::kProbeBudget) continue;
        if (!mine[k]) mine[k] = std::make_unique<PmappingSink>(tiles[k], c, out.contexts[k], tracked, o.prune, fills[k]);
        probe_work[k] += worker.probe(*searches[k], i, *mine[k]);
      }
#pragma omp for schedule(dynamic, 1)
      for (int64_t n = 0; n < static_cast<int64_t>(partial.size()); ++n) {
        const size_t k = partial[static_cast<size_t>(n)];
        worker.prune(*searches[k], survivors[k]);
      }
#pragma omp single
      {
        blocks.clear();
        for (const size_t k : partial)
          for (size_t i = 0; i < survivors[k].size(); i += kRowsPerItem)
            blocks.emplace_back(static_cast<uint32_t>(k), static_cast<uint32_t>(i / kRowsPerItem));
      }
#pragma omp for schedule(dynamic, 1) nowait
      for (int64_t n = 0; n < static_cast<int64_t>(blocks.size()); ++n) {
        const auto [k, i] = blocks[static_cast<size_t>(n)];
        if (!mine[k]) mine[k] = std::make_unique<PmappingSink>(tiles[k], c, out.contexts[k], tracked, o.prune, fills[k]);
        worker.complete(*searches[k], survivors[k], size_t{i} * kRowsPerItem, (size_t{i} + 1) * kRowsPerItem, *mine[k]);
      }
#pragma omp for schedule(dynamic, 1)
      for (int64_t n = 0; n < static_cast<int64_t>(items.size()); ++n) {
        const auto [k, i] = items[static_cast<size_t>(n)];
        if (!mine[k]) mine[k] = std::make_unique<PmappingSink>(tiles[k], c, out.contexts[k], tracked, o.prune, fills[k]);
        worker.run(*searches[k], i, *mine[k]);
      }
      worker.finish();  // nothing parked refers to the wave's searches any more
#pragma omp barrier
#pragma omp single
      for (size_t k = w0; k < w1; ++k) {
        survivors[k] = PartialChoices{};
        searches[k].reset();
      }
    }
    evaluated += worker.evaluated;
    pruned += worker.pruned;
    lane_calls += worker.lane_calls;
    partial_evaluated += worker.partial_evaluated;
    partial_dropped += worker.partial_dropped;
    bound_skipped += worker.bound_skipped;
    fanout_skipped += worker.fanout_skipped;
  }
  if (over.load())
    throw InputError({}, "ffm", "Einsum '" + e.name + "' has more than " + std::to_string(o.max_evaluations) +
                                    " pmappings to evaluate; narrow the mapspace or raise the limit");
  out.evaluated = evaluated;
  out.capacity_pruned = pruned;
  out.lane_calls = lane_calls;
  out.partial_evaluated = partial_evaluated;
  out.partial_dropped = partial_dropped;
  out.bound_skipped = bound_skipped;
  out.fanout_skipped = fanout_skipped;
  for (size_t k = 0; k < K; ++k) {
    PmappingSink merged(tiles[k], c, out.contexts[k], tracked, o.prune, fills[k]);
    for (auto& v : sinks)
      if (v[k]) {
        if (o.prune)
          for (PmappingSink::Entry& x : v[k]->list) merged.insert(x, nullptr);
        else
          for (PmappingSink::Entry& x : v[k]->list) merged.list.push_back(std::move(x));
        v[k].reset();
      }
    // Sorted through an index: an Entry carries a whole Pmapping, and moving those inside
    // std::sort's heap steps is both slower and trips GCC 12's -Wmaybe-uninitialized.
    std::vector<int> order(merged.list.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int ia, int ib) {
      const PmappingSink::Entry& a = merged.list[ia];
      const PmappingSink::Entry& b = merged.list[ib];
      for (int j = 0; j < merged.K; ++j)
        if (a.crit[j] != b.crit[j]) return a.crit[j] < b.crit[j];
      return a.key < b.key;
    });
    std::vector<Pmapping>& list = out.pmappings[k];
    list.reserve(merged.list.size());
    for (int i : order) list.push_back(std::move(merged.list[i].pm));
    out.kept += static_cast<int64_t>(list.size());
  }
  return out;
}

}  // namespace

namespace {

// The ranks generation merges (rank_merge.hpp): none for the brute forces (no pruning: they
// check the merged search), nor where constraints or a fixed rank order may tell ranks apart.
// A merged rank stays within 2^20 (the search's divisor tables take 4 bytes per size up to its
// largest rank).
constexpr int64_t kMaxMergedRank = int64_t{1} << 20;
RankMerge generation_merge(const Einsum& e, const Core& c, const PmappingOptions& o) {
  if (!o.prune || !o.explore_orders || !o.constraints.empty()) return {};
  return equivalent_ranks(e, c, kMaxMergedRank);
}

}  // namespace

std::vector<size_t> tile_classes(const Einsum& e, const Core& c, const PmappingOptions& o,
                                 const std::vector<PmappingContext>& contexts) {
  const RankMerge merge = generation_merge(e, c, o);
  using TileKey = std::tuple<int, TensorMask, TensorMask, int64_t, int, std::vector<int64_t>>;
  std::map<TileKey, size_t> seen;
  std::vector<size_t> of(contexts.size());
  for (size_t k = 0; k < contexts.size(); ++k) {
    const PmappingContext& x = contexts[k];
    std::vector<int64_t> sizes;
    for (const Rank& r : merge_ranks(tile_einsum(e, x.shared), merge).ranks) sizes.push_back(r.size);
    of[k] = seen.try_emplace(TileKey{x.fused.backing_level, x.fused.onchip, x.fused.resident, x.fused.reduction, x.top_level, std::move(sizes)}, seen.size())
                .first->second;
  }
  return of;
}

EinsumPmappings generate_pmappings(const Workload& w, int ei, const Core& c, const PmappingOptions& o,
                                   std::vector<PmappingContext> contexts) {
  // Contexts that differ only in which loops are nested, or in which tensors are stored below
  // them, tile the Einsum the same way: their pmappings are generated once. So do contexts whose
  // tiles differ only in how equivalent ranks share a product (GPT-3's Z with 8 tiles of M or 2
  // of B and 4 of M): their searches are the same over the merged ranks.
  const Einsum& e = w.einsums[ei];
  const RankMerge merge = generation_merge(e, c, o);
  const std::vector<size_t> of = tile_classes(e, c, o, contexts);
  std::vector<PmappingContext> distinct;
  for (size_t k = 0; k < contexts.size(); ++k)
    if (of[k] == distinct.size()) distinct.push_back(contexts[k]);
  EinsumPmappings out = generate_each(w, ei, c, o, std::move(distinct), merge);  // counters of the distinct ones
  if (merge.identity() && out.contexts.size() == contexts.size()) return out;
  std::vector<std::vector<Pmapping>> lists = std::move(out.pmappings);
  out.contexts = std::move(contexts);
  out.pmappings.assign(out.contexts.size(), {});
  out.kept = 0;
  for (size_t k = 0; k < out.contexts.size(); ++k) {
    std::vector<Pmapping>& list = out.pmappings[k];
    list = lists[of[k]];
    out.kept += static_cast<int64_t>(list.size());
    if (merge.identity()) continue;
    const Einsum tile = tile_einsum(e, out.contexts[k].shared);
    for (Pmapping& p : list) p.mapping = split_ranks(p.mapping, merge, tile);
  }
  return out;
}

}  // namespace mapfuse::ffm
