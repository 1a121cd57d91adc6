// FFM (engine/search/ffm): the joined optimum and energy-latency front equal a brute force over
// every combination of per-Einsum mappings of the same fused mapspace, and every returned
// LoopTree re-evaluated end to end costs exactly the sum of its pmappings' criteria.
#include <doctest/doctest.h>

#include <chrono>
#include <functional>
#include <set>
#include <tuple>

#include <omp.h>

#include "engine/cost/fused.hpp"
#include "engine/common/error.hpp"
#include "engine/search/ffm/ffm.hpp"
#include "engine/workload/load.hpp"
#include "ffm_criteria.hpp"
#include "test_support.hpp"

using namespace mapfuse;
using namespace mapfuse::ffm;

namespace {

// DRAM (100 pJ, 4 words/cycle) > global buffer (`glb` words, 2 pJ, 1 word/cycle) > registers
// (`reg` words, 0.25 pJ); MAC 0.5 pJ. Optional fan-out of the buffer into the registers. The
// narrow buffer makes energy and latency disagree: keeping a tensor in the buffer saves DRAM
// energy but its traffic through the buffer costs cycles.
Core ffm_test_core(int64_t glb, int64_t reg, int64_t fanout_x = 1) {
  Core c;
  c.name = "ffm_test";
  c.compute = {"MAC", 0.5, 1e9, 1};
  Level r{.name = "Reg", .entries = reg, .word_bits = 8, .read_pj = 0.25, .write_pj = 0.25, .update_pj = 0.25};
  Level g{.name = "GLB", .entries = glb, .word_bits = 8, .shared_bandwidth = 1, .read_pj = 2, .write_pj = 2, .update_pj = 2};
  g.fanout.x = fanout_x;
  Level d{.name = "DRAM", .word_bits = 8, .shared_bandwidth = 4, .read_pj = 100, .write_pj = 100, .update_pj = 100};
  c.levels = {r, g, d};
  finalize(c, "ffm_test");
  return c;
}


// X: T1 = T0 W0, Y: T2 = T1 W1, Z: T3 = T2 W2, then the residual Q: T4 = T3 + T1. Fused as one
// group, T1 stays live on chip during Z's branch although Z does not touch it.
// out[m,n] = a[m,n] + b[m,n] (M x N).
Einsum add(std::string name, int64_t M, int64_t N, std::string a, std::string b, std::string out) {
  Einsum q;
  q.name = std::move(name);
  q.op = OpKind::Elementwise;
  q.ranks = {{"M", M}, {"N", N}};
  const std::vector<Projection> mn = {{{0, 1}}, {{1, 1}}};
  q.tensors = {{std::move(a), TensorRole::Input, mn, 8}, {std::move(b), TensorRole::Input, mn, 8},
               {std::move(out), TensorRole::Output, mn, 8}};
  return q;
}

Workload residual(int64_t M, int64_t N) {
  Workload w;
  w.name = "residual";
  w.einsums.push_back(make_matmul("X", M, N, N, "T0", "W0", "T1"));
  w.einsums.push_back(make_matmul("Y", M, N, N, "T1", "W1", "T2"));
  w.einsums.push_back(make_matmul("Z", M, N, N, "T2", "W2", "T3"));
  w.einsums.push_back(add("Q", M, N, "T3", "T1", "T4"));
  finalize(w);
  return w;
}

struct Point {
  double energy, cycles;
  bool operator==(const Point&) const = default;
};

struct Brute {
  std::vector<Point> front;  // by energy
  std::vector<std::vector<Choice>> front_choices;
  int64_t combinations = 0;  // complete, within capacity
  std::vector<EinsumPmappings> pm;
};

// Pmappings of the reference generator without pruning, one per distinct set of criteria in each
// context (tile mappings with identical criteria, e.g. loop orders that change nothing, give
// identical combinations).
std::vector<EinsumPmappings> distinct_pmappings(const Workload& w, const Core& c, const PmappingOptions& opt) {
  std::vector<EinsumPmappings> pm;
  for (int i = 0; i < static_cast<int>(w.einsums.size()); ++i) {
    // The reference generator (no order reduction, no SIMD, no threads): independent of the
    // fast generator FFM uses.
    pm.push_back(generate_pmappings_reference(w, i, c, opt, make_contexts(w, i, c, opt)));
    for (auto& list : pm.back().pmappings) {
      std::vector<Pmapping> unique;
      for (Pmapping& p : list) {
        bool seen = false;
        for (const Pmapping& u : unique) seen |= u.energy_pj == p.energy_pj && u.cycles == p.cycles && u.own == p.own;
        if (!seen) unique.push_back(std::move(p));
      }
      list = std::move(unique);
    }
  }
  return pm;
}

// Puts a complete combination on the running energy-latency front (kept sorted by energy).
void add_to_front(Brute& out, Point p, const std::vector<Choice>& ch) {
  for (const Point& q : out.front)
    if (q.energy <= p.energy && q.cycles <= p.cycles) return;
  std::vector<Point> f;
  std::vector<std::vector<Choice>> fc;
  for (size_t k = 0; k < out.front.size(); ++k)
    if (!(p.energy <= out.front[k].energy && p.cycles <= out.front[k].cycles))
      f.push_back(out.front[k]), fc.push_back(out.front_choices[k]);
  size_t at = 0;
  while (at < f.size() && f[at].energy < p.energy) ++at;
  f.insert(f.begin() + static_cast<long>(at), p);
  fc.insert(fc.begin() + static_cast<long>(at), ch);
  out.front = std::move(f);
  out.front_choices = std::move(fc);
}

// Every tensor `ctx` (a context of Einsum i) consumes has the compatibility its producer's chosen
// context gives it.
bool agrees_with_producers(const Workload& w, const std::vector<EinsumPmappings>& pm, const std::vector<Choice>& ch,
                           int i, const PmappingContext& ctx) {
  for (const TensorCompat& tc : ctx.compat) {
    const int producer = w.tensors[tc.tensor].producer;
    if (producer >= i) continue;
    const TensorCompat* other = pm[producer].contexts[ch[producer].context].find(tc.tensor);
    if (!other || !(*other == tc)) return false;
  }
  return true;
}

// Every tuple of the listed tile mappings (fitting[e], under the contexts in ch) onto the front.
void combine(Brute& out, const std::vector<std::vector<int>>& fitting, std::vector<Choice>& ch) {
  const int E = static_cast<int>(ch.size());
  std::function<void(int, double, double)> pick = [&](int i, double energy, double cycles) {
    if (i == E) return add_to_front(out, {energy, cycles}, ch);
    const auto& list = out.pm[i].pmappings[ch[i].context];
    for (int q : fitting[i]) {
      if (i == E - 1) ++out.combinations;
      ch[i].pmapping = q;
      pick(i + 1, energy + list[q].energy_pj, cycles + list[q].cycles);
    }
  };
  pick(0, 0.0, 0.0);
}

// Every combination of per-Einsum mappings: for every assignment of contexts whose shared tensors
// agree (chains: producer and consumer have the same compatibility), every tuple of tile mappings
// (no pruning of any kind except skipping tuples that already overflow a level), kept on a
// running energy-latency front. Tile mappings of one context with identical criteria (energy,
// latency, reservations; e.g. loop orders that change nothing) give identical combinations, so
// only the first of each is combined.
Brute brute_force(const Workload& w, const Core& c, PmappingOptions opt) {
  opt.prune = false;
  Brute out;
  const int E = static_cast<int>(w.einsums.size());
  out.pm = distinct_pmappings(w, c, opt);
  const int L = static_cast<int>(c.levels.size());
  std::vector<Choice> ch(E);
  std::vector<std::array<int64_t, kMaxLevels>> live(E);
  std::vector<std::vector<int>> fitting(E);  // per Einsum: tile mappings within capacity
  std::function<void(int)> assign = [&](int i) {
    if (i == E) {
      // A fusion group is a run of consecutive Einsums: every Einsum after the producer of an
      // on-chip tensor, up to its last consumer, consumes some on-chip tensor.
      for (int e = 0; e < E; ++e)
        for (const TensorCompat& tc : out.pm[e].contexts[ch[e].context].compat)
          if (tc.fused() && w.tensors[tc.tensor].producer == e)
            for (int j = e + 1; j <= w.tensors[tc.tensor].consumers.back(); ++j) {
              bool joined = false;
              for (const TensorCompat& x : out.pm[j].contexts[ch[j].context].compat)
                joined |= x.fused() && w.tensors[x.tensor].producer != j;
              if (!joined) return;
            }
      // ... and every tensor exchanged inside a group is on chip (one backing level per group).
      std::vector<int> group(E);
      for (int e = 0; e < E; ++e) {
        group[e] = e;
        for (const TensorCompat& x : out.pm[e].contexts[ch[e].context].compat)
          if (x.fused() && w.tensors[x.tensor].producer != e) group[e] = group[w.tensors[x.tensor].producer];
      }
      for (int e = 0; e < E; ++e)
        for (const TensorCompat& x : out.pm[e].contexts[ch[e].context].compat) {
          const int producer = w.tensors[x.tensor].producer;
          if (producer != e && group[producer] == group[e] && !x.fused()) return;
        }
      // Exchanged tiles live from the producer's branch to the consumer's.
      for (auto& a : live) a.fill(0);
      for (int e = 0; e < E; ++e)
        for (const TensorCompat& tc : out.pm[e].contexts[ch[e].context].compat)
          if (tc.fused() && w.tensors[tc.tensor].producer == e)
            for (int j = e; j <= w.tensors[tc.tensor].consumers.back(); ++j) live[j][tc.level] += tc.tile;
      // Resident tensors (whole) live at b during every branch of their group.
      for (int e = 0; e < E; ++e) {
        const FusedContext& f = out.pm[e].contexts[ch[e].context].fused;
        for (int ti = 0; ti < static_cast<int>(w.einsums[e].tensors.size()); ++ti)
          if (f.resident >> ti & 1)
            for (int j = 0; j < E; ++j)
              if (group[j] == group[e]) live[j][f.backing_level] += w.einsums[e].tensor_volume(ti);
      }
      // A branch fits when its own reservations plus the exchanged tiles live during it fit.
      for (int e = 0; e < E; ++e) {
        fitting[e].clear();
        const auto& list = out.pm[e].pmappings[ch[e].context];
        for (size_t q = 0; q < list.size(); ++q) {
          bool fits = true;
          for (int l = 0; l < L; ++l)
            if (c.levels[l].entries > 0 &&
                (list[q].own[l] + live[e][l]) * c.levels[l].multiple_buffering > c.levels[l].entries)
              fits = false;
          if (fits) fitting[e].push_back(static_cast<int>(q));
        }
      }
      combine(out, fitting, ch);
      return;
    }
    for (size_t k = 0; k < out.pm[i].contexts.size(); ++k) {
      const PmappingContext& ctx = out.pm[i].contexts[k];
      bool ok = agrees_with_producers(w, out.pm, ch, i, ctx);
      // The producer of a fused tensor must find its consumer fused too (checked at the consumer).
      if (i > 0)
        for (const TensorCompat& tc : out.pm[i - 1].contexts[ch[i - 1].context].compat)
          if (tc.fused() && w.tensors[tc.tensor].producer == i - 1 && !ctx.find(tc.tensor)) ok = false;
      if (!ok) continue;
      ch[i].context = static_cast<int>(k);
      assign(i + 1);
    }
  };
  assign(0);
  return out;
}

// A MAC Einsum from rank sizes and, per tensor, the ranks indexing its dimensions (plain; the
// output last; the second tensor is a weight when `weight`).
Einsum plain_einsum(std::string name, std::vector<std::pair<std::string, int64_t>> ranks,
                    std::vector<std::pair<std::string, std::vector<int>>> tensors, bool weight) {
  Einsum e;
  e.name = std::move(name);
  for (auto& [n, size] : ranks) e.ranks.push_back({n, size});
  for (size_t t = 0; t < tensors.size(); ++t) {
    TensorAccess a;
    a.name = tensors[t].first;
    a.role = t + 1 == tensors.size() ? TensorRole::Output : t == 1 && weight ? TensorRole::Weight : TensorRole::Input;
    for (int r : tensors[t].second) a.dims.push_back({{r, 1}});
    e.tensors.push_back(std::move(a));
  }
  return e;
}

// Attention in miniature, the shape of TransFusion's dataflow: S[m,p,h] = Q[m,h,e] K[p,h,e],
// A[m,h,f] = S[m,p,h] V[p,h,f], Z[m,g] = A[m,h,f] WZ[h,f,g]. Nested fusion can share a loop over
// m with all three and one over h with QK and AV alone (Z reduces over h). With `projection`,
// Q[m,h,e] = I[m,d] WQ[d,h,e] comes first: QK then reads Q again in every iteration of the h
// loop, so Q's tile is held until AV is done.
Workload mini_attention(int64_t n, bool projection) {
  Workload w;
  w.name = "mini_attention";
  if (projection)
    w.einsums.push_back(plain_einsum("Qp", {{"M", n}, {"H", 2}, {"E", 2}, {"D", 2}},
                                     {{"I", {0, 3}}, {"WQ", {3, 1, 2}}, {"Q", {0, 1, 2}}}, true));
  w.einsums.push_back(plain_einsum("QK", {{"M", n}, {"P", n}, {"H", 2}, {"E", 2}},
                                   {{"Q", {0, 2, 3}}, {"K", {1, 2, 3}}, {"S", {0, 1, 2}}}, false));
  w.einsums.push_back(plain_einsum("AV", {{"M", n}, {"H", 2}, {"F", 2}, {"P", n}},
                                   {{"S", {0, 3, 1}}, {"V", {3, 1, 2}}, {"A", {0, 1, 2}}}, false));
  w.einsums.push_back(plain_einsum("Z", {{"M", n}, {"G", 2}, {"H", 2}, {"F", 2}},
                                   {{"A", {0, 2, 3}}, {"WZ", {2, 3, 1}}, {"Z", {0, 1}}}, true));
  finalize(w);
  return w;
}

// The brute force of a mapspace with nested fusion, with the fused cost model as the judge of
// structure: every assignment of contexts whose shared tensors agree is built into a LoopTree
// (build_looptree; an assignment it cannot build is no mapping) and evaluated end to end
// (evaluate_fused; one it rejects is outside the mapspace). The exchanged tiles each branch holds
// come from that evaluation (usage minus the branch's own words), not from the join's rules; then
// every tuple of tile mappings that fits is costed, as above.
Brute nested_brute_force(const Workload& w, const Core& c, PmappingOptions opt, int64_t* trees) {
  opt.prune = false;
  Brute out;
  const int E = static_cast<int>(w.einsums.size());
  out.pm = distinct_pmappings(w, c, opt);
  const int L = static_cast<int>(c.levels.size());
  std::vector<Choice> ch(E);
  std::vector<std::vector<int>> fitting(E);
  std::function<void(int)> assign = [&](int i) {
    if (i == E) {
      for (int e = 0; e < E; ++e)
        if (out.pm[e].pmappings[ch[e].context].empty()) return;
        else ch[e].pmapping = 0;
      FusedCost f;
      try {
        f = evaluate_fused(build_looptree(w, c, out.pm, ch), w, c);
      } catch (const std::logic_error&) {  // InputError included: not a mapping of this mapspace
        return;
      }
      ++*trees;
      double sum = 0;
      for (int e = 0; e < E; ++e) sum += out.pm[e].pmappings[ch[e].context][0].energy_pj;
      CHECK(f.energy_pj == doctest::Approx(sum).epsilon(1e-12));
      for (int e = 0; e < E; ++e) {
        fitting[e].clear();
        const auto& list = out.pm[e].pmappings[ch[e].context];
        for (size_t q = 0; q < list.size(); ++q) {
          bool fits = true;
          for (int l = 0; l < L; ++l) {
            const int64_t live = f.usage[e][l] - f.einsums[e].own[l];
            if (c.levels[l].entries > 0 &&
                (list[q].own[l] + live) * c.levels[l].multiple_buffering > c.levels[l].entries)
              fits = false;
          }
          if (fits) fitting[e].push_back(static_cast<int>(q));
        }
        // With the exchanged tiles fixed by the tree, the Einsums' choices are independent: only
        // those on an Einsum's own energy-latency front can be on the sum's (exact).
        std::vector<int> front;
        for (int q : fitting[e]) {
          bool dominated = false;
          for (int r : fitting[e])
            dominated |= r != q && list[r].energy_pj <= list[q].energy_pj && list[r].cycles <= list[q].cycles &&
                         (list[r].energy_pj < list[q].energy_pj || list[r].cycles < list[q].cycles || r < q);
          if (!dominated) front.push_back(q);
        }
        fitting[e] = std::move(front);
      }
      combine(out, fitting, ch);
      return;
    }
    for (size_t k = 0; k < out.pm[i].contexts.size(); ++k) {
      const PmappingContext& ctx = out.pm[i].contexts[k];
      bool ok = agrees_with_producers(w, out.pm, ch, i, ctx);
      if (!ok) continue;
      ch[i].context = static_cast<int>(k);
      assign(i + 1);
    }
  };
  assign(0);
  return out;
}

std::vector<Point> points(const FfmResult& r) {
  std::vector<Point> p;
  for (const FfmSolution& s : r.pareto) p.push_back({s.energy_pj, s.cycles});
  return p;
}

double best_of(const std::vector<Point>& f, Objective o) {
  double best = -1;
  for (const Point& p : f) {
    const double v = o == Objective::Energy ? p.energy : o == Objective::Cycles ? p.cycles : p.energy * p.cycles;
    if (best < 0 || v < best) best = v;
  }
  return best;
}

int fused_groups(const LoopTree& t) {
  int n = 0;
  for (const FusionGroup& g : t.groups) n += g.einsums.size() > 1;
  return n;
}

// FFM against the brute force, and every FFM solution re-evaluated end to end.
FfmResult check_against_brute_force(const Workload& w, const Core& c, const PmappingOptions& opt, bool expect_fusion) {
  const auto t0 = std::chrono::steady_clock::now();
  FfmOptions fo;
  fo.pmappings = opt;
  const FfmResult r = ffm_search(w, c, fo);
  const auto t1 = std::chrono::steady_clock::now();
  const Brute b = brute_force(w, c, opt);
  const auto t2 = std::chrono::steady_clock::now();
  int64_t generated = 0, kept = 0, all = 0;
  for (const EinsumPmappings& p : r.pmappings) generated += p.evaluated, kept += p.kept;
  for (const EinsumPmappings& p : b.pm)
    for (const auto& list : p.pmappings) all += static_cast<int64_t>(list.size());
  CHECK(r.contexts_matched < r.contexts);  // e.g. a producer sharing a rank its consumer cannot
  MESSAGE(w.einsums.size() << " Einsums: FFM " << std::chrono::duration<double>(t1 - t0).count() << " s ("
                           << r.contexts_matched << " of " << r.contexts << " contexts matchable, " << generated << " pmappings evaluated, " << kept << " kept; brute force "
                           << std::chrono::duration<double>(t2 - t1).count() << " s over " << all
                           << " distinct tile mappings and " << b.combinations << " valid combinations; front of "
                           << b.front.size() << " points)");
  REQUIRE_FALSE(b.front.empty());
  REQUIRE_FALSE(r.pareto.empty());
  // The whole energy-latency front, value for value, and the optimum of every objective.
  CHECK(points(r) == b.front);
  for (Objective o : {Objective::Energy, Objective::Cycles, Objective::Edp}) {
    const FfmSolution* s = r.best(o);
    REQUIRE(s != nullptr);
    const double v = o == Objective::Energy ? s->energy_pj : o == Objective::Cycles ? s->cycles : s->edp();
    CHECK(v == best_of(b.front, o));
  }
  // Sum of the joined pmappings' criteria == end-to-end evaluation of the LoopTree, to the bit.
  for (const FfmSolution& s : r.pareto) {
    const auto err = check_looptree(s.tree, w, c);
    INFO(err.value_or(""));
    REQUIRE_FALSE(err.has_value());
    const FusedCost f = evaluate_fused(s.tree, w, c);
    CHECK(f.valid);
    CHECK(f.energy_pj == s.energy_pj);
    CHECK(f.cycles == s.cycles);
  }
  // The brute force's own optimum, built as a tree, agrees with the fused evaluation too.
  const LoopTree bt = build_looptree(w, c, b.pm, b.front_choices.front());
  const FusedCost bf = evaluate_fused(bt, w, c);
  CHECK(bf.valid);
  CHECK(bf.energy_pj == b.front.front().energy);
  CHECK(bf.cycles == b.front.front().cycles);
  if (expect_fusion) CHECK(fused_groups(r.best(Objective::Energy)->tree) > 0);
  return r;
}

}  // namespace

