// Partial pruning (TileSearchSpec::prune_partial, docs/mapper.md "Partial pruning") drops inner
// tile choices before the outer levels are enumerated; pass-through merging
// (TileSearchSpec::merge_passthrough) leaves the loops of a level that keeps nothing to the level
// above. Both must be exact: every context's Pareto front is the same, value for value, with
// either, both and neither, on architectures whose levels have block sizes, per-instance
// bandwidths, fan-outs, bypasses and fused contexts.
#include <doctest/doctest.h>

#include <cstdint>
#include <algorithm>
#include <cstdlib>
#include <limits>
#include <tuple>

#include "engine/cost/fused.hpp"
#include "engine/search/ffm/ffm.hpp"
#include "engine/search/ffm/pmapping_io.hpp"
#include "engine/workload/load.hpp"
#include "engine/search/tile_search/tile_search.hpp"
#include "ffm_criteria.hpp"
#include "test_support.hpp"

using namespace mapfuse;
using namespace mapfuse::ffm;

namespace {


struct Counts {
  int64_t fronts = 0, points = 0, with = 0, without = 0, dropped = 0, merged = 0, compared_all = 0, compared_none = 0;
  int64_t fanout_skipped = 0;
};

using Front = std::vector<test::PmappingCriteria>;

void check_exact(const Workload& w, const Core& c, Counts& n) {
  for (int i = 0; i < static_cast<int>(w.einsums.size()); ++i) {
    PmappingOptions on, off, merge_only, compare_all, compare_none;
    compare_all.last_level_min_orders = 1;  // the level below the top compared wherever it can be
    compare_none.last_level_min_orders = SIZE_MAX;
    off.prune_partial = false;
    off.merge_passthrough = false;
    merge_only.prune_partial = false;
    const std::vector<PmappingContext> ctx = make_contexts(w, i, c, on);
    const EinsumPmappings a = generate_pmappings(w, i, c, on, ctx);
    const EinsumPmappings b = generate_pmappings(w, i, c, off, ctx);
    const EinsumPmappings m = generate_pmappings(w, i, c, merge_only, ctx);
    const EinsumPmappings all = generate_pmappings(w, i, c, compare_all, ctx);
    const EinsumPmappings none = generate_pmappings(w, i, c, compare_none, ctx);
    CHECK(b.partial_evaluated == 0);
    n.with += a.evaluated;
    n.without += b.evaluated;
    n.merged += m.evaluated;
    n.dropped += a.partial_dropped;
    n.fanout_skipped += a.fanout_skipped + all.fanout_skipped;
    n.compared_all += all.evaluated;
    n.compared_none += none.evaluated;
    REQUIRE(a.pmappings.size() == b.pmappings.size());
    REQUIRE(m.pmappings.size() == b.pmappings.size());
    REQUIRE(all.pmappings.size() == b.pmappings.size());
    REQUIRE(none.pmappings.size() == b.pmappings.size());
    for (size_t k = 0; k < ctx.size(); ++k) {
      auto front = [&](const std::vector<Pmapping>& list) { return test::pmapping_criteria(list, c, ctx[k]); };
      const Front y = front(b.pmappings[k]);
      INFO(c.name << " Einsum " << w.einsums[i].name << " context " << k);
      CHECK(front(a.pmappings[k]) == y);
      CHECK(front(m.pmappings[k]) == y);
      CHECK(front(all.pmappings[k]) == y);
      CHECK(front(none.pmappings[k]) == y);
      n.fronts += !y.empty();
      n.points += static_cast<int64_t>(y.size());
    }
  }
}

// The tile search of a context as pmapping generation makes it, with partial pruning.
TileSearchSpec pruned_spec(const PmappingContext& ctx) {
  TileSearchSpec spec;
  spec.top = ctx.top_level;
  spec.backing_level = ctx.fused.backing_level;
  spec.onchip_backing = ctx.fused.backing_level >= 0 ? ctx.fused.onchip : TensorMask{0};
  spec.merge_supports = true;
  spec.prune_partial = true;
  spec.merge_passthrough = true;
  return spec;
}

// The tile search of Einsum `e`'s context on core `c` (its vector unit's view for a non-MAC
// Einsum), its inner levels pruned; `fn(search, worker, rows)` when it is partially pruned.
template <class Fn>
void with_pruned_rows(const Einsum& e, const Core& c, const PmappingContext& ctx, Fn&& fn) {
  const Einsum tile = tile_einsum(e, ctx.shared);
  const Mapspace space;
  const TileSearch s(tile, core_for(c, e), space, pruned_spec(ctx));
  if (!s.partial_pruning()) return;
  TileWorker worker;
  PartialChoices p;
  worker.prune(s, p);
  fn(s, worker, p);
}

}  // namespace

