// The exhaustive mapper against an independent brute force over the unpruned mapspace.
#include <doctest/doctest.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <memory>
#include <set>
#include <omp.h>

#include "engine/arch/arch_toml.hpp"
#include "engine/common/error.hpp"
#include "engine/search/exhaustive.hpp"
#include "engine/search/tile_search/tile_search.hpp"
#include "engine/search/mapspace_toml.hpp"
#include "engine/workload/load.hpp"
#include "test_support.hpp"

using namespace mapfuse;

namespace {

// Three levels: a 24-word register file, a 4-wide array of 96-word buffers, DRAM.
Core small_core() {
  Core c;
  c.name = "small";
  c.compute = {"MAC", 0.5, 1e9, 1};
  Level rf{.name = "RF", .entries = 24, .read_pj = 0.5, .write_pj = 0.5, .update_pj = 0.5};
  Level buf{.name = "Buffer", .entries = 96, .shared_bandwidth = 2, .read_pj = 3, .write_pj = 4, .update_pj = 4};
  buf.fanout.x = 4;
  Level dram{.name = "DRAM", .shared_bandwidth = 1, .read_pj = 100, .write_pj = 100, .update_pj = 100};
  c.levels = {rf, buf, dram};
  finalize(c, "small");
  return c;
}

// Attention's score Einsum S[h,m,n] = Q[h,m,e] * K[h,n,e] (K in the weight role).
Einsum attention_scores() {
  Einsum qk;
  qk.name = "qk";
  qk.ranks = {{"H", 2}, {"M", 4}, {"N", 2}, {"E", 2}};
  qk.tensors = {{"Q", TensorRole::Input, {{{0, 1}}, {{1, 1}}, {{3, 1}}}, 8},
                {"K", TensorRole::Weight, {{{0, 1}}, {{2, 1}}, {{3, 1}}}, 8},
                {"S", TensorRole::Output, {{{0, 1}}, {{1, 1}}, {{2, 1}}}, 8}};
  return qk;
}

Einsum softmax_einsum() {
  Einsum e;
  e.name = "softmax";
  e.op = OpKind::Softmax;
  e.ranks = {{"M", 4}, {"P", 6}};
  e.tensors = {{"X", TensorRole::Input, {{{0, 1}}, {{1, 1}}}, 8}, {"Y", TensorRole::Output, {{{0, 1}}, {{1, 1}}}, 8}};
  return e;
}

// Brute force written independently of the mapper: every rank's factors over every (level, kind)
// slot the core allows, every kept set, every order; nothing pruned.
struct Brute {
  const Einsum& e;
  const Core& c;
  Objective obj;
  EvalPlan plan;
  double best = std::numeric_limits<double>::infinity();
  int64_t evaluated = 0;
  std::vector<std::vector<int64_t>> t, x, y;  // [level][rank]
  std::vector<TensorMask> keep;
  std::function<void(const CostResult&)> on_mapping;  // every mapping evaluated (t, x, y, keep hold it)
  const Mapping* current = nullptr;                   // the mapping on_mapping is called for
  TensorMask onchip = 0;  // tensors backed on chip (FlatMapping::onchip_backing): the top keeps none of them

  Brute(const Einsum& e_, const Core& c_, Objective o) : e(e_), c(core_for(c_, e_)), obj(o), plan(compile_plan(e_, c_)) {
    const size_t L = c.levels.size(), R = e.ranks.size();
    t.assign(L, std::vector<int64_t>(R, 1));
    x = y = t;
    keep.assign(L, 0);
  }

  bool allowed(int l, int r, bool on_x) const {
    const Fanout& f = c.levels[l].fanout;
    if ((on_x ? f.x : f.y) <= 1) return false;
    const RoleMask reuse = on_x ? f.x_reuse : f.y_reuse;
    for (size_t q = 0; q < e.tensors.size(); ++q)
      if ((reuse & role_bit(e.tensors[q].role)) && e.rank_relevant(static_cast<int>(q), r)) return false;
    return true;
  }

  void ranks(size_t r) {
    const int L = static_cast<int>(c.levels.size());
    if (r == e.ranks.size()) {
      // Fan-outs used below their min_usage are invalid, and the mapper never builds them.
      for (size_t l = 0; l < c.levels.size(); ++l) {
        int64_t fx = 1, fy = 1;
        for (size_t q = 0; q < e.ranks.size(); ++q) fx *= x[l][q], fy *= y[l][q];
        if (fx < min_axis_use(c.levels[l].fanout, LoopKind::SpatialX, e) ||
            fy < min_axis_use(c.levels[l].fanout, LoopKind::SpatialY, e))
          return;
      }
      return keeps(0);
    }
    // Split the rank over 3L slots: recursive over (level, kind).
    auto slots = [&](auto&& self, int slot, int64_t rest) -> void {
      if (slot == 3 * L) {
        if (rest == 1) ranks(r + 1);
        return;
      }
      const int l = slot / 3, kind = slot % 3;
      for (int64_t d = 1; d <= rest; ++d) {
        if (rest % d) continue;
        if (kind > 0 && d > 1 && !allowed(l, static_cast<int>(r), kind == 1)) continue;
        auto& v = kind == 0 ? t : kind == 1 ? x : y;
        v[l][r] = d;
        int64_t fx = 1, fy = 1;
        for (size_t q = 0; q < e.ranks.size(); ++q) fx *= x[l][q], fy *= y[l][q];
        if (fx <= c.levels[l].fanout.x && fy <= c.levels[l].fanout.y) self(self, slot + 1, rest / d);
        v[l][r] = 1;
      }
    };
    slots(slots, 0, e.ranks[r].size);
  }

  void keeps(int l) {
    const int L = static_cast<int>(c.levels.size()), T = static_cast<int>(e.tensors.size());
    if (l == L) return orders(L - 1, Mapping{std::vector<LevelMapping>(L)});
    for (unsigned m = 0; m < (1u << T); ++m) {
      if (l == L - 1 && m != (1u << T) - 1) continue;
      bool ok = true;
      for (int q = 0; q < T; ++q)
        if ((m >> q & 1) && !(c.levels[l].may_keep & role_bit(e.tensors[q].role))) ok = false;
      if (!ok) continue;
      keep[l] = static_cast<TensorMask>(m);
      keeps(l + 1);
    }
  }