TEST_CASE("ffm: contexts of a matmul in a chain") {
  const Workload w = test::matmul_chain(4, {{2, 2}, {2, 2}});
  const Core c = ffm_test_core(64, 4);
  // MM0 produces T1: unfused, or T1 at Reg or GLB with shared loops over M (divisors 1, 2, 4)
  // and N (1, 2).
  PmappingOptions every;
  every.prune = false;
  every.resident = false;
  const std::vector<PmappingContext> a = make_contexts(w, 0, c, every);
  CHECK(a.size() == 1 + 2 * 3 * 2);
  // MM1 consumes T1 and produces T2 (the last tensor, no consumer): only M may be shared (its K
  // does not index its output), so 1 + 2 levels x 3 factors.
  const std::vector<PmappingContext> b = make_contexts(w, 1, c, every);
  CHECK(b.size() == 1 + 2 * 3);
  // Storage above the split: per level, MM0 may keep W0 (indexed by K and N) resident when only
  // M is shared (factors 2 and 4), T0 (M and K) when only N is; MM1 its W1 when M is shared.
  PmappingOptions with_resident = every;
  with_resident.resident = true;
  const std::vector<PmappingContext> ar = make_contexts(w, 0, c, with_resident),
                                     br = make_contexts(w, 1, c, with_resident);
  CHECK(ar.size() == a.size() + 2 * 3);
  CHECK(br.size() == b.size() + 2 * 2);
  for (const PmappingContext& ctx : ar)
    if (ctx.fused.resident) {
      CHECK(ctx.fused.iterations > 1);
      CHECK(ctx.fused.resident == (ctx.shared[0] > 1 ? 0b010 : 0b001));  // W0 under M loops, T0 under N
    }
  for (const PmappingContext& ctx : br)
    if (ctx.fused.resident) CHECK(ctx.fused.resident == 0b010);
  // With pruning, the one context of each that stores T1's whole 8-word tile at the 4-word Reg
  // is left out (no pmapping of it fits); nothing else.
  for (int i : {0, 1}) {
    PmappingOptions pruned;
    pruned.resident = false;
    const std::vector<PmappingContext> all = make_contexts(w, i, c, every), kept = make_contexts(w, i, c, pruned);
    CHECK(kept.size() == all.size() - 1);
    size_t k = 0;
    for (const PmappingContext& ctx : all) {
      const bool whole_at_reg = ctx.fused.backing_level == 0 && ctx.shared[0] == 1 && ctx.shared[1] == 1;
      if (whole_at_reg) continue;
      REQUIRE(k < kept.size());
      CHECK(kept[k].shared == ctx.shared);
      CHECK(kept[k].fused.backing_level == ctx.fused.backing_level);
      ++k;
    }
  }
  for (const PmappingContext& ctx : b)
    if (ctx.fused.backing_level == 1 && ctx.shared[0] == 2) {
      const TensorCompat* t1 = ctx.find(w.tensor_index("T1"));
      REQUIRE(t1 != nullptr);
      CHECK(t1->level == 1);
      CHECK(t1->factor[0] == 2);
      CHECK(t1->factor[1] == 1);
      CHECK(t1->tile == 2 * 2);
    }
}

