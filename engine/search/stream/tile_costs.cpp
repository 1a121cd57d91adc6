#include "engine/search/stream/tile_costs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstring>
#include <exception>
#include <limits>
#include <numeric>
#include <optional>
#include <span>
#include <unordered_map>

#include "engine/common/error.hpp"
#include "engine/cost/model.hpp"
#include "engine/mapping/mapping.hpp"
#include "engine/search/exhaustive.hpp"

namespace mapfuse {
namespace {

void put(std::string& key, int64_t v) {
  char b[sizeof v];
  std::memcpy(b, &v, sizeof v);
  key.append(b, sizeof v);
}

// What decides a CT's cost on a core: the operator, the rank names (the dataflow names ranks) and
// the CT's rank sizes, each tensor's role, width and projections, its box's size per dimension
// (a halo clipped at the tensor's edge stores less), and the core (cores the mapper cannot tell
// apart are one class). Tensor names, offsets and the CT's position are left out, so identical
// layers and interior tiles share an entry.
// Without `boxes`: the mapper's problem (its result does not depend on the boxes, only the
// off-chip rule and the footprints do).
std::string tile_key(const Einsum& e, const TileSet& ts, int tile, int core_class, bool boxes = true,
                     std::span<const int64_t> held = {}) {
  std::string k;
  k.reserve(256);
  put(k, int64_t{core_class});
  put(k, static_cast<int64_t>(e.op));
  const auto rr = ts.rank_ranges(tile);
  put(k, static_cast<int64_t>(e.ranks.size()));
  for (size_t r = 0; r < e.ranks.size(); ++r) {
    k += e.ranks[r].name;
    k += '\0';
    put(k, rr[r].size());
  }
  const auto acc = ts.tile_accesses(tile);
  put(k, static_cast<int64_t>(e.tensors.size()));
  for (size_t t = 0; t < e.tensors.size(); ++t) {
    const TensorAccess& ta = e.tensors[t];
    put(k, static_cast<int64_t>(ta.role));
    put(k, static_cast<int64_t>(ta.bits_per_value));
    put(k, static_cast<int64_t>(ta.dims.size()));
    for (const Projection& p : ta.dims) {
      put(k, static_cast<int64_t>(p.size()));
      for (const ProjectionTerm& term : p) put(k, int64_t{term.rank} << 32 | term.coeff);
    }
    if (boxes) {
      for (const Range& b : ts.box(acc[t])) put(k, b.size());
      if (!held.empty()) put(k, held[ts.tiles[static_cast<size_t>(tile)].accesses + t]);
    }
  }
  return k;
}

// DRAM energy of one tensor: its accesses at the outermost level, priced as the cost model prices
// them (per vector of block_size words).
double dram_energy(const CostResult& c, const Level& dram, int L, int t) {
  const TensorAccesses& a = c.access[static_cast<size_t>(L - 1)][static_cast<size_t>(t)];
  const int64_t block = std::max(dram.block_size, 1);
  auto vectors = [&](int64_t words) { return static_cast<double>((words + block - 1) / block * block); };
  return vectors(a.reads) * dram.read_pj + vectors(a.fills) * dram.write_pj + vectors(a.updates) * dram.update_pj;
}

struct KeyResult {
  TileCost cost;
  int64_t mapper_calls = 0, evaluated = 0, truncated = 0;
};

// Instances of level `l` over which tensor `t` can be spread rather than copied: the fan-out
// axes above `l` that accept a rank `t` uses (a mapping may use less of an axis, never more).
int64_t spread_instances(const Einsum& e, const Core& core, int l, int t) {
  int64_t p = 1;
  for (size_t m = static_cast<size_t>(l) + 1; m < core.levels.size(); ++m)
    for (LoopKind axis : {LoopKind::SpatialX, LoopKind::SpatialY}) {
      const Fanout& f = core.levels[m].fanout;
      for (int r = 0; r < static_cast<int>(e.ranks.size()); ++r)
        if (e.rank_relevant(t, r) && axis_accepts(f, axis, e, r)) {
          p *= axis == LoopKind::SpatialX ? f.x : f.y;
          break;
        }
    }
  return p;
}

// The fewest words the fullest instance of level `l` holds when the tensors of `mask` (words[t]
// values each) are kept whole there: every value is somewhere, so at least the average over the
// instances, and a tensor spread over P instances puts at least 1/P of itself on one. A lower
// bound, so a capacity check against it never rejects a placement that fits; on a level with one
// instance (every top memory) it is the tensors' total. A per-PE home (an analog array's cells:
// one word per cell) is checked against all its cells, not one.
int64_t words_per_instance(const Einsum& e, const Core& core, int l, TensorMask mask, std::span<const int64_t> words) {
  const int64_t n = std::max<int64_t>(core.levels[static_cast<size_t>(l)].instances, 1);
  int64_t total = 0, spread = 0;
  for (int t = 0; t < static_cast<int>(e.tensors.size()); ++t) {
    if (!(mask >> t & 1)) continue;
    total += words[static_cast<size_t>(t)];
    const int64_t p = std::min(spread_instances(e, core, l, t), n);
    spread = std::max(spread, (words[static_cast<size_t>(t)] + p - 1) / p);
  }
  return std::max((total + n - 1) / n, spread);
}

// Homes (the outermost on-chip level that may keep each operand's role; -1: none, so DRAM) and
// Stream's rule: per home memory, while the operands homed there do not fit together (their box
// values against entries / multiple_buffering), the largest (the first in tensor order on a tie)
// goes off-chip; a home with several instances counts them (words_per_instance). Returns the
// off-chip mask.
TensorMask stream_offchip(const Einsum& e, const Core& core, std::span<const TileAccess> acc,
                          std::span<const int64_t> held) {
  const int L = static_cast<int>(core.levels.size()), T = static_cast<int>(e.tensors.size());
  std::vector<int> home(static_cast<size_t>(T), -1);
  std::vector<int64_t> need(static_cast<size_t>(T), 0);
  TensorMask off = 0;
  for (int t = 0; t < T; ++t) {
    for (int l = L - 2; l >= 0 && home[t] < 0; --l)
      if (core.levels[static_cast<size_t>(l)].may_keep & role_bit(e.tensors[t].role)) home[t] = l;
    need[t] = std::max(acc[t].bits, held.empty() ? 0 : held[static_cast<size_t>(t)]) /
              std::max(e.tensors[t].bits_per_value, 1);
    if (home[t] < 0) off |= static_cast<TensorMask>(1u << t);
  }
  for (int l = 0; l < L - 1; ++l) {
    const Level& lv = core.levels[static_cast<size_t>(l)];
    if (lv.unbounded()) continue;
    const int64_t cap = lv.entries / std::max(lv.multiple_buffering, 1);
    for (;;) {
      TensorMask here = 0;
      int largest = -1;
      for (int t = 0; t < T; ++t)
        if (!(off >> t & 1) && home[t] == l) {
          here |= static_cast<TensorMask>(1u << t);
          if (largest < 0 || need[t] > need[largest]) largest = t;
        }
      if (largest < 0 || words_per_instance(e, core, l, here, need) <= cap) break;
      off |= static_cast<TensorMask>(1u << largest);
    }
  }
  return off;
}

// Maps the CT-sized Einsum `e` on `base` with the operands of `off_mask` off-chip (docs/stream.md,
// "Per-tile cost"); `what` names the CT and core in errors. The result's memory_bits are unset.
KeyResult map_one(const Einsum& e, const Core& base, TensorMask off_mask, const TileCostOptions& opt,
                  const std::string& what) {
  const Core& core = core_for(base, e);
  const int L = static_cast<int>(core.levels.size());
  const int T = static_cast<int>(e.tensors.size());
  std::vector<int> home(static_cast<size_t>(T), -1);
  for (int t = 0; t < T; ++t)
    for (int l = L - 2; l >= 0 && home[t] < 0; --l)
      if (core.levels[static_cast<size_t>(l)].may_keep & role_bit(e.tensors[t].role)) home[t] = l;
  std::vector<bool> off(static_cast<size_t>(T), false);
  for (int t = 0; t < T; ++t) off[t] = (off_mask >> t & 1) != 0;

  KeyResult out;
  const Objective o = opt.objective;
  for (;;) {
    // The on-chip operands arrive before the CT starts (COALA's transfers) and stay whole at their
    // home: backed there (ExhaustiveOptions::onchip_backing), so DRAM holds only the off-chip ones
    // and its energy and bandwidth are theirs alone.
    TensorMask onchip = 0;
    for (int t = 0; t < T; ++t)
      if (!off[t]) onchip |= static_cast<TensorMask>(1u << t);
    const bool any_off = onchip != static_cast<TensorMask>((1u << T) - 1);
    Core free_dram = core;
    if (!any_off) {
      Level& d = free_dram.levels.back();
      d.read_pj = d.write_pj = d.update_pj = 0;
      d.read_bandwidth = d.write_bandwidth = d.shared_bandwidth = 0;
      d.fit.reset();
      d.mlp.reset();
    }
    // An on-chip operand is held whole at its home: no level above it iterates a rank it uses.
    Mapspace space;
    space.levels.resize(static_cast<size_t>(L));
    for (auto& lc : space.levels) lc.max_factor.assign(e.ranks.size(), std::nullopt);
    for (int t = 0; t < T; ++t) {
      if (off[t]) continue;
      for (int l = home[t] + 1; l < L; ++l)
        for (size_t r = 0; r < e.ranks.size(); ++r)
          if (e.rank_relevant(t, static_cast<int>(r))) space.levels[static_cast<size_t>(l)].max_factor[r] = 1;
    }
    // Each home keeps its on-chip operands and any subset of the others it may hold (off-chip
    // ones, on-chip ones homed further out): one search per combination (usually one).
    std::vector<int> homes;
    std::vector<TensorMask> base_keep, optional_keep;
    for (int l = 0; l < L - 1; ++l) {
      TensorMask on = 0, opt_mask = 0;
      for (int t = 0; t < T; ++t) {
        if (!off[t] && home[t] == l) on |= static_cast<TensorMask>(1u << t);
        if ((off[t] || home[t] > l) && (core.levels[static_cast<size_t>(l)].may_keep & role_bit(e.tensors[t].role)))
          opt_mask |= static_cast<TensorMask>(1u << t);
      }
      if (on) homes.push_back(l), base_keep.push_back(on), optional_keep.push_back(opt_mask);
    }
    std::vector<std::vector<TensorMask>> choices(homes.size());
    for (size_t h = 0; h < homes.size(); ++h)
      for (unsigned s = optional_keep[h];; s = (s - 1) & optional_keep[h]) {  // subsets, largest first
        choices[h].push_back(static_cast<TensorMask>(base_keep[h] | s));
        if (s == 0) break;
      }
    size_t combos = 1;
    for (const auto& c : choices) combos *= c.size();
    // Held whole at its home, each on-chip operand occupies its whole volume there (the model's
    // occupancy, padding included): where they overflow a home no mapping fits, and the search
    // would only find that after enumerating every inner choice (20-50 M for FSRCNN's whole
    // layers on tpu_like).
    std::vector<int64_t> volume(static_cast<size_t>(T));
    for (int t = 0; t < T; ++t) volume[static_cast<size_t>(t)] = e.tensor_volume(t);
    for (size_t h = 0; h < homes.size() && combos > 0; ++h) {
      const Level& lv = core.levels[static_cast<size_t>(homes[h])];
      if (lv.unbounded()) continue;
      if (words_per_instance(e, core, homes[h], base_keep[h], volume) * std::max(lv.multiple_buffering, 1) > lv.entries)
        combos = 0;
    }

    bool found = false;
    double best_value = std::numeric_limits<double>::infinity(), best_energy = best_value;
    CostResult best_cost;
    for (size_t combo = 0; combo < combos; ++combo) {
      size_t rest = combo;
      for (size_t h = 0; h < homes.size(); ++h) {
        space.levels[static_cast<size_t>(homes[h])].keep = choices[h][rest % choices[h].size()];
        rest /= choices[h].size();
      }
      CostResult cost;
      ExhaustiveOptions xo;
      xo.objective = o;
      xo.max_mappings = opt.max_mappings;
      xo.gap = opt.offchip_front ? 0.0 : opt.mapper_gap;
      xo.max_work = opt.offchip_front ? 0 : opt.mapper_work;
      auto search = [&](const Core& c, const ExhaustiveOptions& x) {
        const auto t0 = std::chrono::steady_clock::now();
        MapperResult r = exhaustive_search(e, c, space, x);
        ++out.mapper_calls;
        out.evaluated += r.evaluated;
        out.truncated += r.truncated;
        if (opt.trace) {
          std::string ranks, cut;
          for (const Rank& rk : e.ranks) ranks += fmt::format("{}{}={}", ranks.empty() ? "" : " ", rk.name, rk.size);
          for (int64_t b : r.bound_pruned) cut += fmt::format("{}{}", cut.empty() ? "" : "/", b);
          const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          opt.trace(fmt::format("{} [{}] off-chip {:#x} combo {}/{}: {} evaluated, {} over capacity, bound cut per "
                                "level {}, {} stale, best {} cc {:.6g} pJ, {:.3f} s{}",
                                what, ranks, static_cast<unsigned>(~onchip & ((1u << T) - 1)), combo + 1, combos, r.evaluated,
                                r.pruned, cut, r.stale_dropped, r.best ? r.cost.cycles : 0.0,
                                r.best ? r.cost.energy_pj : 0.0, s,
                                r.truncated ? fmt::format(" (stopped at the work limit, {} units)", r.work) : ""));
        }
        return r;
      };
      // A mapping's cost with the on-chip operands backed at their homes.
      auto exact = [&](const Mapping& m) {
        FlatMapping f = flatten(m);
        f.keep[L - 1] = static_cast<TensorMask>(f.keep[L - 1] & ~onchip);
        f.onchip_backing = onchip;
        return evaluate(compile_plan(e, core), f);
      };
      if (!any_off) {
        // Branch and bound (fast path). Its bounds assume DRAM backing, so the search sees DRAM
        // backing everything at no energy and unlimited bandwidth (the on-chip operands pass it
        // once, for free) and each on-chip operand filled into (drained from) its home once: an
        // energy the same for every mapping, and cycles only where that fill binds the home's
        // bandwidth. The mapping found is then costed exactly, backed on chip.
        xo.front = false;
        xo.energy_tiebreak = opt.energy_tiebreak;
        MapperResult r = search(free_dram, xo);
        if (!r.best) continue;
        cost = exact(*r.best);
      } else {
        // Off-chip operands: DRAM's bandwidth is theirs and can bind, so the search sees the
        // on-chip operands backed on chip: branch and bound with the energy tie-break (or, with
        // TileCostOptions::offchip_front, the whole energy/cycles front, which picks the same).
        xo.front = opt.offchip_front;
        xo.bound = !opt.offchip_front;  // the whole front, as a reference
        xo.energy_tiebreak = opt.energy_tiebreak;
        xo.onchip_backing = onchip;
        // The best of the kept sets searched before is known to be reached: only better ones
        // count (costs are exact here, unlike the fast path's DRAM-free search).
        if (found && !opt.offchip_front) xo.upper_bound = best_value, xo.upper_bound_energy = best_energy;
        MapperResult r = search(core, xo);
        if (!r.best) continue;
        cost = r.cost;
        if (opt.offchip_front && opt.energy_tiebreak) {
          // The front is by energy ascending: the first point with the least objective value is
          // the least energy among the mappings that tie on it.
          const ParetoMapping* pick = nullptr;
          for (const ParetoMapping& p : r.pareto)
            if (!pick || objective_value(o, p.energy_pj, p.cycles) < objective_value(o, pick->energy_pj, pick->cycles))
              pick = &p;
          cost = exact(pick->mapping);
        }
      }
      const double v = objective_value(o, cost);
      if (!found || v < best_value || (v == best_value && cost.energy_pj < best_energy)) {
        found = true;
        best_value = v;
        best_energy = cost.energy_pj;
        best_cost = cost;
      }
    }
    if (found) {
      TileCost& tc = out.cost;
      tc.latency_cc = best_cost.cycles;
      tc.onchip_energy_pj = best_cost.energy_pj - best_cost.level_energy_pj[static_cast<size_t>(L - 1)];
      tc.operands.assign(static_cast<size_t>(T), {});
      const Level& dram = core.levels.back();
      for (int t = 0; t < T; ++t) {
        OperandCost& oc = tc.operands[static_cast<size_t>(t)];
        if (!off[t]) continue;
        oc.offchip = true;
        tc.offchip_energy_pj += dram_energy(best_cost, dram, L, t);
        const TensorAccesses& a = best_cost.access[static_cast<size_t>(L - 1)][static_cast<size_t>(t)];
        const int64_t words = e.tensors[t].role == TensorRole::Output ? a.fills + a.updates : a.reads;
        oc.dram_bits_per_cycle = best_cost.cycles > 0
                                     ? static_cast<double>(words) * e.tensors[t].bits_per_value / best_cost.cycles
                                     : 0;
      }
      return out;
    }
    // No mapping holds the on-chip operands (the rule sized them by their boxes; the mapper's
    // tiles include padding, and lower levels have their own limits): the largest remaining one
    // (by the mapper's footprint) goes off-chip too.
    int largest = -1;
    for (int t = 0; t < T; ++t)
      if (!off[t] && (largest < 0 || e.tensor_volume(t) > e.tensor_volume(largest))) largest = t;
    if (largest < 0)
      throw InputError({}, "allocation", what + ": no mapping fits, even with every operand in off-chip memory");
    off[largest] = true;
  }
}

}  // namespace

Einsum ct_einsum(const Workload& w, const TileSet& tiles, int tile) {
  const Tile& t = tiles.tiles.at(static_cast<size_t>(tile));
  Einsum e = w.einsums.at(static_cast<size_t>(t.layer));
  const auto rr = tiles.rank_ranges(tile);
  for (size_t r = 0; r < e.ranks.size(); ++r) e.ranks[r].size = rr[r].size();
  return e;
}

std::string tile_cost_cache_key(const Einsum& e, const std::string& core_fp, TensorMask offchip,
                                const TileCostOptions& opt) {
  std::string k;
  k.reserve(core_fp.size() + 512);
  auto name = [&](const std::string& n) { put(k, static_cast<int64_t>(n.size())), k += n; };
  put(k, static_cast<int64_t>(opt.objective));
  put(k, static_cast<int64_t>(opt.energy_tiebreak) << 1 | static_cast<int64_t>(opt.offchip_front));
  put(k, opt.max_mappings);
  // Only with a gap, so that the keys of exact searches (and the caches holding them) stay valid.
  if (opt.mapper_gap > 0) name("gap"), put(k, std::bit_cast<int64_t>(opt.mapper_gap));
  if (opt.mapper_work > 0) name("work"), put(k, opt.mapper_work);
  name(core_fp);
  put(k, static_cast<int64_t>(offchip));
  put(k, static_cast<int64_t>(e.op));
  put(k, static_cast<int64_t>(e.ranks.size()));
  for (const Rank& r : e.ranks) name(r.name), put(k, r.size);
  put(k, static_cast<int64_t>(e.tensors.size()));
  for (const TensorAccess& ta : e.tensors) {
    name(ta.name);  // in mapping texts: the mapper's tie-break
    put(k, static_cast<int64_t>(ta.role));
    put(k, static_cast<int64_t>(ta.bits_per_value));
    put(k, static_cast<int64_t>(ta.dims.size()));
    for (const Projection& p : ta.dims) {
      put(k, static_cast<int64_t>(p.size()));
      for (const ProjectionTerm& term : p) put(k, int64_t{term.rank}), put(k, term.coeff);
    }
  }
  return k;
}

std::vector<TileCost> map_tile_costs(const Workload& w, const TileSet& tiles, const Architecture& a,
                                     std::span<const int> core_of_tile, const TileCostOptions& opt,
                                     TileCostStats* stats, TileCostCache* cache, std::span<const int64_t> held_bits) {
  const auto t0 = std::chrono::steady_clock::now();
  const int n = static_cast<int>(tiles.tiles.size());
  if (!held_bits.empty() && held_bits.size() != tiles.accesses.size())
    throw InputError({}, "tile_costs", fmt::format("{} held sizes for {} CT operands (one per operand expected)",
                                                   held_bits.size(), tiles.accesses.size()));
  if (core_of_tile.size() != tiles.tiles.size())
    throw InputError({}, "allocation",
                     fmt::format("{} cores given for {} CTs (one per CT expected)", core_of_tile.size(), n));
  // Unique keys in order of their first CT, so the work list (and the first error) is deterministic.
  std::vector<int> core_class(a.cores.size());
  std::vector<std::string> fingerprint(a.cores.size());
  {
    std::unordered_map<std::string, int> classes;
    for (size_t c = 0; c < a.cores.size(); ++c) {
      fingerprint[c] = core_fingerprint(a.cores[c]);
      core_class[c] = classes.try_emplace(fingerprint[c], static_cast<int>(c)).first->second;
    }
  }
  std::unordered_map<std::string, int> index;
  std::vector<int> key_of(static_cast<size_t>(n)), first_tile;
  for (int t = 0; t < n; ++t) {
    const int c = core_of_tile[static_cast<size_t>(t)];
    if (c < 0 || c >= static_cast<int>(a.cores.size()))
      throw InputError({}, "allocation",
                       fmt::format("layer '{}', CT {}: core {} does not exist ({} has {} cores)",
                                   w.einsums[static_cast<size_t>(tiles.tiles[t].layer)].name, t, c, a.name,
                                   a.cores.size()));
    const Einsum& e = w.einsums[static_cast<size_t>(tiles.tiles[t].layer)];
    auto [it, fresh] =
        index.try_emplace(tile_key(e, tiles, t, core_class[static_cast<size_t>(c)], true, held_bits),
                          static_cast<int>(first_tile.size()));
    if (fresh) first_tile.push_back(t);
    key_of[static_cast<size_t>(t)] = it->second;
  }
  // Per key, the off-chip operands (Stream's rule on the boxes); keys that differ only in their
  // boxes and agree on them are one mapping problem.
  const int K = static_cast<int>(first_tile.size());
  std::vector<int> problem_of(static_cast<size_t>(K)), problem_first;
  std::vector<TensorMask> problem_off;
  std::vector<std::string> what(static_cast<size_t>(K));
  // With a cache: per problem its cache key (of the problem's first CT: what the search would be
  // given) and whether the cache holds it.
  std::vector<std::string> cache_key;
  std::vector<KeyResult> results;
  std::vector<char> hit;
  {
    std::unordered_map<std::string, int> problems;
    for (int k = 0; k < K; ++k) {
      const int t = first_tile[static_cast<size_t>(k)];
      const int c = core_of_tile[static_cast<size_t>(t)];
      const Core& base = a.cores[static_cast<size_t>(c)];
      const Einsum& layer = w.einsums[static_cast<size_t>(tiles.tiles[static_cast<size_t>(t)].layer)];
      what[static_cast<size_t>(k)] = fmt::format("layer '{}', CT {} (sub-tile {}) on core '{}'", layer.name, t,
                                                 tiles.tiles[static_cast<size_t>(t)].sub_id, base.name);
      if (!base.can_run(layer.op))
        throw InputError({}, "allocation",
                         fmt::format("{}: the core cannot run {} operators", what[static_cast<size_t>(k)],
                                     to_string(layer.op)));
      const Einsum e = ct_einsum(w, tiles, t);
      const auto acc = tiles.tile_accesses(t);
      const TensorMask off =
          stream_offchip(e, core_for(base, e), acc,
                         held_bits.empty() ? std::span<const int64_t>()
                                           : held_bits.subspan(tiles.tiles[static_cast<size_t>(t)].accesses, acc.size()));
      std::string pk = tile_key(layer, tiles, t, core_class[static_cast<size_t>(c)], false);
      pk += static_cast<char>(off);
      auto [it, fresh] = problems.try_emplace(std::move(pk), static_cast<int>(problem_first.size()));
      if (fresh) {
        problem_first.push_back(k), problem_off.push_back(off);
        results.emplace_back();
        hit.push_back(0);
        if (cache) {
          cache_key.push_back(tile_cost_cache_key(e, fingerprint[static_cast<size_t>(c)], off, opt));
          if (std::optional<TileCost> v = cache->find(cache_key.back())) results.back().cost = std::move(*v), hit.back() = 1;
        }
      }
      problem_of[static_cast<size_t>(k)] = it->second;
    }
  }
  const int P = static_cast<int>(problem_first.size());
  std::vector<std::exception_ptr> errors(static_cast<size_t>(P));
#pragma omp parallel for schedule(dynamic, 1)
  for (int p = 0; p < P; ++p) {
    if (hit[static_cast<size_t>(p)]) continue;
    const int k = problem_first[static_cast<size_t>(p)];
    const int t = first_tile[static_cast<size_t>(k)];
    try {
      results[static_cast<size_t>(p)] =
          map_one(ct_einsum(w, tiles, t), a.cores[static_cast<size_t>(core_of_tile[static_cast<size_t>(t)])],
                  problem_off[static_cast<size_t>(p)], opt, what[static_cast<size_t>(k)]);
      // Inserted as each search ends (the cache locks), so that a run saving the cache while a
      // long unit runs (mapfuse run) keeps the searches finished before a kill or an error.
      if (cache) cache->insert(cache_key[static_cast<size_t>(p)], results[static_cast<size_t>(p)].cost);
    } catch (...) {
      errors[static_cast<size_t>(p)] = std::current_exception();
    }
  }
  for (const auto& err : errors)
    if (err) std::rethrow_exception(err);
  // Per key, the problem's cost with the key's own footprints (its boxes).
  std::vector<TileCost> by_key(static_cast<size_t>(K));
  for (int k = 0; k < K; ++k) {
    TileCost& c = by_key[static_cast<size_t>(k)];
    c = results[static_cast<size_t>(problem_of[static_cast<size_t>(k)])].cost;
    const auto acc = tiles.tile_accesses(first_tile[static_cast<size_t>(k)]);
    for (size_t i = 0; i < c.operands.size(); ++i)
      if (!c.operands[i].offchip) c.operands[i].memory_bits = acc[i].bits;
  }
  std::vector<TileCost> costs(static_cast<size_t>(n));
  for (int t = 0; t < n; ++t) costs[static_cast<size_t>(t)] = by_key[static_cast<size_t>(key_of[static_cast<size_t>(t)])];
  if (stats) {
    *stats = {};
    stats->tiles = n;
    stats->unique_keys = K;
    stats->mapper_problems = P;
    for (const KeyResult& r : results)
      stats->mapper_calls += r.mapper_calls, stats->mappings_evaluated += r.evaluated, stats->truncated += r.truncated;
    if (cache)
      for (char h : hit) (h ? stats->cache_hits : stats->cache_misses) += 1;
    stats->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  return costs;
}

}  // namespace mapfuse