TEST_CASE("ffm: partial pruning and pass-through merging keep every pmapping front exactly") {
  // Shapes with several divisors per rank so that many inner choices share a boundary tile.
  const Workload w = test::matmul_chain(16, {{8, 8}, {16, 8}});
  // Block sizes above one; every level may keep every tensor, so the unpruned space is large.
  const Workload small = test::matmul_chain(4, {{2, 4}, {4, 2}});
  Counts n;
  for (const std::string arch : {"accelforge_simple", "accelforge_tpu_v4i", "accelforge_simba", "accelforge_eyeriss",
                                 "gemmini_default", "ffm_edge", "timeloop_conv1d_3level_spatial"}) {
    if (const char* only = std::getenv("MAPFUSE_TEST_ARCH"); only && arch != only) continue;
    const Core& c = test::preset_core(arch);
    Counts m;
    check_exact(arch == "timeloop_conv1d_3level_spatial" ? small : w, c, m);
    MESSAGE(arch << ": " << m.fronts << " fronts, " << m.points << " points; evaluated " << m.with
                 << " with partial pruning and merging, " << m.compared_all << " comparing every level below the top, "
                 << m.merged << " with merging only, " << m.without << " with neither; " << m.dropped
                 << " partial choices dropped, " << m.fanout_skipped << " choices skipped by their fan-out's bounds");
    n.fronts += m.fronts, n.points += m.points, n.with += m.with, n.without += m.without, n.dropped += m.dropped,
        n.merged += m.merged, n.compared_all += m.compared_all, n.fanout_skipped += m.fanout_skipped;
  }
  // Five ranks: more loop-order classes at the top, for the level below it.
  for (const std::string arch : {"accelforge_tpu_v4i", "gemmini_default"}) {
    if (const char* only = std::getenv("MAPFUSE_TEST_ARCH"); only && arch != only) continue;
    Counts m;
    check_exact(test::projection_chain(2, 4, 2, 4, 4, 4), test::preset_core(arch), m);
    MESSAGE(arch << ", five ranks: " << m.fronts << " fronts, " << m.points << " points; evaluated " << m.with
                 << " with partial pruning and merging, " << m.compared_all << " comparing every level below the top, "
                 << m.compared_none << " comparing none of it, " << m.merged << " with merging only, " << m.without
                 << " with neither");
    CHECK(m.compared_all < m.compared_none);  // comparing there drops choices
    n.fanout_skipped += m.fanout_skipped;
    n.fronts += m.fronts, n.with += m.with, n.without += m.without, n.dropped += m.dropped;
  }
  CHECK(n.fronts > 20);
  // The pruning must do something, or this test compares a search with itself.
  CHECK(n.dropped > 0);
  CHECK(n.fanout_skipped > 0);  // the fan-out bounds (TileWorker::complete) skipped choices
  CHECK(n.with < n.without);
  CHECK(n.merged < n.without);
  CHECK(n.compared_all < n.with);  // comparing the level below the top drops choices too
}