TEST_CASE("ffm: two matmuls equal the brute force") {
  const Workload w = test::matmul_chain(4, {{2, 2}, {2, 2}});
  check_against_brute_force(w, ffm_test_core(12, 3), {}, true);
}

TEST_CASE("ffm: two matmuls with spatial fan-out equal the brute force") {
  const Workload w = test::matmul_chain(4, {{2, 2}, {2, 2}});
  PmappingOptions o;
  o.explore_orders = false;
  check_against_brute_force(w, ffm_test_core(16, 3, 2), o, false);
}

TEST_CASE("ffm: three matmuls equal the brute force") {
  const Workload w = test::matmul_chain(2, {{2, 2}, {4, 2}, {2, 4}});
  PmappingOptions o;
  o.explore_orders = false;
  check_against_brute_force(w, ffm_test_core(12, 3), o, true);
}

TEST_CASE("ffm: four matmuls equal the brute force") {
  const Workload w = test::matmul_chain(2, {{2, 2}, {2, 2}, {2, 2}, {2, 2}});
  PmappingOptions o;
  o.explore_orders = false;
  check_against_brute_force(w, ffm_test_core(6, 1), o, true);
}

// Storage above the split: weights kept resident above the shared loops trade a reservation
// that spans the whole group for one fill. Across buffer sizes the front equals the brute force
// (whose reservations put every resident tensor in every branch of its group), resident weights
// appear on it, and the mapspace without them is never better.
TEST_CASE("ffm: resident weights equal the brute force and are on its front") {
  const Workload w = test::matmul_chain(8, {{2, 2}, {2, 2}, {2, 2}});
  PmappingOptions o, none;
  o.explore_orders = none.explore_orders = false;
  none.resident = false;
  int with_resident = 0, better = 0;
  // An 8-word buffer needs the resident words as a join criterion (test sabotage: without it
  // the join keeps 10,100 pJ where 8,596 is optimal).
  for (const int64_t glb : {8, 10, 14, 20}) {
    INFO("global buffer of " << glb << " words");
    const Core c = ffm_test_core(glb, 2);
    const FfmResult r = check_against_brute_force(w, c, o, true);
    FfmOptions fo;
    fo.pmappings = none;
    const FfmResult n = ffm_search(w, c, fo);
    for (const FfmSolution& s : r.pareto)
      for (const FusionGroup& g : s.tree.groups) with_resident += !g.resident.empty();
    REQUIRE(n.best(Objective::Energy) != nullptr);
    CHECK(r.best(Objective::Energy)->energy_pj <= n.best(Objective::Energy)->energy_pj);
    CHECK(r.best(Objective::Edp)->edp() <= n.best(Objective::Edp)->edp());
    better += r.best(Objective::Energy)->energy_pj < n.best(Objective::Energy)->energy_pj;
  }
  MESSAGE(with_resident << " groups with resident weights on the fronts; " << better
                        << " of 4 buffer sizes have a lower energy with them");
  CHECK(with_resident > 0);
  CHECK(better > 0);
}