  void orders(int l, Mapping m) {
    if (l < 0) {
      ++evaluated;
      FlatMapping f = flatten(m);
      if (onchip) {
        f.keep[f.n_levels - 1] = static_cast<TensorMask>(f.keep[f.n_levels - 1] & ~onchip);
        f.onchip_backing = onchip;
      }
      const CostResult r = evaluate(plan, f);
      if (r.valid()) best = std::min(best, objective_value(obj, r));
      current = &m;
      if (on_mapping) on_mapping(r);
      return;
    }
    std::vector<int> order;
    for (size_t q = 0; q < e.ranks.size(); ++q)
      if (t[l][q] > 1) order.push_back(static_cast<int>(q));
    do {
      LevelMapping& lm = m.levels[l];
      lm = {};
      lm.keep = keep[l];
      for (int q : order) lm.loops.push_back({q, t[l][q], LoopKind::Temporal});
      for (size_t q = 0; q < e.ranks.size(); ++q)
        if (x[l][q] > 1) lm.loops.push_back({static_cast<int>(q), x[l][q], LoopKind::SpatialX});
      for (size_t q = 0; q < e.ranks.size(); ++q)
        if (y[l][q] > 1) lm.loops.push_back({static_cast<int>(q), y[l][q], LoopKind::SpatialY});
      orders(l - 1, m);
    } while (std::next_permutation(order.begin(), order.end()));
  }
};

// Branch and bound (no front): the brute force's optimum, never more evaluations than the
// unbounded search, on one and on two threads (the incumbent is shared, so the cuts differ; the optimum not).
void compare_bounded(const Einsum& e, const Core& c, Objective obj, double brute_best, int64_t full_evaluated) {
  const int threads = omp_get_max_threads();
  for (int n : {1, 2}) {
    omp_set_num_threads(n);
    ExhaustiveOptions opt;
    opt.objective = obj;
    opt.front = false;
    const MapperResult r = exhaustive_search(e, c, {}, opt);
    INFO(e.name << " objective " << to_string(obj) << " bounded, threads " << n);
    REQUIRE(r.best.has_value());
    CHECK(objective_value(obj, r.cost) == brute_best);
    CHECK(r.pareto.empty());
    CHECK(r.evaluated <= full_evaluated);
    const CostResult again = evaluate(compile_plan(e, c), flatten(*r.best));
    CHECK(objective_value(obj, again) == brute_best);
  }
  omp_set_num_threads(threads);
}

void compare(const Einsum& e, const Core& c, Objective obj) {
  Brute b(e, c, obj);
  b.ranks(0);
  ExhaustiveOptions opt;
  opt.objective = obj;
  const MapperResult pruned = exhaustive_search(e, c, {}, opt);
  // Every order and every split of a rank around a level that keeps nothing: the unmerged space,
  // whose front the merged, order-reduced search must equal (and every mirror image).
  opt.symmetry = false;
  opt.reduce_orders = false;
  opt.merge_passthrough = false;
  opt.bound = false;  // and nothing bounded: `pruned`'s front (bounded) must equal this one
  const MapperResult all_orders = exhaustive_search(e, c, {}, opt);
  opt.prune = false;
  const MapperResult full = exhaustive_search(e, c, {}, opt);
  INFO(e.name << " objective " << to_string(obj));
  CHECK(full.evaluated == b.evaluated);  // the same space
  // Orders that cost the same are evaluated once: fewer mappings, the same optimum and front.
  CHECK(pruned.evaluated < all_orders.evaluated);
  CHECK(objective_value(obj, all_orders.cost) == b.best);
  REQUIRE(pruned.pareto.size() == all_orders.pareto.size());
  for (size_t i = 0; i < pruned.pareto.size(); ++i) {
    CHECK(pruned.pareto[i].energy_pj == all_orders.pareto[i].energy_pj);
    CHECK(pruned.pareto[i].cycles == all_orders.pareto[i].cycles);
  }
  CHECK(pruned.evaluated < full.evaluated);  // pruning cut something
  CHECK(pruned.evaluated <= all_orders.evaluated);
  CHECK(all_orders.valid == full.valid);  // pruning removes nothing valid
  REQUIRE(pruned.best.has_value());
  CHECK(objective_value(obj, pruned.cost) == b.best);
  CHECK(objective_value(obj, full.cost) == b.best);
  // The reported cost is the best mapping's own evaluation.
  const CostResult again = evaluate(compile_plan(e, c), flatten(*pruned.best));
  CHECK(again.energy_pj == pruned.cost.energy_pj);
  CHECK(again.cycles == pruned.cost.cycles);
  // Pareto front: non-dominated, sorted by energy with falling cycles, and it holds the optima.
  REQUIRE(!pruned.pareto.empty());
  for (size_t i = 1; i < pruned.pareto.size(); ++i) {
    CHECK(pruned.pareto[i].energy_pj > pruned.pareto[i - 1].energy_pj);
    CHECK(pruned.pareto[i].cycles < pruned.pareto[i - 1].cycles);
  }
  const MapperResult by_energy = exhaustive_search(e, c, {}, {.objective = Objective::Energy});
  const MapperResult by_cycles = exhaustive_search(e, c, {}, {.objective = Objective::Cycles});
  CHECK(pruned.pareto.front().energy_pj == by_energy.cost.energy_pj);
  CHECK(pruned.pareto.back().cycles == by_cycles.cost.cycles);
  compare_bounded(e, c, obj, b.best, all_orders.evaluated);
}

}  // namespace

TEST_CASE("mapper: exhaustive optimum equals a brute force (conv1d with output channels)") {
  Einsum e;
  e.name = "conv1d_oc";
  e.ranks = {{"R", 3}, {"P", 4}, {"K", 4}};
  e.tensors = {{"W", TensorRole::Weight, {{{0, 1}}, {{2, 1}}}, 8},
               {"I", TensorRole::Input, {{{1, 1}, {0, 1}}}, 8},
               {"O", TensorRole::Output, {{{2, 1}}, {{1, 1}}}, 8}};
  const Core c = small_core();
  compare(e, c, Objective::Edp);
  compare(e, c, Objective::Energy);
}

TEST_CASE("mapper: exhaustive optimum equals a brute force (2-D conv with halos and a stride)") {
  const Core c = small_core();
  compare(make_conv("conv2d", {.K = 1, .C = 2, .P = 2, .Q = 2, .R = 2, .S = 2, .Wstride = 2}), c, Objective::Edp);
  compare(make_conv("conv2d", {.K = 2, .C = 1, .P = 4, .Q = 1, .R = 3, .S = 1}), c, Objective::Energy);
}

