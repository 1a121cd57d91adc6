#include "engine/search/ffm/ffm.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <fmt/format.h>
#include <numeric>
#include <optional>
#include <set>
#include <unordered_map>

#include "engine/common/error.hpp"
#include "engine/search/ffm/pareto.hpp"

namespace mapfuse::ffm {
namespace {

// The key partial mappings are grouped by: the open tensors (produced, with a consumer not
// joined yet) and their compatibility, by tensor index, and where the open fusion group began.
struct Key {
  int start = -1;  // first Einsum of the fusion group still open; -1 = none
  std::vector<TensorCompat> open;
  // Nested fusion: the first Einsum of the nested run still open (-1 = none), and the words at
  // `held_level` of tensors it consumed from above the run whose consumers are done but which
  // the run's loops read again until the run ends.
  int sub = -1;
  int held_level = 0;
  int64_t held = 0;
  bool operator==(const Key&) const = default;
};

struct KeyHash {
  size_t operator()(const Key& k) const {
    uint64_t h = 1469598103934665603ull;
    auto mix = [&](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
    mix(static_cast<uint64_t>(k.start));
    mix(static_cast<uint64_t>(k.sub));
    mix(static_cast<uint64_t>(k.held));
    for (const TensorCompat& tc : k.open) h = hash_value(tc, h);
    return static_cast<size_t>(h);
  }
};

struct Partial {
  double energy_pj = 0, cycles = 0;
  // Consolidated reservations: the maximum usage of every finished branch, per level.
  std::array<int64_t, kMaxLevels> closed{};
  // Nested fusion: the maximum usage at the group's backing level over the open nested run's
  // branches. A tensor the run produces for a later Einsum is stored above the run's loops and
  // filled piece by piece, so it is held from the run's first branch on: when one is produced,
  // every earlier branch of the run holds it too (a reservation the key does not fix: a Pareto
  // criterion while the run is open).
  int64_t run_peak = 0;
  // Storage above the split: the open fusion group's resident words at its backing level (held
  // during every branch of the group, those to come included) and the maximum usage there over
  // the group's branches so far without them. Both are Pareto criteria while the group is open
  // (the key fixes neither); when it closes, their sum joins `closed`.
  int64_t resident = 0, group_peak = 0;
  int32_t parent_group = -1, parent_item = -1;
  int32_t context = -1, pmapping = -1;
};

struct Group {
  Key key;
  std::vector<Partial> items;
};

bool has_later_consumer(const TensorInfo& ti, int step) {
  for (int c : ti.consumers)
    if (c > step) return true;
  return false;
}

}  // namespace

const FfmSolution* FfmResult::best(Objective o) const {
  const FfmSolution* best = nullptr;
  double bv = 0;
  for (const FfmSolution& s : pareto) {
    const double v = objective_value(o, s.energy_pj, s.cycles);
    if (!best || v < bv) best = &s, bv = v;
  }
  return best;
}

LoopTree build_looptree(const Workload& w, const Core& c, const std::vector<EinsumPmappings>& pm,
                        const std::vector<Choice>& choices) {
  (void)c;
  const int E = static_cast<int>(w.einsums.size());
  LoopTree t;
  int open_group = -1;       // the group the next Einsum joins when it consumes an on-chip tensor
  std::vector<size_t> run;   // the open nested run's loops (indices into its group's shared_loops)
  std::vector<bool> of_group;  // per loop of the open group: covers the whole group
  // The rank of `e` that steps the same dimension of on-chip tensor `tc` as the producer's rank of
  // loop `sl` does, with the same factor among `e`'s group (nested == false) or nested loops.
  auto rank_of = [&](const FusionGroup& g, const SharedLoop& sl, int i, const PmappingContext& ctx,
                     const TensorCompat& tc, bool nested) {
    const TensorInfo& ti = w.tensors[tc.tensor];
    const auto pos = std::find(g.einsums.begin(), g.einsums.end(), ti.producer);
    if (pos == g.einsums.end()) throw std::logic_error("ffm: on-chip tensor consumed outside its group");
    const size_t pi = static_cast<size_t>(pos - g.einsums.begin());
    const Einsum& prod = w.einsums[ti.producer];
    const Einsum& e = w.einsums[i];
    const int d = plain_dim(prod, prod.tensor_index(ti.name), sl.rank[pi]);
    const int ct = e.tensor_index(ti.name);
    int mine = -1;
    for (int r = 0; r < static_cast<int>(e.ranks.size()); ++r) {
      const int64_t f = nested ? (ctx.inner[r] > 1 ? ctx.inner[r] : 1) : (ctx.inner[r] > 1 ? 1 : ctx.shared[r]);
      if (f > 1 && plain_dim(e, ct, r) == d) mine = f == sl.factor ? r : -2;
    }
    if (mine < 0) throw std::logic_error("ffm: shared loops do not match");
    return mine;
  };
  for (int i = 0; i < E; ++i) {
    const Einsum& e = w.einsums[i];
    const PmappingContext& ctx = pm[i].contexts[choices[i].context];
    const Pmapping& p = pm[i].pmappings[choices[i].context][choices[i].pmapping];
    // The on-chip tensors this Einsum consumes from an earlier member of its group, if any: one
    // to identify the group's loops, a nested one (stored below the open run's loops) to
    // identify the run's.
    const TensorCompat* joined_by = nullptr;
    const TensorCompat* in_run = nullptr;
    for (const TensorCompat& tc : ctx.compat)
      if (tc.fused() && w.tensors[tc.tensor].producer != i) {
        joined_by = &tc;
        if (tc.nested()) in_run = &tc;
      }
    auto new_loop = [&](FusionGroup& g, int r, int64_t factor) {
      SharedLoop sl;
      sl.rank.assign(g.einsums.size() - 1, -1);
      sl.rank.push_back(r);
      sl.factor = factor;
      sl.level = ctx.fused.backing_level;
      g.shared_loops.push_back(sl);
    };
    if (!joined_by) {
      FusionGroup g;
      g.einsums = {i};
      g.mappings = {p.mapping};
      of_group.clear();
      run.clear();
      if (ctx.fused.backing_level >= 0)
        for (int r = 0; r < static_cast<int>(e.ranks.size()); ++r)
          if (ctx.shared[r] > 1 && ctx.inner[r] <= 1) new_loop(g, r, ctx.shared[r]), of_group.push_back(true);
      if (ctx.fused.backing_level >= 0)
        for (int r = 0; r < static_cast<int>(e.ranks.size()); ++r)
          if (ctx.inner[r] > 1) run.push_back(g.shared_loops.size()), new_loop(g, r, ctx.inner[r]), of_group.push_back(false);
      t.groups.push_back(std::move(g));
      open_group = static_cast<int>(t.groups.size()) - 1;
    } else {
      FusionGroup& g = t.groups.at(open_group);
      std::vector<int> ranks(g.shared_loops.size(), -1);
      for (size_t k = 0; k < g.shared_loops.size(); ++k)
        if (of_group[k]) ranks[k] = rank_of(g, g.shared_loops[k], i, ctx, *joined_by, false);
      if (in_run)
        for (size_t k : run) ranks[k] = rank_of(g, g.shared_loops[k], i, ctx, *in_run, true);
      g.einsums.push_back(i);
      g.mappings.push_back(p.mapping);
      for (size_t k = 0; k < g.shared_loops.size(); ++k) g.shared_loops[k].rank.push_back(ranks[k]);
      if (!in_run) {
        run.clear();
        for (int r = 0; r < static_cast<int>(e.ranks.size()); ++r)
          if (ctx.inner[r] > 1) run.push_back(g.shared_loops.size()), new_loop(g, r, ctx.inner[r]), of_group.push_back(false);
      }
    }
    for (const TensorCompat& tc : ctx.compat)
      if (tc.fused() && w.tensors[tc.tensor].producer == i)
        t.groups[open_group].backing.push_back({w.tensors[tc.tensor].name, tc.level});
    for (int ti = 0; ti < static_cast<int>(e.tensors.size()); ++ti)
      if (ctx.fused.resident >> ti & 1) t.groups[open_group].resident.push_back({e.tensors[ti].name, ctx.fused.backing_level});
  }
  return t;
}

int64_t pmapping_bytes(const std::vector<EinsumPmappings>& pm) {
  int64_t bytes = 0;
  for (const EinsumPmappings& e : pm) {
    bytes += static_cast<int64_t>(e.contexts.size() * sizeof(PmappingContext));
    for (const auto& list : e.pmappings)
      for (const Pmapping& p : list)
        bytes += static_cast<int64_t>(sizeof(Pmapping) + p.mapping.levels.size() * sizeof(p.mapping.levels[0]));
  }
  return bytes;
}

namespace {

[[noreturn]] void memory_exceeded(int64_t limit, int64_t bytes, const std::string& where) {
  throw InputError({}, "max_memory_mib",
                   fmt::format("FFM would exceed the memory limit of {:.6g} MiB ({:.6g} MiB of pmappings and partial "
                               "mappings {}); raise the limit, restrict the mapspace, or fix fusion decisions",
                               static_cast<double>(limit) / (1 << 20), static_cast<double>(bytes) / (1 << 20), where));
}

}  // namespace

namespace {

// Rounds a criterion onto a log grid of ratio (1 + eps) (FFM's epsilon pruning, section 6.3): the
// dirty pass prunes on these, so near-equal partial mappings collapse into one.
double rounded(double v, double eps) {
  if (eps <= 0 || !(v > 0)) return v;
  return std::floor(std::log(v) / std::log1p(eps));
}

// The join. eps > 0: the dirty pass (Pareto pruning on rounded criteria; its front is made of real
// mappings, costed exactly). bound: full solutions of a dirty pass; a partial mapping strictly
// worse than one of them in energy and in latency is dropped, which is exact because a partial's
// criteria only grow as Einsums are joined (every pmapping's energy and latency are >= 0).
FfmResult join_impl(const Workload& w, const Core& c, std::vector<EinsumPmappings> pm, int64_t max_memory_bytes,
                    double eps, std::vector<std::pair<double, double>> bound) {
  // bound sorted by energy, with the running minimum of latency: strictly dominated iff some
  // point with smaller energy has smaller latency.
  std::sort(bound.begin(), bound.end());
  std::vector<double> min_cycles(bound.size());
  for (size_t k = 0; k < bound.size(); ++k) min_cycles[k] = std::min(k ? min_cycles[k - 1] : bound[k].second, bound[k].second);
  auto beaten = [&](double e, double cy) {
    const auto it = std::lower_bound(bound.begin(), bound.end(), std::make_pair(e, -1.0));  // first energy >= e
    const size_t k = static_cast<size_t>(it - bound.begin());
    return k > 0 && min_cycles[k - 1] < cy;
  };
  const int E = static_cast<int>(w.einsums.size());
  if (static_cast<int>(pm.size()) != E) throw InputError({}, "ffm", "one set of pmappings per Einsum expected");
  const int64_t limit = std::max<int64_t>(0, max_memory_bytes);
  int64_t held = pmapping_bytes(pm);  // pmappings plus the partial mappings of every step
  if (limit && held > limit) memory_exceeded(limit, held, "after pmapping generation");
  const std::vector<int> tracked = tracked_levels(c);
  FfmResult out;
  out.peak_records_bytes = held;
  // Resident words per context, and whether an Einsum from i on can still add some (then the
  // open group's usage so far is a criterion too).
  std::vector<std::vector<int64_t>> resident_words(E);
  std::vector<bool> resident_later(E + 1, false);
  for (int i = E - 1; i >= 0; --i) {
    resident_later[i] = resident_later[i + 1];
    for (const PmappingContext& ctx : pm[i].contexts) {
      int64_t words = 0;
      for (int ti = 0; ti < static_cast<int>(w.einsums[i].tensors.size()); ++ti)
        if (ctx.fused.resident >> ti & 1) words += w.einsums[i].tensor_volume(ti);
      resident_words[i].push_back(words);
      resident_later[i] = resident_later[i] || words > 0;
    }
  }
  const bool any_resident = resident_later[0];
  // Lookahead tables: for every Einsum, the compatibilities it can offer for each tensor.
  std::vector<std::unordered_map<int, std::vector<TensorCompat>>> offers(E);
  for (int i = 0; i < E; ++i)
    for (size_t k = 0; k < pm[i].contexts.size(); ++k) {
      if (pm[i].pmappings[k].empty()) continue;
      for (const TensorCompat& tc : pm[i].contexts[k].compat) {
        auto& v = offers[i][tc.tensor];
        if (std::find(v.begin(), v.end(), tc) == v.end()) v.push_back(tc);
      }
    }
  auto can_continue = [&](const Key& key, int step) {
    bool fused_open = false, next_consumes_fused = false, nested_open = false, next_consumes_nested = false;
    for (const TensorCompat& tc : key.open) {
      for (int consumer : w.tensors[tc.tensor].consumers) {
        if (consumer <= step) continue;
        const auto it = offers[consumer].find(tc.tensor);
        if (it == offers[consumer].end() || std::find(it->second.begin(), it->second.end(), tc) == it->second.end())
          return false;
        if (tc.fused() && consumer == step + 1) next_consumes_fused = true;
        if (tc.nested() && consumer == step + 1) next_consumes_nested = true;
      }
      fused_open |= tc.fused();
      nested_open |= tc.nested();
    }
    // A fusion group, and a nested run inside it, is a run of consecutive Einsums: the next one
    // must join it.
    return (!fused_open || next_consumes_fused) && (!nested_open || next_consumes_nested);
  };

  std::vector<std::vector<Group>> history;
  history.push_back({Group{{}, {Partial{}}}});
  for (int i = 0; i < E; ++i) {
    const std::vector<Group>& in = history.back();
    const EinsumPmappings& P = pm[i];
    JoinStep st;
    st.einsum = i;
    for (const Group& g : in) st.partials_in += static_cast<int64_t>(g.items.size());
    for (const auto& list : P.pmappings) st.pmappings += static_cast<int64_t>(list.size());
    std::vector<Group> next;
    std::unordered_map<Key, size_t, KeyHash> index;
    for (size_t gi = 0; gi < in.size(); ++gi) {
      const Group& g = in[gi];
      bool fused_open = false, nested_open = false;
      for (const TensorCompat& tc : g.key.open) fused_open |= tc.fused(), nested_open |= tc.nested();
      for (size_t k = 0; k < P.contexts.size(); ++k) {
        const PmappingContext& ctx = P.contexts[k];
        const std::vector<Pmapping>& list = P.pmappings[k];
        if (list.empty()) continue;
        // Compatibility of every tensor this Einsum consumes from the joined ones.
        bool ok = true, joins_group = false, joins_run = false;
        for (const TensorCompat& tc : ctx.compat) {
          if (w.tensors[tc.tensor].producer == i) continue;
          const auto it = std::find_if(g.key.open.begin(), g.key.open.end(),
                                       [&](const TensorCompat& x) { return x.tensor == tc.tensor; });
          if (it == g.key.open.end() || !(*it == tc)) {
            ok = false;
            break;
          }
          joins_group |= tc.fused();
          joins_run |= tc.nested();
        }
        if (!ok || (fused_open && !joins_group) || (nested_open && !joins_run)) continue;
        // A tensor produced inside the nested run and stored above its loops leaves the run: no
        // Einsum of the run consumes it (it would read pieces not produced yet).
        if (joins_run)
          for (const TensorCompat& tc : ctx.compat) {
            const int producer = w.tensors[tc.tensor].producer;
            if (producer != i && producer >= g.key.sub && tc.fused() && !tc.nested()) ok = false;
          }
        bool has_inner = false;
        for (int64_t f : ctx.inner) has_inner |= f > 1;
        // Inside a fusion group every exchanged tensor is on chip (one backing level per group).
        if (joins_group)
          for (const TensorCompat& tc : ctx.compat) {
            const int producer = w.tensors[tc.tensor].producer;
            if (producer != i && producer >= g.key.start && !tc.fused()) ok = false;
          }
        if (!ok) continue;
        // Key after the join, and the exchanged tiles live during this Einsum's branch.
        Key key;
        std::array<int64_t, kMaxLevels> live{};
        bool fused_after = false;
        const int b = ctx.fused.backing_level;
        if (joins_run) {  // the run goes on: what it holds stays
          key.sub = g.key.sub;
          key.held = g.key.held;
          key.held_level = g.key.held_level;
          live[g.key.held_level] += g.key.held;
        } else if (has_inner) {
          key.sub = i;
          key.held_level = b;
        }
        int64_t late = 0;  // words this run's earlier branches hold from now on
        for (const TensorCompat& tc : g.key.open) {
          if (tc.fused()) live[tc.level] += tc.tile;
          if (has_later_consumer(w.tensors[tc.tensor], i)) {
            key.open.push_back(tc), fused_after |= tc.fused();
          } else if (key.sub >= 0 && tc.fused() && !tc.nested() && ctx.find(tc.tensor)) {
            key.held += tc.tile;  // read again by every iteration of the run's loops
          }
        }
        for (const TensorCompat& tc : ctx.compat)
          if (w.tensors[tc.tensor].producer == i) {
            if (tc.fused()) live[tc.level] += tc.tile;
            if (joins_run && tc.fused() && !tc.nested()) late += tc.tile;
            key.open.push_back(tc);
            fused_after |= tc.fused();
          }
        std::sort(key.open.begin(), key.open.end(),
                  [](const TensorCompat& a, const TensorCompat& b) { return a.tensor < b.tensor; });
        key.start = !fused_after ? -1 : joins_group ? g.key.start : i;
        if (key.start < 0) key.sub = -1, key.held = 0, key.held_level = 0;
        const int64_t ctx_resident = resident_words[i][k];
        auto [pos, inserted] = index.try_emplace(key, next.size());
        if (inserted) next.push_back(Group{key, {}});
        std::vector<Partial>& dst = next[pos->second].items;
        for (size_t pi = 0; pi < g.items.size(); ++pi) {
          const Partial& p = g.items[pi];
          for (size_t qi = 0; qi < list.size(); ++qi) {
            const Pmapping& q = list[qi];
            ++st.combinations;
            Partial n;
            n.closed = p.closed;
            bool fits = true;
            for (int l : tracked) {
              // Sum within the branch, max across branches that can no longer grow.
              n.closed[l] = std::max(p.closed[l], q.own[l] + live[l]);
              if (n.closed[l] * c.levels[l].multiple_buffering > c.levels[l].entries) fits = false;
            }
            if (key.sub >= 0) {
              // The run's branches so far, now holding what this branch produces for later.
              const int64_t branch = q.own[b] + live[b];
              n.run_peak = joins_run ? std::max(p.run_peak + late, branch) : branch;
              n.closed[b] = std::max(n.closed[b], n.run_peak);
              if (c.levels[b].entries > 0 && n.run_peak * c.levels[b].multiple_buffering > c.levels[b].entries)
                fits = false;
            }
            if (b >= 0 && any_resident) {
              // Every branch of the group holds its resident tensors, those joined later too.
              n.resident = (joins_group ? p.resident : 0) + ctx_resident;
              n.group_peak = std::max({joins_group ? p.group_peak : 0, q.own[b] + live[b], n.run_peak});
              if (c.levels[b].entries > 0 &&
                  (n.group_peak + n.resident) * c.levels[b].multiple_buffering > c.levels[b].entries)
                fits = false;
              if (key.start < 0) {  // the group is complete
                n.closed[b] = std::max(n.closed[b], n.group_peak + n.resident);
                n.resident = n.group_peak = 0;
              }
            }
            if (!fits) continue;
            n.energy_pj = p.energy_pj + q.energy_pj;
            n.cycles = p.cycles + q.cycles;
            n.parent_group = static_cast<int32_t>(gi);
            n.parent_item = static_cast<int32_t>(pi);
            n.context = static_cast<int32_t>(k);
            n.pmapping = static_cast<int32_t>(qi);
            dst.push_back(n);
            ++st.joined;
            if (limit && (st.joined & 0xFFFF) == 0 &&
                held + st.joined * static_cast<int64_t>(sizeof(Partial)) > limit)
              memory_exceeded(limit, held + st.joined * static_cast<int64_t>(sizeof(Partial)),
                              "while joining Einsum '" + w.einsums[i].name + "'");
          }
        }
      }
    }
    // Prune inside each group; drop groups no later Einsum can match. The criteria are the
    // objectives alone: what a later branch may use is its own reservation plus the exchanged
    // tiles live during it, all of them open tensors fixed by the group's key, and every
    // finished branch has been checked against the capacity when it was joined. So the
    // consolidated reservations of the finished branches (`closed`) can change no later
    // decision; they are kept as the mapping's peak usage. Resident tensors outlive a branch
    // and are not fixed by the key: while their group is open, its resident words and (when a
    // later Einsum may add more) its usage so far are criteria too.
    std::vector<Group> kept;
    for (Group& g : next) {
      if (!bound.empty()) {
        const size_t before = g.items.size();
        std::erase_if(g.items, [&](const Partial& p) { return beaten(p.energy_pj, p.cycles); });
        st.bound_pruned += static_cast<int64_t>(before - g.items.size());
      }
      if (g.items.empty() || !can_continue(g.key, i)) continue;
      // While a nested run is open, its peak is a criterion too (exact: not rounded); so are the
      // open group's resident words and usage so far.
      std::vector<int> extra;  // 0: run_peak, 1: resident, 2: group_peak
      if (g.key.sub >= 0) extra.push_back(0);
      if (any_resident && g.key.start >= 0) {
        extra.push_back(1);
        if (resident_later[i + 1]) extra.push_back(2);
      }
      const std::vector<size_t> front = pareto_front(g.items.size(), 2 + extra.size(), [&](size_t a, size_t k) {
        const Partial& p = g.items[a];
        if (k < 2) return rounded(k == 0 ? p.energy_pj : p.cycles, eps);
        const int x = extra[k - 2];
        return static_cast<double>(x == 0 ? p.run_peak : x == 1 ? p.resident : p.group_peak);
      });
      Group h{std::move(g.key), {}};
      h.items.reserve(front.size());
      for (size_t a : front) h.items.push_back(g.items[a]);
      st.kept += static_cast<int64_t>(h.items.size());
      kept.push_back(std::move(h));
    }
    st.groups = static_cast<int64_t>(kept.size());
    held += st.kept * static_cast<int64_t>(sizeof(Partial));
    out.peak_records_bytes = std::max(out.peak_records_bytes, held + st.joined * static_cast<int64_t>(sizeof(Partial)));
    out.steps.push_back(st);
    history.push_back(std::move(kept));
  }
  // Complete mappings: every open tensor is closed, so there is at most one group (empty key).
  const std::vector<Group>& done = history.back();
  if (!done.empty()) {
    if (done.size() != 1 || !done[0].key.open.empty()) throw std::logic_error("ffm: open tensors after the last Einsum");
    const std::vector<Partial>& items = done[0].items;
    const std::vector<size_t> front = pareto_front(items.size(), 2, [&](size_t a, size_t k) {
      return k == 0 ? items[a].energy_pj : items[a].cycles;
    });
    for (size_t a : front) {
      FfmSolution s;
      s.energy_pj = items[a].energy_pj;
      s.cycles = items[a].cycles;
      s.peak = items[a].closed;
      s.choices.resize(E);
      int32_t gi = 0, pi = static_cast<int32_t>(a);
      for (int i = E - 1; i >= 0; --i) {
        const Partial& p = history[i + 1][gi].items[pi];
        s.choices[i] = {p.context, p.pmapping};
        gi = p.parent_group;
        pi = p.parent_item;
      }
      s.tree = build_looptree(w, c, pm, s.choices);
      out.pareto.push_back(std::move(s));
    }
  }
  out.pmappings = std::move(pm);
  return out;
}

}  // namespace

namespace {

FfmResult join_in_order(const Workload& w, const Core& c, std::vector<EinsumPmappings> pm, int64_t max_memory_bytes,
                        double epsilon) {
  if (!(epsilon > 0)) return join_impl(w, c, std::move(pm), max_memory_bytes, 0, {});
  // Two passes (section 6.3): a dirty join on rounded criteria gives real full mappings; the
  // clean, exact join then drops every partial mapping one of them strictly beats.
  const FfmResult dirty = join_impl(w, c, pm, max_memory_bytes, epsilon, {});
  std::vector<std::pair<double, double>> bound;
  for (const FfmSolution& sol : dirty.pareto) bound.emplace_back(sol.energy_pj, sol.cycles);
  FfmResult r = join_impl(w, c, std::move(pm), max_memory_bytes, 0, std::move(bound));
  for (const JoinStep& st : dirty.steps) r.dirty_kept += st.kept;
  return r;
}

// The workload with its Einsums in `order` and the pmappings to match (tensor indices follow the
// reordered workload's tensor table).
struct Reordered {
  Workload w;
  std::vector<EinsumPmappings> pm;
};

Reordered reorder(const Workload& w, const std::vector<EinsumPmappings>& pm, const std::vector<int>& order) {
  Reordered r;
  r.w.name = w.name;
  for (int i : order) r.w.einsums.push_back(w.einsums[static_cast<size_t>(i)]);
  if (!w.counts.empty())
    for (int i : order) r.w.counts.push_back(w.counts[static_cast<size_t>(i)]);
  finalize(r.w);  // keeps an order that is already topological
  for (size_t k = 0; k < order.size(); ++k)
    if (r.w.einsums[k].name != w.einsums[static_cast<size_t>(order[k])].name)
      throw std::logic_error("ffm: reordering changed the order");
  std::vector<int> tensor(w.tensors.size());
  for (size_t t = 0; t < w.tensors.size(); ++t) tensor[t] = r.w.tensor_index(w.tensors[t].name);
  for (size_t k = 0; k < order.size(); ++k) {
    EinsumPmappings p = pm[static_cast<size_t>(order[k])];
    p.einsum = static_cast<int>(k);
    p.reused_from = -1;
    for (PmappingContext& ctx : p.contexts) {
      for (TensorCompat& tc : ctx.compat) tc.tensor = tensor[static_cast<size_t>(tc.tensor)];
      std::sort(ctx.compat.begin(), ctx.compat.end(),
                [](const TensorCompat& a, const TensorCompat& b) { return a.tensor < b.tensor; });
    }
    r.pm.push_back(std::move(p));
  }
  return r;
}

}  // namespace

std::vector<std::vector<int>> einsum_orders(const Workload& w, size_t max_orders) {
  const int E = static_cast<int>(w.einsums.size());
  // after[i][j]: j reads a tensor i produces; waiting[j]: such i not placed yet.
  std::vector<std::vector<uint8_t>> after(static_cast<size_t>(E), std::vector<uint8_t>(static_cast<size_t>(E), 0));
  std::vector<int> waiting(static_cast<size_t>(E), 0);
  for (const TensorInfo& t : w.tensors)
    if (t.producer >= 0)
      for (int j : t.consumers)
        if (j != t.producer && !after[t.producer][j]) after[t.producer][j] = 1, ++waiting[j];
  std::vector<std::vector<int>> out;
  std::vector<int> cur;
  std::vector<uint8_t> placed(static_cast<size_t>(E), 0);
  auto rec = [&](auto&& self) -> void {
    if (static_cast<int>(cur.size()) == E) {
      if (out.size() == max_orders)
        throw InputError({}, "ffm",
                         fmt::format("workload '{}' has more than {} orders of its Einsums that respect their data "
                                     "dependences; join in the workload's order only",
                                     w.name, max_orders));
      out.push_back(cur);
      return;
    }
    for (int i = 0; i < E; ++i) {
      if (placed[i] || waiting[i] > 0) continue;
      placed[i] = 1;
      cur.push_back(i);
      for (int j = 0; j < E; ++j) waiting[j] -= after[i][j];
      self(self);
      for (int j = 0; j < E; ++j) waiting[j] += after[i][j];
      cur.pop_back();
      placed[i] = 0;
    }
  };
  rec(rec);
  // The workload's own order (topological by finalize) first.
  std::vector<int> identity(static_cast<size_t>(E));
  std::iota(identity.begin(), identity.end(), 0);
  const auto it = std::find(out.begin(), out.end(), identity);
  if (it != out.end()) std::rotate(out.begin(), it, it + 1);
  return out;
}

FfmResult ffm_join(const Workload& w, const Core& c, std::vector<EinsumPmappings> pm, int64_t max_memory_bytes,
                   double epsilon, bool all_orders) {
  if (!all_orders) return join_in_order(w, c, std::move(pm), max_memory_bytes, epsilon);
  const std::vector<std::vector<int>> orders = einsum_orders(w, kMaxEinsumOrders);
  const int E = static_cast<int>(w.einsums.size());
  const std::vector<EinsumPmappings> mine = pm;  // the first join consumes its copy
  FfmResult out = join_in_order(w, c, std::move(pm), max_memory_bytes, epsilon);
  out.orders = static_cast<int64_t>(orders.size());
  std::vector<FfmSolution> all = std::move(out.pareto);
  for (size_t k = 1; k < orders.size(); ++k) {
    const std::vector<int>& order = orders[k];
    Reordered ro = reorder(w, mine, order);
    FfmResult r = join_in_order(ro.w, c, std::move(ro.pm), max_memory_bytes, epsilon);
    out.peak_records_bytes = std::max(out.peak_records_bytes, r.peak_records_bytes);
    out.dirty_kept += r.dirty_kept;
    for (FfmSolution& s : r.pareto) {
      FfmSolution t;
      t.peak = s.peak;
      t.order = order;
      t.choices.resize(static_cast<size_t>(E));
      for (int j = 0; j < E; ++j) t.choices[static_cast<size_t>(order[j])] = s.choices[static_cast<size_t>(j)];
      t.tree = std::move(s.tree);
      for (FusionGroup& g : t.tree.groups)
        for (int& e : g.einsums) e = order[static_cast<size_t>(e)];
      all.push_back(std::move(t));
    }
  }
  // Criteria summed in workload order (as the workload-order join sums them), then the front:
  // by energy, then latency, then order of discovery; a point stays if it is faster than every
  // point before it.
  for (FfmSolution& s : all) {
    s.energy_pj = 0;
    s.cycles = 0;
    for (int i = 0; i < E; ++i) {
      const Choice& ch = s.choices[static_cast<size_t>(i)];
      const Pmapping& p =
          out.pmappings[static_cast<size_t>(i)].pmappings[static_cast<size_t>(ch.context)][static_cast<size_t>(ch.pmapping)];
      s.energy_pj += p.energy_pj;
      s.cycles += p.cycles;
    }
  }
  std::stable_sort(all.begin(), all.end(), [](const FfmSolution& a, const FfmSolution& b) {
    return a.energy_pj != b.energy_pj ? a.energy_pj < b.energy_pj : a.cycles < b.cycles;
  });
  out.pareto.clear();
  for (FfmSolution& s : all)
    if (out.pareto.empty() || s.cycles < out.pareto.back().cycles) out.pareto.push_back(std::move(s));
  return out;
}

void apply_fusion_constraints(const Workload& w, const FfmOptions& o,
                              std::vector<std::vector<PmappingContext>>& contexts) {
  if (o.must_fuse.empty() && o.must_not_fuse.empty()) return;
  std::vector<int8_t> want(w.tensors.size(), -1);  // -1 free, 0 through DRAM, 1 on chip
  auto mark = [&](const std::vector<int>& list, int8_t v, const char* key) {
    for (int t : list) {
      if (t < 0 || t >= static_cast<int>(w.tensors.size()))
        throw InputError({}, key, "tensor index " + std::to_string(t) + " is not a tensor of workload '" + w.name + "'");
      const std::string& name = w.tensors[t].name;
      if (want[t] >= 0 && want[t] != v)
        throw InputError({}, key, "tensor '" + name + "' is both in must_fuse and in must_not_fuse");
      const bool produced = w.tensors[t].producer >= 0;
      const bool consumed = !w.tensors[t].consumers.empty();
      if (!produced || !consumed)
        throw InputError({}, key, "tensor '" + name + "' is not exchanged between two Einsums of workload '" + w.name +
                                      "' (" + (produced ? "nothing consumes it" : "no Einsum produces it") +
                                      "), so it cannot be fused");
      want[t] = v;
    }
  };
  mark(o.must_fuse, 1, "must_fuse");
  mark(o.must_not_fuse, 0, "must_not_fuse");
  for (auto& list : contexts)
    std::erase_if(list, [&](const PmappingContext& ctx) {
      for (const TensorCompat& tc : ctx.compat)
        if (want[tc.tensor] >= 0 && (want[tc.tensor] == 1) != tc.fused()) return true;
      return false;
    });
}

namespace {

// Everything generate_pmappings reads of the Einsum: the Einsum without its tensor names (rank
// names stay: a fan-out may name the ranks it accepts) and the constraints for this layer alone
// (the others apply to all).
std::string einsum_key(const Einsum& e, const std::vector<ConstraintSpec>& constraints) {
  std::string k = fmt::format("{}|", static_cast<int>(e.op));
  for (const Rank& r : e.ranks) k += fmt::format("{}={},", r.name, r.size);
  for (const TensorAccess& t : e.tensors) {
    k += fmt::format("|{}:{}:", static_cast<int>(t.role), t.bits_per_value);
    for (const Projection& d : t.dims) {
      for (const auto& term : d) k += fmt::format("{}*{}+", term.coeff, term.rank);
      k += ',';
    }
  }
  for (size_t i = 0; i < constraints.size(); ++i)
    if (constraints[i].layer == e.name) k += fmt::format("@{}", i);
  return k;
}

// ... and of a context: what tile_classes compares (the tiling, not the nesting or the
// compatibilities).
std::string context_key(const Einsum& e, const PmappingContext& ctx) {
  std::string k = fmt::format("#{}:{}:{}:{}:{}:{}:", ctx.fused.backing_level, static_cast<int>(ctx.fused.onchip),
                              static_cast<int>(ctx.fused.resident), ctx.fused.iterations, ctx.fused.reduction,
                              ctx.top_level);
  for (size_t r = 0; r < e.ranks.size(); ++r) k += fmt::format("{},", ctx.shared[r]);
  return k;
}

}  // namespace

std::string generation_key(const Einsum& e, const std::vector<PmappingContext>& contexts,
                           const std::vector<ConstraintSpec>& constraints) {
  std::string k = einsum_key(e, constraints);
  for (const PmappingContext& ctx : contexts) k += context_key(e, ctx);
  return k;
}

void check_constraints(const Workload& w, const Core& c, const std::vector<ConstraintSpec>& constraints) {
  for (const ConstraintSpec& s : constraints)
    if (!s.layer.empty() && w.einsum_index(s.layer) < 0)
      throw InputError(s.where, "layer", "no Einsum '" + s.layer + "' in workload '" + w.name + "'");
  if (!constraints.empty())
    for (const Einsum& e : w.einsums) (void)make_mapspace(constraints, e, c);
}

FfmResult ffm_search(const Workload& w, const Core& c, const FfmOptions& o) {
  const int E = static_cast<int>(w.einsums.size());
  check_constraints(w, c, o.pmappings.constraints);
  std::vector<std::vector<PmappingContext>> contexts(E);
  int64_t all = 0;
  for (int i = 0; i < E; ++i) all += static_cast<int64_t>((contexts[i] = make_contexts(w, i, c, o.pmappings)).size());
  apply_fusion_constraints(w, o, contexts);
  drop_unmatched_contexts(w, contexts);
  const auto t0 = std::chrono::steady_clock::now();
  const std::clock_t c0 = std::clock();
  std::vector<EinsumPmappings> pm;
  int64_t kept = 0;
  // Context by context, an Einsum equal to an earlier one up to tensor names (einsum_key) reuses
  // the pmappings of every context that one generated with the same tiling (GPT-3's K those of V
  // that K shares too, Q all of K's and V's): generation reads nothing else.
  struct Source {
    int einsum;
    size_t context;
  };
  std::unordered_map<std::string, Source> generated;  // einsum_key + context_key -> where it was generated
  for (int i = 0; i < E; ++i) {
    kept += static_cast<int64_t>(contexts[i].size());
    const std::string ekey = einsum_key(w.einsums[i], o.pmappings.constraints);
    const size_t n = contexts[i].size();
    std::vector<std::string> keys(n);
    std::vector<std::optional<Source>> from(n);  // copied from an earlier Einsum
    std::vector<size_t> fresh_at(n);             // else: its list among the generated ones
    std::vector<PmappingContext> fresh;
    std::unordered_map<std::string, size_t> fresh_index;  // the same tiling twice here: generated once
    for (size_t k = 0; k < n; ++k) {
      keys[k] = ekey + context_key(w.einsums[i], contexts[i][k]);
      if (auto it = generated.find(keys[k]); it != generated.end()) {
        from[k] = it->second;
        continue;
      }
      const auto [it, added] = fresh_index.emplace(keys[k], fresh.size());
      if (added) fresh.push_back(contexts[i][k]);
      fresh_at[k] = it->second;
    }
    EinsumPmappings out;
    if (fresh.empty()) {
      out.einsum = i;
    } else {
      const std::clock_t e0 = std::clock();
      out = generate_pmappings(w, i, c, o.pmappings, std::move(fresh));
      out.cpu_seconds = static_cast<double>(std::clock() - e0) / CLOCKS_PER_SEC;
    }
    // In context order: the fresh ones as generated, the others copied from their source.
    std::vector<std::vector<Pmapping>> fresh_lists = std::move(out.pmappings);
    out.pmappings.assign(n, {});
    out.kept = 0;
    std::set<int> sources;
    for (size_t k = 0; k < n; ++k) {
      if (from[k]) {
        out.pmappings[k] = pm[static_cast<size_t>(from[k]->einsum)].pmappings[from[k]->context];
        sources.insert(from[k]->einsum);
        ++out.contexts_reused;
      } else {
        out.pmappings[k] = fresh_lists[fresh_at[k]];
        generated.emplace(std::move(keys[k]), Source{i, k});
      }
      out.kept += static_cast<int64_t>(out.pmappings[k].size());
    }
    if (out.contexts_reused == static_cast<int64_t>(n) && sources.size() == 1)
      out.reused_from = *sources.begin();
    out.contexts = std::move(contexts[i]);
    pm.push_back(std::move(out));
  }
  const auto t1 = std::chrono::steady_clock::now();
  const std::clock_t c1 = std::clock();
  FfmResult r = ffm_join(w, c, std::move(pm), o.max_memory_mib << 20, o.epsilon, o.all_orders);
  r.contexts = all;
  r.contexts_matched = kept;
  r.generation_seconds = std::chrono::duration<double>(t1 - t0).count();
  r.join_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  r.generation_cpu_seconds = static_cast<double>(c1 - c0) / CLOCKS_PER_SEC;
  r.join_cpu_seconds = static_cast<double>(std::clock() - c1) / CLOCKS_PER_SEC;
  return r;
}

std::string empty_join_reason(const Workload& w, const FfmResult& r) {
  if (!r.pareto.empty()) return "";
  for (const JoinStep& s : r.steps)
    if (s.kept == 0)
      return fmt::format("the join ends empty at Einsum '{}': {} partial mappings x {} pmappings, {} compatible pairs, "
                         "{} within capacity{}",
                         w.einsums[s.einsum].name, s.partials_in, s.pmappings, s.combinations, s.joined,
                         s.joined > 0 ? ", none of which any later Einsum can match" : "");
  return "";
}

}  // namespace mapfuse::ffm