// The join's reservation criteria for resident tensors, on pmappings made up to need them: a
// group of three matmuls under a shared M loop, backed in a 16-word buffer. MM0 has a cheap
// pmapping that reserves 9 words and a dearer one that reserves 2; MM2 is cheap only with W2
// (4 words) resident, which every branch of the group then holds. The cheap MM0 leaves no room
// for W2 (9 + T1's 4 + 4 > 16), so the optimum takes the dearer one: the join must not prune it
// after MM0, when both have the same energy-latency key and no resident words yet; only the
// group's usage so far tells them apart.
TEST_CASE("ffm: the open group's usage is a join criterion when a later Einsum may keep weights resident") {
  const Workload w = test::matmul_chain(4, {{2, 2}, {2, 2}, {2, 2}});
  const Core c = ffm_test_core(16, 4);
  const int glb = 1;
  PmappingOptions every;
  every.prune = false;
  auto context = [&](int i, TensorMask onchip, TensorMask resident) {
    for (const PmappingContext& ctx : make_contexts(w, i, c, every))
      if (ctx.fused.backing_level == glb && ctx.fused.onchip == onchip && ctx.fused.resident == resident &&
          ctx.shared[0] == 2 && ctx.fused.iterations == 2 && ctx.inner[0] == 1)
        return ctx;
    FAIL("no such context");
    return PmappingContext{};
  };
  auto pmapping = [&](double energy, int64_t own) {
    Pmapping p;
    p.energy_pj = energy;
    p.cycles = 1;
    p.own[glb] = own;
    return p;
  };
  std::vector<EinsumPmappings> pm(3);
  for (int i = 0; i < 3; ++i) pm[i].einsum = i;
  pm[0].contexts = {context(0, 0b100, 0)};  // T1 on chip
  pm[0].pmappings = {{pmapping(10, 9), pmapping(20, 2)}};
  pm[1].contexts = {context(1, 0b101, 0)};  // T1 and T2 on chip
  pm[1].pmappings = {{pmapping(10, 1)}};
  pm[2].contexts = {context(2, 0b001, 0b010), context(2, 0b001, 0)};  // W2 resident, or not
  pm[2].pmappings = {{pmapping(1, 1)}, {pmapping(100, 1)}};
  const FfmResult r = ffm_join(w, c, pm);
  const FfmSolution* best = r.best(Objective::Energy);
  REQUIRE(best != nullptr);
  CHECK(best->energy_pj == 31);
  CHECK(best->choices[0].pmapping == 1);
  CHECK(best->choices[2].context == 0);
  // Peak: the group's largest branch (MM1: 1 + T1 4 + T2 4) plus W2's 4 words.
  CHECK(best->peak[glb] == 13);
  REQUIRE(best->tree.groups.size() == 1);
  CHECK(best->tree.groups[0].resident.size() == 1);
  // The front has nothing cheaper: the cheap MM0 with the dear MM2 costs 120.
  CHECK(r.pareto.size() == 1);
}