TEST_CASE("mapper: mirror symmetry of a square convolution keeps the brute force's optimum and front") {
  const Core c = small_core();
  // P and Q, R and S swapped map the Einsum onto itself: half the mappings are searched.
  const Einsum sq = make_conv("conv2d_square", {.K = 1, .C = 2, .P = 2, .Q = 2, .R = 2, .S = 2});
  compare(sq, c, Objective::Edp);
  compare(sq, c, Objective::Energy);
  compare(sq, c, Objective::Cycles);
  TileSearchSpec spec;
  spec.break_symmetry = true;
  const TileSearch s(sq, c, {}, spec);
  REQUIRE(s.symmetric());
  std::vector<std::string> pairs;
  for (const auto& [a, b] : s.mirror_pairs()) pairs.push_back(sq.ranks[a].name + sq.ranks[b].name);
  CHECK(pairs == std::vector<std::string>{"RS", "PQ"});
  // The whole space (no bound: counts that do not depend on when the threads find an incumbent).
  ExhaustiveOptions opt;
  opt.objective = Objective::Edp;
  opt.bound = false;
  const MapperResult with = exhaustive_search(sq, c, {}, opt);
  opt.symmetry = false;
  const MapperResult without = exhaustive_search(sq, c, {}, opt);
  CHECK(with.cost.edp() == without.cost.edp());
  CHECK(with.evaluated < without.evaluated);
  // Exactly one of every mapping and its mirror image is searched (both where the factors are their
  // own mirror image), every order and kept set included: the symmetric search's mappings are the
  // whole space's, and each of the whole space's is one of them or the mirror of one.
  struct Collect final : TileSink {
    const Einsum* e = nullptr;
    const Core* c = nullptr;
    std::set<std::string> seen;
    void consume(const TileCandidate& cand, const CompactCost&) override { seen.insert(to_text(cand.build(), *e, *c)); }
  };
  const Mapspace unconstrained;  // TileSearch keeps a reference to it
  // Depth first, and best first through bounds that cut nothing (the sink never has a mapping).
  for (const bool best_first : {false, true}) {
    auto collect = [&](bool symmetric, std::unique_ptr<TileSearch>& search) {
      TileSearchSpec whole;
      whole.reduce_orders = false;
      whole.prune = false;
      whole.break_symmetry = symmetric;
      whole.bound_scalar = whole.best_first = best_first;
      search = std::make_unique<TileSearch>(sq, c, unconstrained, whole);
      Collect k;
      k.e = &sq;
      k.c = &c;
      TileWorker w;
      for (size_t i = 0; i < search->roots(); ++i) w.run(*search, i, k);
      w.finish();
      return k.seen;
    };
    std::unique_ptr<TileSearch> sym_search, all_search;
    const std::set<std::string> half = collect(true, sym_search), all = collect(false, all_search);
    const Core core = core_for(c, sq);
    int64_t missing = 0, outside = 0;
    for (const std::string& m : all) {
      const std::string mirror = to_text(sym_search->mirrored(parse_mapping(m, sq, core)), sq, core);
      if (!half.count(m) && !half.count(mirror)) ++missing;
    }
    for (const std::string& m : half) outside += !all.count(m);
    MESSAGE(std::string(best_first ? "conv2d_square best first: " : "conv2d_square: ") << all.size() << " mappings, " << half.size()
                            << " searched with the mirror symmetry");
    CHECK(missing == 0);
    CHECK(outside == 0);
    CHECK(half.size() < all.size());
    CHECK(half.size() * 2 >= all.size());
  }
  // A stride on one axis only, or a constraint, breaks the symmetry: nothing is left out.
  const TileSearch strided(make_conv("conv2d", {.K = 1, .C = 2, .P = 2, .Q = 2, .R = 2, .S = 2, .Wstride = 2}), c, {},
                           spec);
  CHECK_FALSE(strided.symmetric());
  Mapspace pinned;
  pinned.levels.resize(c.levels.size());
  pinned.levels[0].max_factor.assign(sq.ranks.size(), std::nullopt);
  pinned.levels[0].max_factor[static_cast<size_t>(sq.rank_index("P"))] = 1;
  const TileSearch constrained(sq, c, pinned, spec);
  CHECK_FALSE(constrained.symmetric());
}

TEST_CASE("mapper: exhaustive optimum equals a brute force (matmul)") {
  const Core c = small_core();
  compare(make_matmul("mm", 4, 2, 4), c, Objective::Edp);
  compare(make_matmul("mm", 4, 2, 4), c, Objective::Cycles);
}

TEST_CASE("mapper: constraints pin part of the mapping; impossible ones find nothing") {
  const Core c = small_core();
  const Einsum e = make_matmul("mm", 4, 2, 4);
  Mapspace s;
  s.levels.resize(3);
  s.levels[2].order = std::vector<int>{0, 1, 2};  // DRAM: M outer, then N, then K
  s.levels[1].keep = TensorMask{0b110};           // buffer keeps B and Z
  s.levels[1].spatial_x = 0u;                     // no spatial spread
  // The whole mapspaces (nothing bounded), whose sizes are compared below.
  const MapperResult r = exhaustive_search(e, c, s, {.bound = false});
  REQUIRE(r.best.has_value());
  CHECK(r.best->levels[1].keep == 0b110);
  for (const Loop& lp : r.best->levels[1].loops) CHECK(lp.kind == LoopKind::Temporal);
  int last = -1;
  for (const Loop& lp : r.best->levels[2].loops) {
    CHECK(lp.rank > last);
    last = lp.rank;
  }
  // Fewer mappings than the free space, and never better than it.
  const MapperResult free = exhaustive_search(e, c, {}, {.bound = false});
  CHECK(r.evaluated < free.evaluated);
  CHECK(r.cost.edp() >= free.cost.edp());
  // A buffer that must keep everything with K = 4 forced into the RF cannot fit: no mapping.
  Mapspace impossible;
  impossible.levels.resize(3);
  impossible.levels[0].keep = TensorMask{0b111};
  impossible.levels[0].min_factor = {std::nullopt, std::nullopt, int64_t{4}};
  impossible.levels[0].min_factor.resize(3);
  impossible.levels[0].min_factor[0] = 4;
  impossible.levels[0].min_factor[2] = 4;
  impossible.levels[0].min_factor[1] = 2;
  const MapperResult none = exhaustive_search(e, c, impossible);
  CHECK_FALSE(none.best.has_value());
  CHECK(none.valid == 0);
}

TEST_CASE("mapper: results do not depend on the thread count, and a budget stops a huge space") {
  const Core c = load_architecture("fadiff_small").cores.at(0);
  const Einsum e = make_matmul("mm", 8, 8, 4);
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const MapperResult one = exhaustive_search(e, c, {});
  omp_set_num_threads(2);
  const MapperResult a = exhaustive_search(e, c, {});
  omp_set_num_threads(threads);
  REQUIRE(a.best.has_value());
  CHECK(a.valid > 0);
  CHECK(to_text(*a.best, e, c) == to_text(*one.best, e, c));
  CHECK(a.cost.edp() == one.cost.edp());
  REQUIRE(a.pareto.size() == one.pareto.size());
  for (size_t i = 0; i < a.pareto.size(); ++i) CHECK(to_text(a.pareto[i].mapping, e, c) == to_text(one.pareto[i].mapping, e, c));
  CHECK_THROWS_AS(exhaustive_search(e, c, {}, {.max_mappings = 100, .bound = false}), InputError);
  // The refusal names how large the mapspace is at least and a level to constrain. (Branch and
  // bound, best first, now finds this optimum within 100 evaluations.) One thread: with two, how
  // many leaves are evaluated before the budget is checked depends on their timing, and the
  // search sometimes ended within 10.
  omp_set_num_threads(1);
  try {
    exhaustive_search(e, c, {}, {.max_mappings = 10, .front = false});
    omp_set_num_threads(threads);
    FAIL("no error");
  } catch (const InputError& err) {
    omp_set_num_threads(threads);
    const std::string what = err.what();
    CHECK(what.find("too large: 10 mappings evaluated") != std::string::npos);
    CHECK(what.find("at least") != std::string::npos);
    CHECK(what.find("temporal_order for level '") != std::string::npos);
  }
}