// The whole GPT-3 layer at its smallest size on the preset of the paper's headline case: the
// vector unit's Einsums (the copy of I, the softmax), the five-rank projections and the attention
// matmuls, each with its unfused context and fused ones spread over its list. Every front with
// partial pruning, completion bounds and their classifications (per fan-out, per kept set of the
// level below the top and of the top) equals the front without partial pruning, where no choice
// is bounded.
TEST_CASE("ffm: GPT-3's Einsums on accelforge_tpu_v4i keep every pmapping front exactly under the completion bounds") {
  const Workload w = load_workload("gpt3_6.7b", {.batch = 1, .tokens = 16});
  const Core& c = test::preset_core("accelforge_tpu_v4i");
  const auto contexts = matchable_contexts(w, c, {});
  int64_t with = 0, without = 0, skipped = 0, fronts = 0;
  for (int i = 0; i < static_cast<int>(w.einsums.size()); ++i) {
    if (w.einsums[i].name == "Q") continue;  // K again
    const auto& all = contexts[static_cast<size_t>(i)];
    std::vector<PmappingContext> ctx;
    // The unfused context first, then fused ones spread over the list; not the unfused context of
    // the d_model x d_model projections (28 M tile mappings each without bounds, 8 s; the
    // five-rank chain above covers that shape).
    const bool big = w.einsums[i].name == "V" || w.einsums[i].name == "K" || w.einsums[i].name == "Z";
    const size_t step = std::max<size_t>(1, all.size() / 5);
    for (size_t k = big ? step : 0; k < all.size(); k += step) ctx.push_back(all[k]);
    PmappingOptions on, off;
    off.prune_partial = false;
    off.bound_front = false;
    const EinsumPmappings a = generate_pmappings(w, i, c, on, ctx);
    const EinsumPmappings b = generate_pmappings(w, i, c, off, ctx);
    with += a.evaluated;
    without += b.evaluated;
    skipped += a.fanout_skipped;
    for (size_t k = 0; k < ctx.size(); ++k) {
      INFO("Einsum " << w.einsums[i].name << " context " << k);
      const Front y = test::pmapping_criteria(b.pmappings[k], c, ctx[k]);
      CHECK(test::pmapping_criteria(a.pmappings[k], c, ctx[k]) == y);
      fronts += !y.empty();
    }
  }
  MESSAGE("GPT-3 batch 1 / 16 tokens: " << fronts << " fronts; evaluated " << with << " with the bounds, " << without
                                        << " without; " << skipped << " choices skipped by their classification");
  CHECK(fronts >= 40);
  CHECK(skipped > 0);
  CHECK(with * 20 < without);
}

// The lower bounds complete() skips rows with (TileWorker::check_bounds): every completion a
// sink would see, of every row that survives partial pruning, costs at least the bounds for its
// outer fan-out, in every context of both workloads on every architecture. Without this an
// unsound bound could go unnoticed wherever the front happens to hold a better point anyway.
TEST_CASE("ffm: the completion bounds of partial choices hold for every completion") {
  const Workload chain = test::matmul_chain(16, {{8, 8}, {16, 8}});
  const Workload five = test::projection_chain(2, 4, 2, 4, 4, 4);
  int64_t lanes = 0, rows = 0, tight = 0;
  for (const std::string arch : {"accelforge_simple", "accelforge_tpu_v4i", "accelforge_simba", "accelforge_eyeriss",
                                 "gemmini_default", "ffm_edge"}) {
    if (const char* only = std::getenv("MAPFUSE_TEST_ARCH"); only && arch != only) continue;
    const Core& c = test::preset_core(arch);
    for (const Workload* w : {&chain, &five}) {
      for (int i = 0; i < static_cast<int>(w->einsums.size()); ++i) {
        for (const PmappingContext& ctx : make_contexts(*w, i, c, {})) {
          with_pruned_rows(w->einsums[i], c, ctx, [&](const TileSearch& s, TileWorker& worker, const PartialChoices& p) {
          for (size_t r = 0; r < p.size(); ++r)
            for (bool level_more : {false, true}) {
              double best_e = 1e300, best_c = 1e300, lb_e = 1e300, lb_c = 1e300;
              auto check = [&](const CompactCost& cost, double e_lb, double c_lb) {
                ++lanes;
                CHECK(cost.energy_pj >= e_lb);
                CHECK(cost.cycles >= c_lb);
                CHECK(e_lb > 0);
                best_e = std::min(best_e, cost.energy_pj), best_c = std::min(best_c, cost.cycles);
                lb_e = std::min(lb_e, e_lb), lb_c = std::min(lb_c, c_lb);
              };
              const bool has = worker.check_bounds(s, p, r, check, level_more);
              rows += has;
              tight += has && best_e < 1e300 && best_e <= lb_e * 1.01 && best_c == lb_c;
            }
          });
        }
      }
    }
  }
  MESSAGE(lanes << " completions of " << rows << " partial choices checked against their bounds; " << tight
                << " rows' best completion within 1 % of the bound");
  CHECK(lanes > 100000);
  CHECK(tight > 0);  // the bounds are not vacuous
}