TEST_CASE("ffm: a residual connection (tensor live across a branch that does not touch it) equals the brute force") {
  const Workload w = residual(2, 2);
  PmappingOptions o;
  o.explore_orders = false;
  check_against_brute_force(w, ffm_test_core(9, 1), o, true);
}

TEST_CASE("ffm: when no exchanged tile fits on chip the result is the unfused optimum") {
  // One-word buffer and registers: T1's smallest tile on chip is 2 words (B can only share M), so
  // fusion is impossible and FFM must return exactly what the unfused mapspace gives.
  const Workload w = test::matmul_chain(2, {{2, 2}, {2, 2}});
  const Core c = ffm_test_core(1, 1);
  const FfmResult r = ffm_search(w, c);
  FfmOptions unfused;
  unfused.pmappings.allow_fusion = false;
  const FfmResult u = ffm_search(w, c, unfused);
  REQUIRE_FALSE(r.pareto.empty());
  CHECK(points(r) == points(u));
  for (const FfmSolution& s : r.pareto) CHECK(fused_groups(s.tree) == 0);
  // With a 2-word buffer fusion becomes possible and strictly better in energy.
  const FfmResult f = ffm_search(w, ffm_test_core(2, 1));
  CHECK(f.best(Objective::Energy)->energy_pj < r.best(Objective::Energy)->energy_pj);
  CHECK(fused_groups(f.best(Objective::Energy)->tree) == 1);
}