// By hand: a 4x2x4 matmul on three levels splits 4 = 2^2 over three temporal loops 6 ways, 2 three
// ways; the RF and the buffer may each keep any of 2^3 sets, DRAM keeps all: 6*3*6 * 8*8.
TEST_CASE("mapper: the mapspace size in the refusal counts tile shapes and kept sets") {
  const Core c = small_core();
  CHECK(TileSearch(make_matmul("mm", 4, 2, 4), c, {}, {}).temporal_mapspace_size() == 6912.0);
  // A fixed DRAM order over M alone: N = 2 splits over the RF and the buffer 2 ways, K = 4 3 ways.
  Mapspace s;
  s.levels.resize(3);
  s.levels[2].order = std::vector<int>{0};
  CHECK(TileSearch(make_matmul("mm", 4, 2, 4), c, s, {}).temporal_mapspace_size() == 6.0 * 2 * 3 * 64);
}

// A softmax on a vector unit (4 lanes under the RF): choices that split a rank's factor
// differently between the RF's loops and the lanes cost the same and are evaluated once
// (TileSearch::lanes_level); the optimum and the front stay those of the brute force.
TEST_CASE("mapper: exhaustive optimum equals a brute force (softmax on a vector unit)") {
  Core c = small_core();
  c.vector = VectorUnit{"Vector", 0, 4, 0.25};
  finalize(c, "small");
  const Einsum e = softmax_einsum();
  REQUIRE(core_for(c, e).compute.instances == 4 * 4);
  compare(e, c, Objective::Edp);
  compare(e, c, Objective::Cycles);
}

TEST_CASE("mapper: exhaustive optimum equals a brute force (depthwise conv and attention)") {
  const Core c = small_core();
  compare(make_depthwise_conv("dw", {.C = 2, .P = 4, .R = 3}, "I", "W", "O"), c, Objective::Edp);
  const Einsum qk = attention_scores();
  compare(qk, c, Objective::Cycles);
}

// Branch and bound against the full search on real layers under DOSA's Gemmini mapspace: the same
// optimum to the bit, with a fraction of the evaluations. (The whole network:
// tests/cli/map_bound_resnet18.sh.)
// Three ResNet-18 layers on Gemmini under DOSA's mapspace, small enough to search whole.
template <class Fn>
void each_dosa_layer(Fn&& fn) {
  const Core c = load_architecture("gemmini_default").cores.at(0);
  const Workload w = load_workload("resnet18");
  const std::vector<ConstraintSpec> cons = load_constraints(test::source_dir("presets/constraints/gemmini_dosa.toml"));
  for (const char* name : {"fc", "layer4.0.downsample", "layer3.0.downsample"}) {
    const Einsum& e = w.einsums.at(static_cast<size_t>(w.einsum_index(name)));
    fn(name, e, c, make_mapspace(cons, e, c));
  }
}

TEST_CASE("mapper: branch and bound finds the exhaustive optimum on ResNet-18 layers (gemmini_dosa)") {
  each_dosa_layer([](const char* name, const Einsum& e, const Core& c, const Mapspace& space) {
    for (Objective obj : {Objective::Edp, Objective::Energy, Objective::Cycles}) {
      ExhaustiveOptions opt;
      opt.objective = obj;
      opt.bound = false;
      const MapperResult full = exhaustive_search(e, c, space, opt);
      opt.front = false;
      opt.bound = true;
      const MapperResult bb = exhaustive_search(e, c, space, opt);
      INFO(name << " " << to_string(obj) << ": " << bb.evaluated << " of " << full.evaluated << " evaluated");
      REQUIRE(full.best.has_value());
      REQUIRE(bb.best.has_value());
      CHECK(objective_value(obj, bb.cost) == objective_value(obj, full.cost));
      CHECK(to_text(*bb.best, e, c) == to_text(*full.best, e, c));  // ties broken the same way
      CHECK(bb.evaluated < full.evaluated);
      if (obj != Objective::Edp) continue;
      // The front by branch and bound (cut where it strictly dominates a choice's bounds): the
      // whole mapspace's front, point for point and mapping for mapping.
      opt.front = true;
      const MapperResult bf = exhaustive_search(e, c, space, opt);
      INFO(name << " front: " << bf.evaluated << " of " << full.evaluated << " evaluated");
      REQUIRE(bf.pareto.size() == full.pareto.size());
      for (size_t i = 0; i < bf.pareto.size(); ++i) {
        CHECK(bf.pareto[i].energy_pj == full.pareto[i].energy_pj);
        CHECK(bf.pareto[i].cycles == full.pareto[i].cycles);
        CHECK(to_text(bf.pareto[i].mapping, e, c) == to_text(full.pareto[i].mapping, e, c));
      }
      CHECK(bf.evaluated < full.evaluated);
    }
  });
}

// A relative optimality gap (ExhaustiveOptions::gap) trades the proof of optimality for time: the
// answer is within the gap of the exact optimum (with the energy tie-break: the least cycles
// exactly, the energy within the gap), found with fewer evaluations, and the same on any thread
// count (the search then runs on one). Full mapspace of ResNet-18 layers on Gemmini.
TEST_CASE("mapper: a relative gap stays within the gap of the optimum, evaluates less and is deterministic") {
  const Core c = load_architecture("gemmini_default").cores.at(0);
  const Workload w = load_workload("resnet18");
  const int threads = omp_get_max_threads();
  for (const char* name : {"layer2.0.conv1", "layer3.0.conv1"}) {
    const Einsum& e = w.einsums.at(static_cast<size_t>(w.einsum_index(name)));
    const Mapspace space = make_mapspace({}, e, c);
    for (const bool tiebreak : {false, true}) {
      ExhaustiveOptions opt;
      opt.objective = tiebreak ? Objective::Cycles : Objective::Edp;
      opt.energy_tiebreak = tiebreak;
      opt.front = false;
      opt.max_mappings = 0;
      const MapperResult exact = exhaustive_search(e, c, space, opt);
      opt.gap = 0.01;
      omp_set_num_threads(2);
      const MapperResult two = exhaustive_search(e, c, space, opt);
      omp_set_num_threads(1);
      const MapperResult one = exhaustive_search(e, c, space, opt);
      omp_set_num_threads(threads);
      REQUIRE(exact.best.has_value());
      REQUIRE(one.best.has_value());
      REQUIRE(two.best.has_value());
      INFO(std::string(name) << (tiebreak ? std::string(" cycles + energy") : std::string(" edp")) << ": exact " << exact.evaluated << " evaluated, "
                << exact.cost.edp() << "; gap " << one.evaluated << ", " << one.cost.edp());
      if (tiebreak) {
        CHECK(one.cost.cycles == exact.cost.cycles);
        CHECK(one.cost.energy_pj >= exact.cost.energy_pj);
        CHECK(one.cost.energy_pj <= exact.cost.energy_pj * 1.01);
      } else {
        CHECK(one.cost.edp() >= exact.cost.edp());
        CHECK(one.cost.edp() <= exact.cost.edp() * 1.01);
      }
      CHECK(one.evaluated + one.probe_evaluated < exact.evaluated + exact.probe_evaluated);
      CHECK(to_text(*one.best, e, c) == to_text(*two.best, e, c));
      CHECK(one.evaluated == two.evaluated);
    }
  }
  const Einsum& fc = w.einsums.at(static_cast<size_t>(w.einsum_index("fc")));
  CHECK_THROWS_AS(exhaustive_search(fc, c, {}, {.front = false, .gap = -0.1}), InputError);
  CHECK_THROWS_AS(exhaustive_search(fc, c, {}, {.gap = 0.01}), InputError);  // a front has no gap
}