// How complete() classifies choices by their fan-out and kept set (of the level below the top,
// and of the top): against a front of one point at a threshold (the median energy of the row's
// completions), every completion whose choice the classification skips must cost more than the
// threshold. Checks the bookkeeping from bounds to skipped choices, which the front comparisons
// above cannot see where a wrongly skipped choice happens to be dominated anyway.
TEST_CASE("ffm: the classification of choices by fan-out and kept set skips only completions the front beats") {
  const Workload chain = test::matmul_chain(16, {{8, 8}, {16, 8}});
  const Workload five = test::projection_chain(2, 4, 2, 4, 4, 4);
  const Workload gpt3 = load_workload("gpt3_6.7b", {.batch = 1, .tokens = 64});
  int64_t lanes = 0, skipped = 0, rows = 0;
  auto check_search = [&](const Einsum& e, const Core& c, const PmappingContext& ctx) {
    with_pruned_rows(e, c, ctx, [&](const TileSearch& s, TileWorker& worker, const PartialChoices& p) {
    for (size_t r = 0; r < p.size(); ++r)
      for (bool level_more : {false, true}) {
        std::vector<double> energies;
        worker.check_classification(s, p, r, std::numeric_limits<double>::infinity(),
                                    [&](const CompactCost& cost, bool) { energies.push_back(cost.energy_pj); }, level_more);
        if (energies.empty()) continue;
        std::nth_element(energies.begin(), energies.begin() + static_cast<std::ptrdiff_t>(energies.size() / 2), energies.end());
        const double threshold = energies[energies.size() / 2];
        rows += worker.check_classification(s, p, r, threshold, [&](const CompactCost& cost, bool skip) {
          ++lanes;
          if (!skip) return;
          ++skipped;
          CHECK(cost.energy_pj > threshold);
        }, level_more);
      }
    });
  };
  for (const std::string arch : {"accelforge_tpu_v4i", "accelforge_eyeriss", "gemmini_default", "ffm_edge"}) {
    const Core& c = test::preset_core(arch);
    for (const Workload* w : {&chain, &five})
      for (int i = 0; i < static_cast<int>(w->einsums.size()); ++i)
        for (const PmappingContext& ctx : make_contexts(*w, i, c, {})) check_search(w->einsums[i], c, ctx);
  }
  // The vector unit's Einsums, whose kept sets at the GlobalBuffer decide most of their skips.
  const Core& tpu = test::preset_core("accelforge_tpu_v4i");
  for (const char* name : {"I", "QK_softmax"}) {
    const int i = gpt3.einsum_index(name);
    check_search(gpt3.einsums[i], tpu, make_contexts(gpt3, i, tpu, {}).front());
  }
  MESSAGE(lanes << " completions of " << rows << " classified choices; " << skipped
                << " skipped by the classification, each above the front's threshold");
  CHECK(skipped > 1000);
}

namespace {

// Small convolutions whose inputs have halos (no partial pruning): a conv, a strided conv, and
// with `depthwise` a depthwise one after them.
Workload window_convs(bool depthwise) {
  Workload w;
  w.name = "window_convs";
  w.einsums.push_back(make_conv("c1", {.K = 4, .C = 2, .P = 4, .Q = 4, .R = 3, .S = 3}, "x", "w1", "a"));
  w.einsums.push_back(make_conv("c2", {.K = 4, .C = 4, .P = 2, .Q = 2, .R = 2, .S = 2, .Wstride = 2, .Hstride = 2}, "a",
                                "w2", "b"));
  if (depthwise) w.einsums.push_back(make_depthwise_conv("dw", {.C = 4, .P = 1, .Q = 1, .R = 2, .S = 2}, "b", "w3", "d"));
  finalize(w);
  return w;
}

}  // namespace

