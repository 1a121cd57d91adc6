#include "engine/cost/fused.hpp"

#include <algorithm>
#include <fmt/format.h>

#include "engine/common/error.hpp"

namespace mapfuse {
namespace {

[[noreturn]] void reject(size_t g, const std::string& what) {
  throw InputError({}, fmt::format("looptree.groups[{}]", g), what);
}

}  // namespace

int plain_dim(const Einsum& e, int ti, int r) {
  int found = -1;
  const auto& dims = e.tensors[ti].dims;
  for (size_t d = 0; d < dims.size(); ++d)
    for (const ProjectionTerm& term : dims[d]) {
      if (term.rank != r) continue;
      if (found >= 0 || dims[d].size() != 1 || term.coeff != 1) return -1;
      found = static_cast<int>(d);
    }
  return found;
}

Einsum tile_einsum(const Einsum& e, const std::array<int64_t, kMaxRanks>& shared) {
  Einsum r = e;
  for (size_t i = 0; i < r.ranks.size(); ++i) r.ranks[i].size /= shared[i] > 0 ? shared[i] : 1;
  return r;
}

FlatMapping flatten_fused(const Mapping& m, const FusedContext& ctx, int n_levels) {
  FlatMapping f = flatten(m);
  if (ctx.backing_level >= 0 && ctx.at_b()) {
    f.keep[n_levels - 1] = static_cast<TensorMask>(f.keep[n_levels - 1] & ~ctx.at_b());
    f.onchip_backing = ctx.at_b();
  }
  return f;
}

ResidentFill apply_resident_fill(EvalPlan& tile_plan, const FusedContext& ctx) {
  ResidentFill fill;
  const int b = ctx.backing_level, top = tile_plan.n_levels - 1;
  if (b < 0 || !ctx.resident) return fill;
  const PlanLevel &src = tile_plan.levels[top], &dst = tile_plan.levels[b];
  auto vectors = [](int64_t words, int64_t block) { return block == 1 ? words : (words + block - 1) / block * block; };
  for (int t = 0; t < tile_plan.n_tensors; ++t)
    if (ctx.resident >> t & 1) {
      // Not indexed by a shared loop: the tile's tensor is the whole tensor.
      const int64_t words = tile_plan.tensors[t].volume;
      fill.words += words;
      fill.energy_pj += static_cast<double>(vectors(words, src.block_size)) * src.read_pj +
                        static_cast<double>(vectors(words, dst.block_size)) * dst.write_pj;
    }
  const double per_iteration = static_cast<double>(fill.words) / static_cast<double>(ctx.iterations);
  tile_plan.levels[top].extra_read_words = per_iteration;
  tile_plan.levels[b].extra_write_words = per_iteration;
  return fill;
}

FusedTilePlan fused_tile_plan(const Einsum& tile, const Core& c, const FusedContext& ctx) {
  FusedTilePlan p;
  p.first = compile_plan(tile, c);
  p.fill = apply_resident_fill(p.first, ctx);
  if (ctx.reduction > 1) {
    p.rest = p.first;
    p.rest.output_accumulates = true;
  }
  return p;
}

void evaluate_fused_einsum(const FusedTilePlan& plan, const NestStructure& s, const int64_t* f,
                           const FusedContext& ctx, FusedEinsumCost& out, CostResult& scratch) {
  const EvalPlan& tile_plan = plan.first;
  out.tile = evaluate(tile_plan, s, f, &scratch);
  // Capacity is decided on the reservations of the whole group, not on one Einsum alone.
  if (out.tile.invalid == Invalid::CapacityExceeded) out.tile.invalid = Invalid::None;
  out.rest = out.tile;
  if (ctx.reduction > 1 && out.tile.valid()) {
    out.rest = evaluate(plan.rest, s, f);
    if (out.rest.invalid == Invalid::CapacityExceeded) out.rest.invalid = Invalid::None;
  }
  out.iterations = ctx.iterations;
  out.exchanged_tile.fill(0);
  out.own.fill(0);
  out.resident = 0;
  if (!out.tile.valid()) {
    out.energy_pj = out.cycles = 0;
    return;
  }
  out.energy_pj = fused_total(out.tile.energy_pj, out.rest.energy_pj, ctx, plan.fill.energy_pj);
  out.cycles = fused_total(out.tile.cycles, out.rest.cycles, ctx);
  for (int l = 0; l < tile_plan.n_levels; ++l) out.own[l] = scratch.level_occupancy[l];
  if (ctx.backing_level >= 0)
    for (int t = 0; t < tile_plan.n_tensors; ++t) {
      const int64_t tile = scratch.access[ctx.backing_level][t].tile;
      if (ctx.onchip >> t & 1) {
        out.exchanged_tile[t] = tile;
        out.own[ctx.backing_level] -= tile;
      } else if (ctx.resident >> t & 1) {
        out.resident += tile;
        out.own[ctx.backing_level] -= tile;
      }
    }
}

FusedCost evaluate_fused(const LoopTree& t, const Workload& w, const Core& c) {
  if (auto err = check_looptree(t, w, c)) throw InputError({}, "looptree", *err);
  const int E = static_cast<int>(w.einsums.size());
  const int L = static_cast<int>(c.levels.size());
  FusedCost out;
  out.einsums.resize(E);
  out.contexts.resize(E);
  out.tiles.resize(E);
  out.usage.resize(E);
  out.valid = true;
  auto note_invalid = [&](Invalid why, int level, int einsum) {
    if (!out.valid) return;
    out.valid = false;
    out.invalid = why;
    out.invalid_level = level;
    out.invalid_einsum = einsum;
  };
  for (size_t g = 0; g < t.groups.size(); ++g) {
    const FusionGroup& fg = t.groups[g];
    const int n = static_cast<int>(fg.einsums.size());
    // Exchanged tensors (backed inside the group) and the group's backing level.
    int b = -1;
    for (const TensorBacking& tb : fg.backing) {
      if (b >= 0 && tb.level != b)
        reject(g, fmt::format("exchanged tensors are backed at {} and {}: one backing level per group "
                              "(different backing levels in one group are not modelled yet)", c.levels[b].name, c.levels[tb.level].name));
      b = tb.level;
    }
    if (n == 1 && !fg.shared_loops.empty())
      reject(g, "a group of one Einsum exchanges nothing and cannot have shared loops");
    for (const TensorBacking& r : fg.resident)
      if (r.level != b)
        reject(g, fmt::format("resident tensor '{}' at {}: resident tensors are kept at the group's backing level{}",
                              r.tensor, c.levels[r.level].name,
                              b >= 0 ? " " + c.levels[b].name : " (this group exchanges nothing)"));
    if (b == L - 1)
      reject(g, "an exchanged tensor backed at the outermost level: put the Einsums in separate groups");
    for (const SharedLoop& sl : fg.shared_loops)
      if (sl.level != b)
        reject(g, fmt::format("shared loops must sit directly above the backing level {} (found one at level {})",
                              c.levels[b].name, sl.level));
    const int nl = static_cast<int>(fg.shared_loops.size());
    auto covers = [&](int k, int i) { return fg.shared_loops[k].rank[i] >= 0; };
    struct Exchanged {
      int tensor;                 // workload tensor index
      int first = -1, last = -1;  // positions of the producer and the last consumer in the group
      std::vector<int> above;     // the loops above its storage: those covering producer and consumers
      int live_from = -1, live_to = -1;  // the branches during which its tile is held
      int64_t tile = -1;          // words of the stored tile at b
    };
    std::vector<Exchanged> exchanged;
    for (const TensorBacking& tb : fg.backing) {
      const int wt = w.tensor_index(tb.tensor);
      const TensorInfo& ti = w.tensors[wt];
      Exchanged x{wt};
      for (int i = 0; i < n; ++i) {
        if (fg.einsums[i] == ti.producer) x.first = i;
        if (std::find(ti.consumers.begin(), ti.consumers.end(), fg.einsums[i]) != ti.consumers.end()) x.last = i;
      }
      for (int consumer : ti.consumers)
        if (std::find(fg.einsums.begin(), fg.einsums.end(), consumer) == fg.einsums.end())
          reject(g, fmt::format("tensor '{}' is backed on chip but also consumed by '{}' outside the group", tb.tensor,
                                w.einsums[consumer].name));
      // Stored directly under the loops common to its producer and every consumer. A deeper loop
      // around the producer fills the tile piece by piece, one around a consumer reads it again
      // and again: the tile is held for the whole of such loops.
      x.live_from = x.first;
      x.live_to = x.last;
      std::vector<uint8_t> touches(static_cast<size_t>(n), 0);  // producer or consumer, by position
      for (int i = 0; i < n; ++i)
        touches[i] = i == x.first ||
                     std::find(ti.consumers.begin(), ti.consumers.end(), fg.einsums[i]) != ti.consumers.end();
      if (x.first >= 0)
        for (int k = 0; k < nl; ++k) {
          bool all = true, around = false;
          for (int i = 0; i < n; ++i)
            if (touches[i]) all &= covers(k, i), around |= covers(k, i);
          if (all) {
            x.above.push_back(k);
            continue;
          }
          if (!around) continue;
          for (int i = 0; i < n; ++i)
            if (covers(k, i)) x.live_from = std::min(x.live_from, i), x.live_to = std::max(x.live_to, i);
        }
      exchanged.push_back(x);
    }
    // Every branch's usage: its own reservations plus the exchanged tiles live during it.
    std::vector<std::array<int64_t, kMaxLevels>> own(n);
    int64_t resident = 0;  // words of the group's resident tensors at b
    for (int i = 0; i < n; ++i) {
      const int ei = fg.einsums[i];
      const Einsum& e = w.einsums[ei];
      FusedContext ctx;
      std::array<int64_t, kMaxRanks> shared;
      shared.fill(1);
      if (b >= 0) {
        ctx.backing_level = b;
        for (const Exchanged& x : exchanged) {
          const int ti = e.tensor_index(w.tensors[x.tensor].name);
          if (ti >= 0) ctx.onchip |= static_cast<TensorMask>(1u << ti);
        }
        const int out_t = e.output_index();
        for (int k = 0; k < nl; ++k) {
          const SharedLoop& sl = fg.shared_loops[k];
          const int r = sl.rank[i];
          if (r < 0) continue;
          if (plain_dim(e, out_t, r) < 0) {
            // A loop over a reduction rank: the output, stored at b above it, accumulates across
            // its iterations; so it must be exchanged in the group and read by no Einsum the loop
            // covers (which would see partial sums).
            const int wt = w.tensor_index(e.tensors[out_t].name);
            const bool exchanged_out = std::any_of(exchanged.begin(), exchanged.end(),
                                                   [&](const Exchanged& x) { return x.tensor == wt; });
            bool read_inside = false;
            for (int consumer : w.tensors[wt].consumers)
              for (int j = 0; j < n; ++j) read_inside |= fg.einsums[j] == consumer && covers(k, j);
            if (e.rank_relevant(out_t, r) || !exchanged_out || read_inside)
              reject(g, fmt::format("shared loop {} runs over rank {} of '{}', which does not index its output plainly "
                                    "(partial sums would cross iterations: allowed only for a rank the output "
                                    "lacks, with the output exchanged on chip and read outside the loop)",
                                    k, e.ranks[r].name, e.name));
            ctx.reduction *= sl.factor;
          }
          if (shared[r] > 1 && sl.factor > 1)
            reject(g, fmt::format("two shared loops run over rank {} of '{}'", e.ranks[r].name, e.name));
          shared[r] *= sl.factor;
          ctx.iterations *= sl.factor;
        }
        // A loop around an exchanged tensor's producer and one of its consumers steps the same
        // plain dimension of the tensor in both (the consumer reads what was just produced); a
        // loop around a consumer alone steps a plain dimension or none (it reads the tile again).
        for (const Exchanged& x : exchanged) {
          const int ti = e.tensor_index(w.tensors[x.tensor].name);
          if (ti < 0 || x.first < 0 || x.first == i) continue;
          const Einsum& prod = w.einsums[fg.einsums[x.first]];
          const int pti = prod.tensor_index(w.tensors[x.tensor].name);
          for (int k = 0; k < nl; ++k) {
            const SharedLoop& sl = fg.shared_loops[k];
            if (sl.rank[i] < 0) continue;
            const int d = plain_dim(e, ti, sl.rank[i]);
            if (sl.rank[x.first] >= 0 ? d < 0 || d != plain_dim(prod, pti, sl.rank[x.first])
                                      : d < 0 && e.rank_relevant(ti, sl.rank[i]))
              reject(g, fmt::format("shared loop {} steps '{}' differently in '{}' and '{}'", k,
                                    w.tensors[x.tensor].name, prod.name, e.name));
          }
        }
        for (const TensorBacking& r : fg.resident) {
          const int ti = e.tensor_index(r.tensor);
          if (ti < 0) continue;
          ctx.resident |= static_cast<TensorMask>(1u << ti);
          for (int k = 0; k < nl; ++k) {
            const SharedLoop& sl = fg.shared_loops[k];
            if (sl.rank[i] >= 0 && sl.factor > 1 && e.rank_relevant(ti, sl.rank[i]))
              reject(g, fmt::format("resident tensor '{}' is indexed by shared loop {} (rank {} of '{}'): only a "
                                    "tensor none of the loops around its Einsum step is kept above them",
                                    r.tensor, k, e.ranks[sl.rank[i]].name, e.name));
          }
        }
        const Mapping& m = fg.mappings[i];
        for (int l = b + 1; l < L; ++l)
          for (const Loop& lp : m.levels[l].loops)
            if (lp.factor > 1)
              reject(g, fmt::format("'{}' has its own loop at {} above the backing level {}", e.name,
                                    c.levels[l].name, c.levels[b].name));
        for (int ti = 0; ti < static_cast<int>(e.tensors.size()); ++ti) {
          if (!(ctx.at_b() >> ti & 1)) continue;
          const char* what = ctx.onchip >> ti & 1 ? "exchanged" : "resident";
          if (!(m.levels[b].keep >> ti & 1))
            reject(g, fmt::format("'{}' must keep {} tensor '{}' at its backing level {}", e.name, what,
                                  e.tensors[ti].name, c.levels[b].name));
          for (int l = b + 1; l < L - 1; ++l)
            if (m.levels[l].keep >> ti & 1)
              reject(g, fmt::format("'{}' keeps {} tensor '{}' at {}, above its backing level", e.name, what,
                                    e.tensors[ti].name, c.levels[l].name));
        }
      }
      const Einsum tile = tile_einsum(e, shared);
      const FusedTilePlan plan = fused_tile_plan(tile, c, ctx);
      const FlatMapping fm = flatten_fused(fg.mappings[i], ctx, L);
      const NestStructure s = analyze(plan.first, fm);
      int64_t factors[kMaxLoops];
      for (int k = 0; k < fm.n_loops; ++k) factors[k] = fm.loops[k].factor;
      FusedEinsumCost& fc = out.einsums[ei];
      CostResult& scratch = out.tiles[ei];
      evaluate_fused_einsum(plan, s, factors, ctx, fc, scratch);
      out.contexts[ei] = ctx;
      resident += fc.resident;
      if (!fc.tile.valid()) note_invalid(fc.tile.invalid, scratch.invalid_level, ei);
      own[i] = fc.own;
      // The stored tile: the tensor's words under the loops above its storage, the same seen
      // from the producer and from every consumer.
      for (Exchanged& x : exchanged) {
        const int ti = e.tensor_index(w.tensors[x.tensor].name);
        if (ti < 0) continue;
        std::array<int64_t, kMaxRanks> above;
        above.fill(1);
        for (int k : x.above) above[fg.shared_loops[k].rank[i]] *= fg.shared_loops[k].factor;
        const int64_t words = tile_einsum(e, above).tensor_volume(ti);
        if (x.tile >= 0 && x.tile != words)
          reject(g, fmt::format("tensor '{}' has a tile of {} words in one Einsum and {} in '{}'",
                                w.tensors[x.tensor].name, x.tile, words, e.name));
        x.tile = words;
      }
    }
    for (int i = 0; i < n; ++i) {
      std::array<int64_t, kMaxLevels> usage = own[i];
      if (b >= 0) usage[b] += resident;  // held above the loops, during every branch
      for (const Exchanged& x : exchanged)
        if (x.live_from <= i && i <= x.live_to) usage[b] += x.tile;
      out.usage[fg.einsums[i]] = usage;
      for (int l = 0; l < L; ++l) {
        out.peak[l] = std::max(out.peak[l], usage[l]);
        const Level& lv = c.levels[l];
        if (lv.entries > 0 && usage[l] * lv.multiple_buffering > lv.entries)
          note_invalid(Invalid::CapacityExceeded, l, fg.einsums[i]);
      }
    }
  }
  for (int e = 0; e < E; ++e) {
    out.energy_pj += out.einsums[e].energy_pj;
    out.cycles += out.einsums[e].cycles;
  }
  return out;
}

}  // namespace mapfuse