// A work limit (ExhaustiveOptions::max_work) makes the search anytime: it stops after that many
// level choices with the best mapping found, which is valid and no better than the optimum; the
// same limit stops at the same place on one thread or two; a limit above the exact search's work
// changes nothing.
TEST_CASE("mapper: a work limit stops the search deterministically with a valid mapping; a large one is exact") {
  const Core c = load_architecture("gemmini_default").cores.at(0);
  const Workload w = load_workload("resnet18");
  const int threads = omp_get_max_threads();
  for (const char* name : {"layer2.0.conv1", "layer3.0.conv2"}) {
    const Einsum& e = w.einsums.at(static_cast<size_t>(w.einsum_index(name)));
    const Mapspace space = make_mapspace({}, e, c);
    for (const bool tiebreak : {false, true}) {
      ExhaustiveOptions opt;
      opt.objective = tiebreak ? Objective::Cycles : Objective::Edp;
      opt.energy_tiebreak = tiebreak;
      opt.front = false;
      opt.max_mappings = 0;
      const MapperResult exact = exhaustive_search(e, c, space, opt);
      REQUIRE(exact.best.has_value());
      CHECK(!exact.truncated);
      // The exact search's work, counted by a limit it never reaches.
      opt.max_work = int64_t{1} << 60;
      const MapperResult counted = exhaustive_search(e, c, space, opt);
      REQUIRE(counted.best.has_value());
      CHECK(!counted.truncated);
      CHECK(counted.work > 0);
      CHECK(objective_value(opt.objective, counted.cost) == objective_value(opt.objective, exact.cost));
      CHECK(counted.cost.energy_pj == exact.cost.energy_pj);
      CHECK(to_text(*counted.best, e, c) == to_text(*exact.best, e, c));
      // A tenth of it stops early.
      opt.max_work = std::max<int64_t>(counted.work / 10, 1);
      omp_set_num_threads(2);
      const MapperResult two = exhaustive_search(e, c, space, opt);
      omp_set_num_threads(1);
      const MapperResult one = exhaustive_search(e, c, space, opt);
      omp_set_num_threads(threads);
      INFO(std::string(name) << (tiebreak ? " cycles + energy" : " edp") << ": exact work " << counted.work
                             << ", limit " << opt.max_work);
      CHECK(one.truncated);
      CHECK(one.work > opt.max_work);
      CHECK(one.work <= opt.max_work + 1'000'000);  // stops within one node's choices of the limit
      REQUIRE(one.best.has_value());
      REQUIRE(two.best.has_value());
      CHECK(to_text(*one.best, e, c) == to_text(*two.best, e, c));
      CHECK(one.evaluated == two.evaluated);
      CHECK(objective_value(opt.objective, one.cost) >= objective_value(opt.objective, exact.cost));
      // The mapping returned is costed as the model costs it (the lane evaluator agreed with it).
      CHECK(evaluate(compile_plan(e, c), flatten(*one.best)).energy_pj == doctest::Approx(one.cost.energy_pj).epsilon(1e-12));
    }
  }
  const Einsum& fc = w.einsums.at(static_cast<size_t>(w.einsum_index("fc")));
  CHECK_THROWS_AS(exhaustive_search(fc, c, {}, {.front = false, .max_work = -1}), InputError);
  CHECK_THROWS_AS(exhaustive_search(fc, c, {}, {.max_work = 1000}), InputError);  // a front has no work limit
}

// Best first changes only the order in which subtrees are searched, and a known upper bound only
// what is cut from the start: the optimum and its text stay those of the plain depth-first search.
// An upper bound below the optimum leaves nothing, which shows that it does cut.
TEST_CASE("mapper: best-first branch and bound and a known upper bound find the depth-first optimum") {
  each_dosa_layer([](const char* name, const Einsum& e, const Core& c, const Mapspace& space) {
    for (Objective obj : {Objective::Edp, Objective::Energy}) {
      ExhaustiveOptions opt;
      opt.objective = obj;
      opt.front = false;
      opt.best_first = false;
      const MapperResult depth = exhaustive_search(e, c, space, opt);
      opt.best_first = true;
      const MapperResult best = exhaustive_search(e, c, space, opt);
      REQUIRE(depth.best.has_value());
      REQUIRE(best.best.has_value());
      INFO(name << " " << to_string(obj) << ": best first " << best.evaluated << ", depth first " << depth.evaluated
                << " evaluated");
      CHECK(objective_value(obj, best.cost) == objective_value(obj, depth.cost));
      CHECK(to_text(*best.best, e, c) == to_text(*depth.best, e, c));
      const double optimum = objective_value(obj, best.cost);
      opt.upper_bound = optimum;
      const MapperResult bounded = exhaustive_search(e, c, space, opt);
      REQUIRE(bounded.best.has_value());
      CHECK(objective_value(obj, bounded.cost) == optimum);
      CHECK(to_text(*bounded.best, e, c) == to_text(*best.best, e, c));
      CHECK(bounded.evaluated <= best.evaluated);
      opt.upper_bound = optimum * (1 - 1e-6);
      const MapperResult none = exhaustive_search(e, c, space, opt);
      CHECK_FALSE(none.best.has_value());
      CHECK(none.evaluated <= bounded.evaluated);
    }
  });
}

// Dropping dominated loop-order classes (branch and bound only) where the order alone decides the
// reuse: a register that keeps one weight word and has no loops of its own, so every loop sits at
// DRAM and only orders with M (which the weight does not index) inside the weight's ranks reuse
// the register's word. The bounded search must find the optimum of the whole space (the front
// search tries every class); keeping the dominated class instead of the dominating one fails it.
TEST_CASE("mapper: dropping dominated loop orders keeps the optimum where the order decides the reuse") {
  Core c;
  c.name = "reg";
  c.compute = {"MAC", 0.5, 1e9, 1};
  Level rf{.name = "RF", .entries = 1, .read_pj = 0.5, .write_pj = 0.5, .update_pj = 0.5};
  rf.may_keep = role_bit(TensorRole::Weight);
  Level dram{.name = "DRAM", .shared_bandwidth = 4, .read_pj = 100, .write_pj = 100, .update_pj = 100};
  c.levels = {rf, dram};
  finalize(c, "reg");
  const Einsum e = make_matmul("mm", 4, 2, 3);  // Z[m,n] = A[m,k] * B[k,n], B the weight
  Mapspace space;
  space.levels.resize(2);
  space.levels[0].order = std::vector<int>{};  // no temporal loops at the register
  for (Objective obj : {Objective::Energy, Objective::Edp}) {
    ExhaustiveOptions opt;
    opt.objective = obj;
    opt.bound = false;
    const MapperResult all = exhaustive_search(e, c, space, opt);
    opt.front = false;
    opt.bound = true;
    const MapperResult bb = exhaustive_search(e, c, space, opt);
    REQUIRE(all.best.has_value());
    REQUIRE(bb.best.has_value());
    INFO(to_string(obj) << ": " << to_text(*bb.best, e, c) << " against " << to_text(*all.best, e, c));
    CHECK(objective_value(obj, bb.cost) == objective_value(obj, all.cost));
    CHECK(to_text(*bb.best, e, c) == to_text(*all.best, e, c));
    CHECK(bb.evaluated < all.evaluated);
    // The optimum keeps the weight in the register and reuses it over M: 4x fewer weight reads from
    // DRAM than the 24 operations.
    CHECK(bb.cost.access[1][1].reads == 6);
  }
}