// Branch and bound against the context's front (PmappingOptions::bound_front) where partial
// pruning does not apply: convolutions, whose inputs have halos. Every context's front, unfused
// and fused (backed on chip, resident weights, tiles accumulating over shared reduction loops),
// equals the one found with nothing bounded, on cores with and without fusion, fan-outs and
// bypasses; a strided conv and a depthwise one, whose window tensors have their own bounds.
TEST_CASE("ffm: branch and bound against the front keeps every convolution context's front exactly") {
  const Workload w = window_convs(true);
  int64_t unfused = 0, fused = 0, accumulating = 0, resident = 0, points = 0, with = 0, without = 0;
  // Nested fusion (one loop) adds contexts whose output accumulates over a shared loop.
  const std::vector<std::pair<std::string, int>> cases = {
      {"gemmini_default", 0}, {"gemmini_fusable", 0}, {"ffm_edge", 0}, {"accelforge_eyeriss", 0}, {"ffm_edge", 1}};
  for (const auto& [arch, nested] : cases) {
    const Core& c = test::preset_core(arch);
    int64_t arch_with = 0, arch_without = 0;
    for (int i = 0; i < static_cast<int>(w.einsums.size()); ++i) {
      PmappingOptions on, off;
      off.bound_front = false;
      on.nested_loops = off.nested_loops = nested;
      // Every unfused context and some of the fused ones, spread over the list (the unbounded
      // searches take the time).
      std::vector<PmappingContext> ctx;
      size_t n = 0;
      for (const PmappingContext& x : make_contexts(w, i, c, on))
        if (x.fused.backing_level < 0 || n++ % (nested ? 8 : 6) == 0) ctx.push_back(x);
      const EinsumPmappings a = generate_pmappings(w, i, c, on, ctx);
      const EinsumPmappings b = generate_pmappings(w, i, c, off, ctx);
      CHECK(a.partial_evaluated == 0);  // no partial pruning here: the bound is what cuts
      arch_with += a.evaluated;
      arch_without += b.evaluated;
      REQUIRE(a.pmappings.size() == b.pmappings.size());
      for (size_t k = 0; k < ctx.size(); ++k) {
        const Front y = test::pmapping_criteria(b.pmappings[k], c, ctx[k]);
        INFO(arch << " Einsum " << w.einsums[i].name << " context " << k);
        CHECK(test::pmapping_criteria(a.pmappings[k], c, ctx[k]) == y);
        if (y.empty()) continue;
        points += static_cast<int64_t>(y.size());
        if (ctx[k].fused.backing_level < 0) {
          ++unfused;
        } else {
          ++fused;
          accumulating += ctx[k].fused.reduction > 1;
          resident += ctx[k].fused.resident != 0;
        }
      }
    }
    MESSAGE(arch << std::string(nested ? ", nested" : "") << ": evaluated " << arch_with << " with the bound, " << arch_without
                 << " without");
    CHECK(arch_with < arch_without);
    with += arch_with, without += arch_without;
  }
  MESSAGE(unfused << " unfused and " << fused << " fused fronts (" << accumulating << " accumulating, " << resident
                  << " with resident tensors), " << points << " points");
  CHECK(unfused >= 8);
  CHECK(fused > 30);
  CHECK(accumulating > 0);
  CHECK(resident > 0);
  CHECK(points > unfused + fused);  // fronts of several points: not only the least energy is checked
  CHECK(with * 20 < without);
}