namespace {

using Criteria = test::PmappingCriteria;

// The fast generator against the reference, context by context: with pruning the same Pareto
// fronts value for value (and every kept pmapping re-evaluates to its criteria with the scalar
// fused model); without pruning the same set of distinct criteria (every tile mapping the
// reference evaluates has an equally costed one in the fast generator's reduced loop orders).
void check_fast_against_reference(const Workload& w, const Core& c, PmappingOptions o) {
  const std::vector<int> tracked = tracked_levels(c);
  int64_t fast_evaluated = 0, ref_evaluated = 0, fronts = 0;
  for (int i = 0; i < static_cast<int>(w.einsums.size()); ++i) {
    for (bool prune : {true, false}) {
      o.prune = prune;
      const std::vector<PmappingContext> ctx = make_contexts(w, i, c, o);
      const EinsumPmappings fast = generate_pmappings(w, i, c, o, ctx);
      const EinsumPmappings ref = generate_pmappings_reference(w, i, c, o, ctx);
      REQUIRE(fast.pmappings.size() == ref.pmappings.size());
      fast_evaluated += fast.evaluated;
      ref_evaluated += ref.evaluated;
      for (size_t k = 0; k < ctx.size(); ++k) {
        std::vector<Criteria> a = test::pmapping_criteria(fast.pmappings[k], c, ctx[k]),
                              b = test::pmapping_criteria(ref.pmappings[k], c, ctx[k]);
        if (prune) {
          CHECK(a == b);  // both sorted by criteria
          fronts += !a.empty();
          // Kept pmappings re-evaluated one by one with the scalar model.
          const Einsum tile = tile_einsum(w.einsums[i], ctx[k].shared);
          const FusedTilePlan plan = fused_tile_plan(tile, c, ctx[k].fused);
          for (const Pmapping& p : fast.pmappings[k]) {
            const FlatMapping fm = flatten_fused(p.mapping, ctx[k].fused, static_cast<int>(c.levels.size()));
            const NestStructure s = analyze(plan.first, fm);
            int64_t f[kMaxLoops];
            for (int q = 0; q < fm.n_loops; ++q) f[q] = fm.loops[q].factor;
            FusedEinsumCost fc;
            CostResult scratch;
            evaluate_fused_einsum(plan, s, f, ctx[k].fused, fc, scratch);
            CHECK(fc.tile.valid());
            CHECK(fc.energy_pj == p.energy_pj);
            CHECK(fc.cycles == p.cycles);
            CHECK(fc.own == p.own);
          }
        } else {
          const std::set<Criteria> sa(a.begin(), a.end()), sb(b.begin(), b.end());
          CHECK(sa == sb);
          CHECK(a.size() <= b.size());
        }
      }
    }
  }
  MESSAGE(w.einsums.size() << " Einsums: fast generator evaluated " << fast_evaluated << " tile mappings, the reference "
                           << ref_evaluated << "; " << fronts << " non-empty fronts compared");
  CHECK(fronts > 0);
}

}  // namespace

TEST_CASE("ffm: the fast pmapping generator gives the reference generator's pmappings") {
  check_fast_against_reference(test::matmul_chain(4, {{2, 2}, {2, 2}}), ffm_test_core(12, 3), {});
  check_fast_against_reference(test::matmul_chain(8, {{4, 4}, {4, 8}}), ffm_test_core(64, 4, 4), {});
  PmappingOptions rank_order;
  rank_order.explore_orders = false;
  check_fast_against_reference(test::matmul_chain(8, {{4, 4}, {4, 8}}), ffm_test_core(64, 4, 4), rank_order);
  check_fast_against_reference(residual(2, 2), ffm_test_core(9, 1), rank_order);
}