// small_core with a level between the register and the buffer, the fan-out moved off the buffer:
// four levels, so that a chosen level can have a parent between it and the top.
Core deep_core() {
  Core deep = small_core();
  Level mid{.name = "Mid", .entries = 48, .shared_bandwidth = 2, .read_pj = 1, .write_pj = 1, .update_pj = 1};
  deep.levels.insert(deep.levels.begin() + 1, mid);
  deep.levels[2].fanout = {};
  finalize(deep, "deep");
  return deep;
}

// The window-step bound (TileSearch::window_step_fills) against the model's own fills, for every
// mapping of the brute force, every level keeping a window tensor and every prefix of chosen
// levels: per instance, times the instances, never above what the model counts, and equal to it
// for some (so a bound raised by a part in a thousand fails this test). The energy bound test above
// cannot see a small excess in one term when the others are loose; this one checks the term alone.
TEST_CASE("mapper: the window-step fills are at most the model's, and reach it") {
  const Core deep = deep_core();
  const Core c = small_core();
  const std::vector<std::pair<Einsum, const Core*>> cases = {
      {make_depthwise_conv("dw1d_s2", {.C = 2, .P = 4, .R = 3, .Wstride = 2}, "I", "W", "O"), &c},
      {make_depthwise_conv("dw1d_s2_deep", {.P = 4, .R = 3, .Wstride = 2}, "I", "W", "O"), &deep},
      {make_depthwise_conv("dw2d", {.C = 2, .P = 3, .Q = 2, .R = 3, .S = 2, .Wstride = 2, .Wpad = 1}, "I", "W", "O"), &c},
      {make_conv("conv1d", {.K = 2, .C = 2, .P = 4, .R = 2}), &deep}};
  for (const auto& [e, core] : cases) {
    TileSearchSpec spec;
    spec.bound_scalar = true;
    const TileSearch search(e, *core, {}, spec);
    Brute b(e, *core, Objective::Edp);
    const int L = static_cast<int>(b.c.levels.size()), R = static_cast<int>(e.ranks.size());
    const int T = static_cast<int>(e.tensors.size());
    int64_t checked = 0, over = 0, equal = 0;
    b.on_mapping = [&](const CostResult& r) {
      if (!r.valid()) return;
      std::array<LevelChoice, kMaxLevels> chosen{};
      std::array<TileSearch::LevelSummary, kMaxLevels> sums{};
      double cums[kMaxLevels][kMaxRanks] = {};
      std::array<int64_t, kMaxRanks> rest{};
      for (int q = 0; q < R; ++q) rest[static_cast<size_t>(q)] = e.ranks[static_cast<size_t>(q)].size;
      for (int l = 0; l < L; ++l) {
        LevelChoice& ch = chosen[static_cast<size_t>(l)];
        ch.keep = l == L - 1 ? static_cast<TensorMask>((1u << T) - 1) : b.keep[static_cast<size_t>(l)];
        for (int q = 0; q < R; ++q) {
          ch.t[q] = b.t[l][q], ch.x[q] = b.x[l][q], ch.y[q] = b.y[l][q];
          rest[q] /= ch.t[q] * ch.x[q] * ch.y[q];
          cums[l][q] = (l > 0 ? cums[l - 1][q] : 1.0) * static_cast<double>(ch.t[q] * ch.x[q] * ch.y[q]);
        }
        search.summarize(ch, l, sums[static_cast<size_t>(l)]);
        for (int t = 0; t < T; ++t) {
          if (!search.window_disjoint(t)) continue;
          for (int k = 0; k < l; ++k) {
            if (!(chosen[static_cast<size_t>(k)].keep >> t & 1)) continue;
            double instances = 1;  // of level k: the spatial factors above it
            for (int m = k + 1; m < L; ++m)
              for (int q = 0; q < R; ++q) instances *= static_cast<double>(b.x[m][q] * b.y[m][q]);
            const double bound = search.window_step_fills(chosen.data(), sums.data(), k, l, t, cums, 1, rest) * instances;
            const double fills = static_cast<double>(r.access[static_cast<size_t>(k)][static_cast<size_t>(t)].fills);
            ++checked;
            if (bound > fills * (1 + 1e-12) && over < 3) {
              std::string txt;
              for (int m = L - 1; m >= 0; --m) {
                txt += " | L" + std::to_string(m) + " keep" + std::to_string(chosen[m].keep) + ":";
                for (int q = 0; q < R; ++q) {
                  if (b.t[m][q] > 1) txt += " " + e.ranks[q].name + "=" + std::to_string(b.t[m][q]);
                  if (b.x[m][q] > 1) txt += " " + e.ranks[q].name + "=" + std::to_string(b.x[m][q]) + "@x";
                }
              }
              MESSAGE("OVER k=" << k << " l=" << l << " t=" << t << " bound " << bound << " fills " << fills << txt << " :: " << to_text(*b.current, e, b.c));
            }
            over += bound > fills * (1 + 1e-12);
            equal += l == L - 1 && std::abs(bound - fills) <= 1e-9 * fills;
          }
        }
      }
    };
    b.ranks(0);
    MESSAGE(e.name << ": " << checked << " window-step bounds checked, " << equal << " equal to the model's fills");
    CHECK(checked > 1000);
    CHECK(over == 0);
    CHECK(equal > 0);
  }
}