namespace {

// Cuts every choice whose reservation at the backing level is said to exceed a threshold, and
// counts the lanes within it (the words computed from the candidate, as PmappingSink counts them).
struct ReservationSink final : TileSink {
  const Einsum& e;
  int b;
  TensorMask at_b;
  int64_t limit;
  bool cut;
  int64_t within = 0, lanes = 0;
  ReservationSink(const Einsum& e_, int b_, TensorMask at_b_, int64_t limit_, bool cut_)
      : e(e_), b(b_), at_b(at_b_), limit(limit_), cut(cut_) {}
  void consume(const TileCandidate& cand, const CompactCost& cost) override {
    if (cost.invalid != Invalid::None && cost.invalid != Invalid::CapacityExceeded) return;
    std::array<int64_t, kMaxRanks> ext{};
    ext.fill(1);
    for (int l = 0; l <= b; ++l)
      for (int r = 0; r < static_cast<int>(e.ranks.size()); ++r)
        ext[r] *= cand.factor(l, LoopKind::Temporal, r) * cand.factor(l, LoopKind::SpatialX, r) *
                  cand.factor(l, LoopKind::SpatialY, r);
    int64_t words = 0;
    const TensorMask keep = static_cast<TensorMask>((*cand.keep)[b] & ~at_b);
    for (int t = 0; t < static_cast<int>(e.tensors.size()); ++t) {
      if (!(keep >> t & 1)) continue;
      int64_t v = 1;
      for (const auto& dim : e.tensors[t].dims) v *= Einsum::dim_extent(dim, ext.data());
      words += v;
    }
    ++lanes;
    within += words <= limit;
  }
  bool has_incumbent() const override { return true; }
  bool beaten(double, double, int level, int64_t words) override { return cut && level == b && words > limit; }
};

}  // namespace

// The reservation a fused context's branch and bound passes to its sink (backing_words: the words
// kept at the backing level besides the exchanged and resident tensors, once that level is
// chosen) is exact: cutting every choice said to keep more than a limit there loses no mapping
// within the limit, and does cut. (A reservation overstated by any amount fails this test; the
// fronts of the test above are too small to show it.)
TEST_CASE("ffm: the reservation branch and bound passes to the front is the one the front counts") {
  const Workload w = window_convs(false);
  int64_t contexts = 0, cut_somewhere = 0;
  for (const std::string arch : {"gemmini_fusable", "ffm_edge"})
    for (int ei = 0; ei < 2; ++ei) {
    const Core& c = test::preset_core(arch);
    size_t n = 0;
    for (const PmappingContext& ctx : make_contexts(w, ei, c, {})) {
      if (ctx.fused.backing_level < 0 || n++ % 3 != 0) continue;
      const Einsum tile = tile_einsum(w.einsums[static_cast<size_t>(ei)], ctx.shared);
      TileSearchSpec spec;
      spec.top = ctx.top_level;
      spec.backing_level = ctx.fused.backing_level;
      spec.onchip_backing = ctx.fused.at_b();
      spec.merge_supports = true;
      spec.bound_scalar = true;
      const Mapspace space;  // the search keeps a reference
      const TileSearch s(tile, c, space, spec);
      // Besides fixed limits, the words of every set of whole tiles the backing level may keep:
      // where it is the top (it takes the rest), those are exactly what a branch keeping that
      // set reserves, which the bounds of the levels below it pass per kept set.
      std::vector<int64_t> limits = {4, 16, 64};
      const int T = static_cast<int>(tile.tensors.size());
      for (unsigned m = 0; m < (1u << T); ++m) {
        if (m & spec.onchip_backing) continue;
        int64_t words = 0;
        for (int t = 0; t < T; ++t)
          if (m >> t & 1) words += tile.tensor_volume(t);
        limits.push_back(words);
      }
      for (const int64_t limit : limits) {
        ReservationSink all(tile, spec.backing_level, spec.onchip_backing, limit, false);
        ReservationSink bounded(tile, spec.backing_level, spec.onchip_backing, limit, true);
        TileWorker a, b;
        for (size_t i = 0; i < s.roots(); ++i) a.run(s, i, all), b.run(s, i, bounded);
        a.finish();
        b.finish();
        INFO(arch << " context at level " << spec.backing_level << ", limit " << limit);
        CHECK(bounded.within == all.within);
        cut_somewhere += bounded.lanes < all.lanes && all.within > 0;
      }
      ++contexts;
    }
  }
  MESSAGE(contexts << " fused contexts; " << cut_somewhere << " (context, limit) pairs where the limit cut");
  CHECK(contexts > 5);
  CHECK(cut_somewhere > 5);
}