// Equivalent ranks are merged in generation (engine/search/rank_merge.hpp) and the reference
// generator keeps them apart: the same fronts, every kept (split) mapping re-evaluated on the
// original ranks. Sizes with several primes, so that contexts splitting b and m differently
// share one merged search and its mappings are split between ranks by more than powers of two.
TEST_CASE("ffm: generation with merged equivalent ranks gives the reference generator's pmappings") {
  check_fast_against_reference(test::projection_chain(2, 6, 3, 1, 2, 3), ffm_test_core(24, 3, 2), {});
  check_fast_against_reference(test::projection_chain(3, 2, 2, 2, 2, 6), ffm_test_core(40, 4), {});
  check_fast_against_reference(residual(6, 4), ffm_test_core(20, 2, 2), {});  // the add: M and N merge
}

// On a vector unit (accelforge_tpu_v4i's ScalarUnit): GPT-3's copy and softmax, whose every rank
// is equivalent (one merged rank), and its projection K. (The reference enumerated the copy on the
// MAC array's fan-out instead of the vector unit's lanes until 2026-11-24: 16 of 25 fronts
// differed, in latency.)
TEST_CASE("ffm: generation with merged equivalent ranks on a vector unit gives the reference generator's pmappings") {
  Workload w = load_workload("gpt3_6.7b", {.batch = 2, .tokens = 2});
  std::erase_if(w.einsums, [](const Einsum& e) { return e.name != "I" && e.name != "K" && e.name != "QK_softmax"; });
  for (Einsum& e : w.einsums)
    for (Rank& r : e.ranks)
      if (r.name == "H" || r.name == "E") r.size = 2;
      else if (r.name == "D") r.size = 4;
  finalize(w);
  check_fast_against_reference(w, test::preset_core("accelforge_tpu_v4i"), {});
}

TEST_CASE("ffm: a projection and its consumer (equivalent ranks merged in generation) equal the brute force") {
  check_against_brute_force(test::projection_chain(2, 3, 1, 2, 2, 2), ffm_test_core(10, 2), {}, true);
}

TEST_CASE("ffm: pmapping generation gives the same pmappings on 1 and 2 threads") {
  const Workload w = test::matmul_chain(8, {{8, 4}, {4, 8}});
  const Core c = ffm_test_core(96, 8, 4);
  const int saved = omp_get_max_threads();
  std::vector<EinsumPmappings> runs[2];
  for (int t : {1, 2}) {
    omp_set_num_threads(t);
    for (int i = 0; i < 2; ++i) runs[t - 1].push_back(generate_pmappings(w, i, c, {}));
  }
  omp_set_num_threads(saved);
  int64_t compared = 0;
  for (int i = 0; i < 2; ++i) {
    // (What is evaluated may differ: each thread skips partial choices against its own front.)
    const EinsumPmappings &a = runs[0][i], &b = runs[1][i];
    REQUIRE(a.pmappings.size() == b.pmappings.size());
    for (size_t k = 0; k < a.pmappings.size(); ++k) {
      REQUIRE(a.pmappings[k].size() == b.pmappings[k].size());
      for (size_t j = 0; j < a.pmappings[k].size(); ++j) {
        CHECK(a.pmappings[k][j].energy_pj == b.pmappings[k][j].energy_pj);
        CHECK(a.pmappings[k][j].cycles == b.pmappings[k][j].cycles);
        CHECK(a.pmappings[k][j].own == b.pmappings[k][j].own);
        CHECK(a.pmappings[k][j].mapping == b.pmappings[k][j].mapping);  // ties broken the same way
        ++compared;
      }
    }
  }
  MESSAGE(compared << " pmappings compared");
  CHECK(compared > 30);
  // And the final result of the whole search.
  omp_set_num_threads(1);
  const FfmResult r1 = ffm_search(w, c);
  omp_set_num_threads(2);
  const FfmResult r2 = ffm_search(w, c);
  omp_set_num_threads(saved);
  CHECK(points(r1) == points(r2));
  REQUIRE(r1.pareto.size() == r2.pareto.size());
  for (size_t j = 0; j < r1.pareto.size(); ++j) {
    const LoopTree &t1 = r1.pareto[j].tree, &t2 = r2.pareto[j].tree;
    REQUIRE(t1.groups.size() == t2.groups.size());
    for (size_t g = 0; g < t1.groups.size(); ++g) {
      CHECK(t1.groups[g].einsums == t2.groups[g].einsums);
      CHECK(t1.groups[g].mappings == t2.groups[g].mappings);
      CHECK(t1.groups[g].shared_loops.size() == t2.groups[g].shared_loops.size());
    }
  }
}

namespace {

// X: T1 = T0 W0, Y: T2 = T1 W1, and Z: T3 = T5 W2 on an input of its own, then Q: T4 = T2 + T3.
// Z may run first, between X and Y, or after Y; only with Z first can X, Y and Q form one fusion
// group (a group is a run of consecutive Einsums), only with Z last can Z and Q.
Workload branch(int64_t M, int64_t N) {
  Workload w;
  w.name = "branch";
  w.einsums.push_back(make_matmul("X", M, N, N, "T0", "W0", "T1"));
  w.einsums.push_back(make_matmul("Y", M, N, N, "T1", "W1", "T2"));
  w.einsums.push_back(make_matmul("Z", M, N, N, "T5", "W2", "T3"));
  w.einsums.push_back(add("Q", M, N, "T2", "T3", "T4"));
  finalize(w);
  return w;
}

Workload in_order(const Workload& w, const std::vector<int>& order) {
  Workload r;
  r.name = w.name;
  for (int i : order) r.einsums.push_back(w.einsums[static_cast<size_t>(i)]);
  finalize(r);
  return r;
}

}  // namespace