// The parent-above term of the energy bound (TileSearch::via_parent_energy: the next level above
// the chosen ones keeping a tensor takes the chosen keeper's fills or drains; a level between is
// then filled, and the top still accessed, once per value) against the model's energy of that
// tensor above the chosen levels, given the model's own words at the parent: never above it, and
// equal for some mappings (so a term raised by a part in a thousand fails this test).
TEST_CASE("mapper: the parent-above energy is at most the model's, and reaches it") {
  const Core deep = deep_core();
  const std::vector<Einsum> cases = {make_matmul("mm", 4, 2, 4), make_conv("conv1d", {.K = 2, .C = 2, .P = 4, .R = 2}),
                                     make_depthwise_conv("dw1d_s2", {.C = 2, .P = 4, .R = 3, .Wstride = 2}, "I", "W", "O")};
  for (const Einsum& e : cases) {
    TileSearchSpec spec;
    spec.bound_scalar = true;
    const TileSearch search(e, deep, {}, spec);
    Brute b(e, deep, Objective::Edp);
    const int L = static_cast<int>(b.c.levels.size()), T = static_cast<int>(e.tensors.size());
    const int out = search.plan().output;
    int64_t checked = 0, over = 0, equal = 0, between = 0;
    b.on_mapping = [&](const CostResult& r) {
      if (!r.valid()) return;
      for (int l = 0; l < L - 1; ++l)
        for (int t = 0; t < T; ++t) {
          int k = l;  // the outermost chosen level keeping t
          while (k >= 0 && !(b.keep[static_cast<size_t>(k)] >> t & 1)) --k;
          if (k < 0) continue;
          int p = l + 1;  // its parent
          while (p < L - 1 && !(b.keep[static_cast<size_t>(p)] >> t & 1)) ++p;
          const TensorAccesses& at_p = r.access[static_cast<size_t>(p)][static_cast<size_t>(t)];
          const double words = static_cast<double>(t == out ? at_p.updates : at_p.reads);
          double model = 0;  // t's energy at the levels above l
          for (int m = l + 1; m < L; ++m) {
            const TensorAccesses& a = r.access[static_cast<size_t>(m)][static_cast<size_t>(t)];
            const PlanLevel& lv = search.plan().levels[static_cast<size_t>(m)];
            model += static_cast<double>(a.reads) * lv.read_pj + static_cast<double>(a.fills) * lv.write_pj +
                     static_cast<double>(a.updates) * lv.update_pj;
          }
          const double bound = search.via_parent_energy(l, t, words);
          ++checked;
          over += bound > model * (1 + 1e-12);
          if (std::abs(bound - model) <= 1e-9 * model) ++equal, between += p < L - 1;
        }
    };
    b.ranks(0);
    MESSAGE(e.name << ": " << checked << " parent-above terms checked, " << equal << " equal to the model's ("
                   << between << " with a parent between)");
    CHECK(checked > 1000);
    CHECK(over == 0);
    CHECK(between > 0);
  }
}

// The energy tie-break in one branch-and-bound search (Stream's "fewest cycles, then least
// energy") against the whole front: the least energy among the fastest mappings, ties by text.
TEST_CASE("mapper: branch and bound with the energy tie-break equals the front's fastest, least-energy mapping") {
  each_dosa_layer([](const char* name, const Einsum& e, const Core& c, const Mapspace& space) {
    ExhaustiveOptions opt;
    opt.objective = Objective::Cycles;
    opt.bound = false;
    const MapperResult full = exhaustive_search(e, c, space, opt);
    REQUIRE(!full.pareto.empty());
    opt.bound = true;
    const ParetoMapping& fastest = full.pareto.back();  // by energy ascending: the fewest cycles last
    opt.front = false;
    opt.energy_tiebreak = true;
    const MapperResult bb = exhaustive_search(e, c, space, opt);
    REQUIRE(bb.best.has_value());
    INFO(name << ": " << bb.evaluated << " of " << full.evaluated << " evaluated");
    CHECK(bb.cost.cycles == fastest.cycles);
    CHECK(bb.cost.energy_pj == fastest.energy_pj);
    CHECK(to_text(*bb.best, e, c) == to_text(fastest.mapping, e, c));
    // Without the tie-break the fewest cycles alone: the same cycles, energy no lower.
    opt.energy_tiebreak = false;
    const MapperResult plain = exhaustive_search(e, c, space, opt);
    CHECK(plain.cost.cycles == fastest.cycles);
    CHECK(plain.cost.energy_pj >= fastest.energy_pj);
    CHECK(bb.evaluated < full.evaluated);
  });
}

// The lower bounds branch and bound cuts with (TileSearch::scalar_bounds) hold for every mapping
// of the unpruned space, at every level, valid or not, also the spatial-first ones (a level's
// temporal factors and kept set open); and they are tight for some (so a bound raised by 1 %
// fails this test).
TEST_CASE("mapper: the branch-and-bound lower bounds hold for every mapping of the brute force") {
  Core vec = small_core();
  vec.vector = VectorUnit{"Vector", 0, 4, 0.25};
  finalize(vec, "small");
  const Einsum softmax = softmax_einsum();
  const Einsum qk = attention_scores();
  const Core c = small_core();
  // Stream's whole-layer CTs: an off-chip input that no buffer may keep, read straight from a
  // DRAM whose bandwidth sets the latency and shared by the buffer's fan-out (multicast), bounded
  // before the buffer is chosen.
  Core dram_bound = small_core();
  dram_bound.levels[1].shared_bandwidth = 0;
  dram_bound.levels[2].shared_bandwidth = 4;
  dram_bound.levels[1].may_keep = role_bit(TensorRole::Weight) | role_bit(TensorRole::Output);
  finalize(dram_bound, "dram_bound");
  const std::vector<std::pair<Einsum, const Core*>> cases = {
      {make_matmul("mm_dram_bound", 4, 4, 2), &dram_bound},
      {make_conv("conv2d", {.K = 1, .C = 2, .P = 2, .Q = 2, .R = 2, .S = 2, .Wstride = 2}), &c},
      {make_matmul("mm", 4, 2, 4), &c},
      {make_depthwise_conv("dw", {.C = 4, .P = 4, .R = 3}, "I", "W", "O"), &c},
      // Two window dimensions, one strided and padded: the window-position fills and the top's
      // compulsory traffic (scalar_bounds) are checked on both.
      {make_depthwise_conv("dw2d", {.C = 2, .P = 3, .Q = 2, .R = 3, .S = 2, .Wstride = 2, .Wpad = 1}, "I", "W", "O"), &c},
      {qk, &c},
      {softmax, &vec},
      // Stream's CTs with operands held whole on chip (the top keeps none of them): the weights
      // alone, and every tensor.
      {make_matmul("mm_w_onchip", 4, 2, 4), &c},
      {make_conv("conv2d_all_onchip", {.K = 1, .C = 2, .P = 2, .Q = 2, .R = 2, .S = 2, .Wstride = 2}), &c}};
  for (const auto& [e, core] : cases) {
    TileSearchSpec spec;
    spec.bound_scalar = true;
    const bool w_onchip = e.name == "mm_w_onchip", all_onchip = e.name == "conv2d_all_onchip";
    if (w_onchip) spec.onchip_backing = 0b010;  // the matmul's second operand
    if (all_onchip) spec.onchip_backing = 0b111;
    const TileSearch search(e, *core, {}, spec);
    Brute b(e, *core, Objective::Edp);
    b.onchip = spec.onchip_backing;
    const int L = static_cast<int>(b.c.levels.size()), R = static_cast<int>(e.ranks.size());
    int64_t checked = 0, exact_steps = 0, failed = 0, bandwidth_bound = 0, backed_mappings = 0;
    int64_t fixed_checked = 0, fixed_looser = 0;  // bounds with a level above fixed (fix_keep)
    // The per-order bound of the lanes (serving energy + the top's traffic in the mapping's loop
    // order, TileWorker::check_order_bound): never above the model, equal to it for some mappings.
    int64_t order_checked = 0, order_failed = 0, order_tight = 0;
    double closest_order = 0;
    TileWorker order_worker;
    double closest_energy = 0;  // the largest bound / energy ratio
    double closest_cycles = 0;  // the same for cycles, where a bandwidth sets the bound
    b.on_mapping = [&](const CostResult& r) {
      if (b.onchip) {
        if (!r.valid()) return;  // kept nowhere below the top: no backing
        // As Stream's CTs pose it: a backed tensor is held whole at its outermost keeper, so no
        // level above that one has a loop over a rank it indexes.
        for (int t = 0; t < static_cast<int>(e.tensors.size()); ++t) {
          if (!(b.onchip >> t & 1)) continue;
          int home = L - 2;
          while (home >= 0 && !(b.keep[static_cast<size_t>(home)] >> t & 1)) --home;
          for (int l = home + 1; l < L; ++l)
            for (int q = 0; q < R; ++q)
              if (e.rank_relevant(t, q) && b.t[l][q] * b.x[l][q] * b.y[l][q] > 1) return;
        }
        ++backed_mappings;
      }
      std::array<LevelChoice, kMaxLevels> chosen{};
      std::array<int64_t, kMaxRanks> rest{};
      for (int q = 0; q < R; ++q) rest[static_cast<size_t>(q)] = e.ranks[static_cast<size_t>(q)].size;
      for (int l = 0; l < L; ++l) {
        LevelChoice& ch = chosen[static_cast<size_t>(l)];
        // The spatial-first bound (level l's temporal factors and kept set still open).
        ch.keep = 0;
        std::array<int64_t, kMaxRanks> spatial_rest = rest;
        for (int q = 0; q < R; ++q) {
          ch.t[q] = 1, ch.x[q] = b.x[l][q], ch.y[q] = b.y[l][q];
          spatial_rest[q] /= ch.x[q] * ch.y[q];
        }
        double open_energy = 0, open_cycles = 0;
        search.scalar_bounds(chosen.data(), l, spatial_rest, open_energy, open_cycles, true);
        ++checked;
        if (open_energy > r.energy_pj || open_cycles > r.cycles) ++failed;
        ch.keep = l == L - 1 ? static_cast<TensorMask>((1u << e.tensors.size()) - 1) : b.keep[static_cast<size_t>(l)];
        // The kept set chosen, the temporal factors still open (best first's per spatial set bound).
        search.scalar_bounds(chosen.data(), l, spatial_rest, open_energy, open_cycles, false, true);
        ++checked;
        if (open_energy > r.energy_pj || open_cycles > r.cycles) ++failed;
        for (int q = 0; q < R; ++q) {
          ch.t[q] = b.t[l][q], ch.x[q] = b.x[l][q], ch.y[q] = b.y[l][q];
          rest[q] /= ch.t[q] * ch.x[q] * ch.y[q];
        }
        double energy = 0, cycles = 0;
        search.scalar_bounds(chosen.data(), l, rest, energy, cycles);
        ++checked;
        if (energy > r.energy_pj || cycles > r.cycles) ++failed;
        closest_energy = std::max(closest_energy, energy / r.energy_pj);
        // With a level m above l keeping exactly a given set (a fused context's bounds per kept set
        // of its backing level, TileSearch::fix_keep), all sets in one call: the bound under the
        // set this mapping keeps at m holds too, and is at least the one with m open.
        if (l < L - 2) {
          TileSearch::LevelSummary sums[kMaxLevels];
          for (int k = 0; k <= l; ++k) search.summarize(chosen[static_cast<size_t>(k)], k, sums[k]);
          const unsigned sets_n = 1u << e.tensors.size();
          std::vector<TileSearch::KeepSets> sets(sets_n);
          std::vector<double> en(sets_n), cy(sets_n);
          for (int m = l + 1; m < L - 1; ++m) {
            for (unsigned k = 0; k < sets_n; ++k) search.fix_keep(m, static_cast<TensorMask>(k), sets[k]);
            search.scalar_bounds_keeps(chosen.data(), sums, l, rest, &ch.keep, 1, en.data(), cy.data(), false,
                                       sets.data(), static_cast<int>(sets_n), m);
            const size_t j = b.keep[static_cast<size_t>(m)];
            ++checked;
            ++fixed_checked;
            if (en[j] > r.energy_pj || cy[j] > r.cycles) ++failed;
            if (en[j] < energy * (1 - 1e-12) || cy[j] < cycles) ++fixed_looser;
          }
        }
        if (l == L - 1 && !b.onchip) {
          TileSearch::LevelSummary sums[kMaxLevels];
          for (int k = 0; k <= l; ++k) search.summarize(chosen[static_cast<size_t>(k)], k, sums[k]);
          const double serving = search.serving_energy(chosen.data(), sums);
          double oe = 0, oc = 0;
          if (order_worker.check_order_bound(search, flatten(*b.current), serving, oe, oc)) {
            ++order_checked;
            if (serving > r.energy_pj || oe > r.energy_pj || oc > r.cycles) ++order_failed;
            order_tight += oe >= r.energy_pj * (1 - 1e-6);
            closest_order = std::max(closest_order, oe / r.energy_pj);
          }
        }
        // With every level chosen, the cycle bound is at least the model's compute steps, and
        // more only where a level's bandwidth binds (then at most the model's cycles, above).
        if (l == L - 1) {
          exact_steps += cycles >= r.compute_cycles;
          if (cycles > r.compute_cycles) {
            ++bandwidth_bound;
            closest_cycles = std::max(closest_cycles, cycles / r.cycles);
          }
        }
      }
    };
    b.ranks(0);
    INFO(e.name << ": " << checked << " bounds checked, closest energy bound " << closest_energy << "; "
                << bandwidth_bound << " complete mappings bandwidth-bound, closest cycle bound " << closest_cycles);
    MESSAGE(e.name << ": " << checked << " bounds checked, closest energy bound " << closest_energy << "; "
                   << bandwidth_bound << " complete mappings bandwidth-bound, closest cycle bound " << closest_cycles);
    MESSAGE(e.name << ": " << order_checked << " per-order bounds, " << order_tight << " equal to the model's energy, closest "
                   << closest_order);
    CHECK(order_failed == 0);
    if (!b.onchip && e.name != "softmax") {
      CHECK(order_checked > 100);
      CHECK(order_tight > 0);  // the serving and top terms are exact somewhere
    }
    CHECK(checked > 1000);
    CHECK(failed == 0);
    CHECK(fixed_checked > 100);
    CHECK(fixed_looser == 0);
    CHECK(exact_steps == (b.onchip ? backed_mappings : b.evaluated));
    CHECK(bandwidth_bound > 0);  // the bandwidth part of the cycle bound is exercised
  }
}