TEST_CASE("ffm: joining in every Einsum order equals the brute force over every order") {
  const Workload w = branch(2, 2);
  const std::vector<std::vector<int>> orders = einsum_orders(w, kMaxEinsumOrders);
  // The workload's order first, then the others (Z before Y, Z first).
  CHECK(orders == std::vector<std::vector<int>>{{0, 1, 2, 3}, {0, 2, 1, 3}, {2, 0, 1, 3}});
  CHECK_THROWS_WITH_AS(einsum_orders(w, 2), doctest::Contains("more than 2 orders"), InputError);
  PmappingOptions o;
  o.explore_orders = false;
  // Without resident weights: with them, the workload's order reaches the other orders' optima
  // on this workload, and the point here is what the orders add.
  o.resident = false;
  int better = 0;
  for (const int64_t glb : {6, 9, 12, 16}) {
    const Core c = ffm_test_core(glb, 1);
    FfmOptions fo;
    fo.pmappings = o;
    const FfmResult one = ffm_search(w, c, fo);
    fo.all_orders = true;
    const FfmResult all = ffm_search(w, c, fo);
    CHECK(all.orders == 3);
    // The brute force of every order, pooled: its front (energies summed in another order than
    // the join's, hence the tolerance).
    std::vector<Point> pool;
    for (const auto& order : orders) {
      const Brute b = brute_force(in_order(w, order), c, o);
      pool.insert(pool.end(), b.front.begin(), b.front.end());
    }
    std::stable_sort(pool.begin(), pool.end(), [](const Point& a, const Point& b) {
      return a.energy != b.energy ? a.energy < b.energy : a.cycles < b.cycles;
    });
    std::vector<Point> front;
    for (const Point& p : pool)
      if (front.empty() || p.cycles < front.back().cycles) front.push_back(p);
    INFO("global buffer of " << glb << " words");
    REQUIRE(all.pareto.size() == front.size());
    for (size_t k = 0; k < front.size(); ++k) {
      CHECK(all.pareto[k].energy_pj == doctest::Approx(front[k].energy).epsilon(1e-12));
      CHECK(all.pareto[k].cycles == front[k].cycles);
    }
    // Every solution is a valid LoopTree in its own execution order, evaluated end to end.
    for (const FfmSolution& s : all.pareto) {
      const auto err = check_looptree(s.tree, w, c);
      INFO(err.value_or(""));
      REQUIRE_FALSE(err.has_value());
      const FusedCost f = evaluate_fused(s.tree, w, c);
      CHECK(f.valid);
      CHECK(f.energy_pj == doctest::Approx(s.energy_pj).epsilon(1e-12));
      CHECK(f.cycles == s.cycles);
    }
    // Never worse than the workload's order alone, and better where another order fuses more
    // (with a 6-word buffer the least energy fuses X, Y and Q with Z first: 4,127 pJ against
    // 4,495 in the workload's order).
    for (Objective ob : {Objective::Energy, Objective::Cycles, Objective::Edp}) {
      auto value = [&](const FfmSolution* s) {
        return ob == Objective::Energy ? s->energy_pj : ob == Objective::Cycles ? s->cycles : s->edp();
      };
      CHECK(value(all.best(ob)) <= value(one.best(ob)));
      better += value(all.best(ob)) < value(one.best(ob));
    }

  }
  MESSAGE(better << " optima of 4 buffer sizes x 3 objectives are better in another Einsum order");
  CHECK(better > 0);
}

TEST_CASE("ffm: nested fusion equals a brute force judged by the fused cost model") {
  // Three matmuls (a nested loop over M can cover the last two only) and the attention in
  // miniature (m around all three, h around QK and AV), on buffers where nesting pays off.
  struct Case {
    std::string name;
    Workload w;
    Core c;
  };
  std::vector<Case> cases;
  for (int64_t glb : {6, 8, 10, 12, 14, 16, 20})
    cases.push_back({"three matmuls", test::matmul_chain(4, {{4, 1}, {1, 4}, {4, 1}}), ffm_test_core(glb, 3)});
  for (int64_t glb : {6, 8, 10, 12, 14, 16, 20})
    cases.push_back({"three matmuls b", test::matmul_chain(4, {{2, 1}, {1, 2}, {4, 1}}), ffm_test_core(glb, 2)});
  for (int64_t glb : {6, 8, 10, 12, 14, 16, 20, 24}) cases.push_back({"mini attention", mini_attention(2, false), ffm_test_core(glb, 2)});
  for (int64_t glb : {8, 12, 16, 20}) cases.push_back({"mini attention with Q", mini_attention(2, true), ffm_test_core(glb, 2)});
  int better = 0, accumulating = 0;
  for (const Case& k : cases) {
    CAPTURE(k.name);
    CAPTURE(k.c.levels[1].entries);
    PmappingOptions o;
    o.explore_orders = false;
    o.nested_loops = 1;
    FfmOptions fo;
    fo.pmappings = o;
    const FfmResult r = ffm_search(k.w, k.c, fo);
    int64_t trees = 0;
    const Brute b = nested_brute_force(k.w, k.c, o, &trees);
    MESSAGE(k.name << " (buffer " << k.c.levels[1].entries << "): " << trees << " trees, " << b.combinations << " combinations, front of " << b.front.size());
    REQUIRE_FALSE(b.front.empty());
    CHECK(points(r) == b.front);
    // Every FFM solution re-evaluated end to end, to the bit.
    bool nested = false;
    for (const FfmSolution& s : r.pareto) {
      const FusedCost f = evaluate_fused(s.tree, k.w, k.c);
      CHECK(f.valid);
      CHECK(f.energy_pj == s.energy_pj);
      CHECK(f.cycles == s.cycles);
      for (const FusedContext& x : f.contexts) accumulating += x.reduction > 1;
      for (const FusionGroup& g : s.tree.groups)
        for (const SharedLoop& sl : g.shared_loops) nested |= std::count(sl.rank.begin(), sl.rank.end(), -1) > 0;
    }
    // Without nested fusion the front is worse somewhere, and then some point of it needs a
    // nested loop.
    fo.pmappings.nested_loops = 0;
    if (points(ffm_search(k.w, k.c, fo)) != b.front) {
      ++better;
      CHECK(nested);
    }
  }
  // Among them, outputs accumulated across a nested loop over a reduction rank (AV's output
  // across a loop over p shared with QK).
  MESSAGE(accumulating << " Einsums of front solutions accumulate their output across a shared reduction loop");
  CHECK(accumulating > 0);
  CHECK(better >= 4);
}
