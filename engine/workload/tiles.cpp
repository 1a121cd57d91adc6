#include "engine/workload/tiles.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "engine/common/error.hpp"
#include "engine/common/huge_pages.hpp"

namespace mapfuse {

namespace {

int single_rank(const Projection& p) { return p.size() == 1 && p[0].coeff == 1 ? p[0].rank : -1; }

// One resolved outer-CT loop.
struct Loop {
  int rank = 0;
  int64_t tile = 1;   // tile size along the rank
  int64_t count = 1;  // number of tiles
};

void check_stack_cover(const Workload& w, const std::vector<std::vector<int>>& stacks) {
  std::vector<int> seen(w.einsums.size(), 0);
  for (size_t s = 0; s < stacks.size(); ++s)
    for (int e : stacks[s]) {
      if (e < 0 || e >= static_cast<int>(w.einsums.size()))
        throw InputError({}, fmt::format("stacks[{}]", s),
                         fmt::format("Einsum index {} is out of range; the workload has {} Einsums", e,
                                     w.einsums.size()));
      if (seen[e]++)
        throw InputError({}, fmt::format("stacks[{}]", s),
                         "Einsum '" + w.einsums[e].name + "' is in more than one stack");
    }
  for (size_t e = 0; e < seen.size(); ++e)
    if (!seen[e])
      throw InputError({}, "stacks", "Einsum '" + w.einsums[e].name + "' is in no stack");
}

}  // namespace

int row_rank(const Einsum& e) {
  const int o = e.output_index();
  if (o < 0) return -1;
  const auto& dims = e.tensors[o].dims;
  if (dims.empty()) return -1;
  return single_rank(dims[dims.size() >= 3 ? 2 : 0]);
}

std::vector<LayerTiling> stream_tiling(const Workload& w, int64_t inter_parts) {
  std::vector<LayerTiling> out(w.einsums.size());
  for (size_t i = 0; i < w.einsums.size(); ++i) {
    const Einsum& e = w.einsums[i];
    LayerTiling& t = out[i];
    if (int r = row_rank(e); r >= 0) t.intra.push_back({e.ranks[r].name, 0});
    const auto& odims = e.tensors[e.output_index()].dims;
    int split = -1;
    if (e.op == OpKind::Mac && odims.size() >= 2) split = single_rank(odims[1]);
    if (e.op == OpKind::Elementwise) {
      int inputs = 0;
      for (const auto& ta : e.tensors) inputs += ta.role == TensorRole::Input;
      if (inputs == 1 && !odims.empty()) split = single_rank(odims.back());
    }
    if (split >= 0 && inter_parts > 1) t.inter.push_back({e.ranks[split].name, inter_parts});
  }
  return out;
}

std::vector<LayerTiling> pixel_tiling(const Workload& w, int64_t rows, int64_t cols) {
  std::vector<LayerTiling> out(w.einsums.size());
  for (size_t i = 0; i < w.einsums.size(); ++i) {
    const Einsum& e = w.einsums[i];
    const auto& dims = e.tensors[e.output_index()].dims;
    if (dims.size() < 2) continue;
    const int r = single_rank(dims[dims.size() - 2]), c = single_rank(dims.back());
    if (r < 0 || c < 0) continue;
    out[i].intra = {{e.ranks[r].name, 0, rows}, {e.ranks[c].name, 0, cols}};
  }
  return out;
}

std::vector<std::vector<int>> layer_stacks_lbl(const Workload& w) {
  std::vector<std::vector<int>> s;
  for (size_t i = 0; i < w.einsums.size(); ++i) s.push_back({static_cast<int>(i)});
  return s;
}

std::vector<std::vector<int>> layer_stacks_manual(const Workload& w,
                                                  const std::vector<std::vector<int>>& given) {
  const int n = static_cast<int>(w.einsums.size());
  std::vector<int> listed(n, -1);  // position of the stack naming each Einsum
  for (size_t s = 0; s < given.size(); ++s) {
    const std::string key = fmt::format("stacks[{}]", s);
    if (given[s].empty()) throw InputError({}, key, "is empty; a stack names at least one Einsum");
    for (int e : given[s]) {
      if (e < 0 || e >= n)
        throw InputError({}, key, fmt::format("Einsum index {} is out of range 0..{}", e, n - 1));
      if (listed[e] >= 0)
        throw InputError({}, key, fmt::format("Einsum '{}' is already in stacks[{}]",
                                              w.einsums[e].name, listed[e]));
      listed[e] = static_cast<int>(s);
    }
    const auto [lo, hi] = std::minmax_element(given[s].begin(), given[s].end());
    for (int e = *lo; e <= *hi; ++e)
      if (listed[e] != static_cast<int>(s))
        throw InputError({}, key,
                         fmt::format("is not contiguous: Einsum '{}' lies between '{}' and '{}' "
                                     "in the workload's order but is not in the stack",
                                     w.einsums[e].name, w.einsums[*lo].name, w.einsums[*hi].name));
  }
  // A stack runs after every stack it reads from; listing a consumer's stack first is a cycle.
  for (const TensorInfo& t : w.tensors) {
    if (t.producer < 0 || listed[t.producer] < 0) continue;
    for (int c : t.consumers)
      if (listed[c] >= 0 && listed[c] < listed[t.producer])
        throw InputError({}, fmt::format("stacks[{}]", listed[c]),
                         fmt::format("the stack order is cyclic: '{}' reads '{}', which stacks[{}] "
                                     "listed after it produces",
                                     w.einsums[c].name, t.name, listed[t.producer]));
  }
  std::vector<std::vector<int>> out;
  for (int e = 0; e < n;) {
    if (listed[e] < 0) {
      out.push_back({e++});
      continue;
    }
    std::vector<int> s = given[listed[e]];
    std::sort(s.begin(), s.end());
    e = s.back() + 1;
    out.push_back(std::move(s));
  }
  return out;
}

int64_t weight_bits(const Workload& w, int einsum) {
  const Einsum& e = w.einsums[einsum];
  int64_t bits = 0;
  for (size_t t = 0; t < e.tensors.size(); ++t) {
    const TensorAccess& ta = e.tensors[t];
    if (ta.role != TensorRole::Weight) continue;
    if (w.tensors[w.tensor_index(ta.name)].producer >= 0) continue;  // an activation operand
    bits += e.tensor_volume(static_cast<int>(t)) * ta.bits_per_value;
  }
  return bits;
}

std::vector<std::vector<int>> layer_stacks_auto(const Workload& w, int64_t weight_capacity_bits,
                                                bool only_first) {
  if (weight_capacity_bits <= 0)
    throw InputError({}, "weight_capacity_bits",
                     fmt::format("is {}; expected the cores' weight memory in bits (> 0)",
                                 weight_capacity_bits));
  std::vector<std::vector<int>> out;
  std::vector<int> cur;
  int64_t sum = 0;
  bool fused_done = false;
  for (int e = 0; e < static_cast<int>(w.einsums.size()); ++e) {
    const int64_t b = weight_bits(w, e);
    const bool cut = !cur.empty() && (fused_done || sum + b > weight_capacity_bits);
    if (cut) {
      fused_done = only_first;
      out.push_back(std::move(cur));
      cur.clear();
      sum = 0;
    }
    cur.push_back(e);
    sum += b;
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

StackSpec parse_stack_spec(const std::string& text, const std::string& key) {
  const std::string forms =
      "auto, auto:F (F > 0 times the cores' weight memory), first, or Einsum index ranges like \"0-10,11-21\"";
  StackSpec spec;
  if (text == "auto") return spec;
  if (text == "first") {
    spec.kind = StackSpec::Kind::First;
    return spec;
  }
  if (text.rfind("auto:", 0) == 0) {
    const std::string f = text.substr(5);
    size_t used = 0;
    double v = 0;
    try {
      v = std::stod(f, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (f.empty() || used != f.size() || !(v > 0) || !std::isfinite(v))
      throw InputError({}, key, fmt::format("'{}': the factor of auto:F must be a number > 0; expected {}", text, forms));
    spec.capacity_scale = v;
    return spec;
  }
  spec.kind = StackSpec::Kind::Ranges;
  size_t a = 0;
  while (a <= text.size()) {
    size_t b = text.find(',', a);
    if (b == std::string::npos) b = text.size();
    const std::string item = text.substr(a, b - a);
    a = b + 1;
    const auto dash = item.find('-');
    try {
      size_t used = 0;
      const int lo = std::stoi(item, &used);
      int hi = lo;
      if (dash != std::string::npos) {
        if (used != dash) throw std::invalid_argument(item);
        hi = std::stoi(item.substr(dash + 1), &used);
        if (used != item.size() - dash - 1) throw std::invalid_argument(item);
      } else if (used != item.size()) {
        throw std::invalid_argument(item);
      }
      if (lo < 0 || hi < lo) throw std::invalid_argument(item);
      std::vector<int> st;
      for (int i = lo; i <= hi; ++i) st.push_back(i);
      spec.ranges.push_back(std::move(st));
    } catch (const std::exception&) {
      throw InputError({}, key, fmt::format("'{}' in '{}'; expected {}", item, text, forms));
    }
  }
  return spec;
}

std::vector<std::vector<int>> layer_stacks(const Workload& w, const StackSpec& spec, int64_t weight_capacity_bits) {
  switch (spec.kind) {
    case StackSpec::Kind::Ranges: return layer_stacks_manual(w, spec.ranges);
    case StackSpec::Kind::First: return layer_stacks_auto(w, weight_capacity_bits, true);
    case StackSpec::Kind::Auto: break;
  }
  if (weight_capacity_bits <= 0 || spec.capacity_scale == 1) return layer_stacks_auto(w, weight_capacity_bits, false);
  // A factor so small that no weight fits still cuts before every weighted layer (at least 1 bit).
  const double scaled = std::round(double(weight_capacity_bits) * spec.capacity_scale);
  const int64_t cap = scaled >= 9.2e18 ? std::numeric_limits<int64_t>::max() : std::max<int64_t>(1, int64_t(scaled));
  return layer_stacks_auto(w, cap, false);
}

std::vector<std::vector<int64_t>> tensor_bounds(const Workload& w) {
  std::vector<std::vector<int64_t>> b(w.tensors.size());
  for (size_t i = 0; i < w.einsums.size(); ++i) {
    const Einsum& e = w.einsums[i];
    int64_t ext[kMaxRanks];
    for (size_t r = 0; r < e.ranks.size(); ++r) ext[r] = e.ranks[r].size;
    for (const TensorAccess& ta : e.tensors) {
      const int t = w.tensor_index(ta.name);
      const bool produced = w.tensors[t].producer >= 0;
      if (produced && ta.role != TensorRole::Output) continue;
      auto& bt = b[t];
      bt.resize(ta.dims.size(), 0);
      for (size_t d = 0; d < ta.dims.size(); ++d)
        bt[d] = std::max(bt[d], Einsum::dim_extent(ta.dims[d], ext));
    }
  }
  return b;
}

TileSet generate_tiles(const Workload& w, const TilingOptions& opt) {
  const int n = static_cast<int>(w.einsums.size());
  if (!opt.layers.empty() && opt.layers.size() != w.einsums.size())
    throw InputError({}, "layers",
                     fmt::format("has {} entries; expected none or one per Einsum ({})", opt.layers.size(), n));
  TileSet ts;
  ts.stacks = opt.stacks.empty() ? layer_stacks_lbl(w) : opt.stacks;
  check_stack_cover(w, ts.stacks);
  std::vector<int> stack_of(n, 0);
  for (size_t s = 0; s < ts.stacks.size(); ++s) {
    std::sort(ts.stacks[s].begin(), ts.stacks[s].end());
    for (int e : ts.stacks[s]) stack_of[e] = static_cast<int>(s);
  }
  const auto bounds = tensor_bounds(w);

  // Resolve every layer's loops first, so the arrays are sized once.
  std::vector<std::vector<Loop>> loops(n);
  std::vector<int64_t> n_intra(n, 1), n_inter(n, 1);
  std::vector<int> n_intra_loops(n, 0);
  size_t total_tiles = 0, total_ranges = 0, total_accesses = 0;
  for (int i = 0; i < n; ++i) {
    const Einsum& e = w.einsums[i];
    if (!opt.layers.empty()) {
      const LayerTiling& lt = opt.layers[i];
      const bool fused = ts.stacks[stack_of[i]].size() > 1;
      std::vector<int> used;
      auto add = [&](const TileSplit& sp, const char* kind, bool keep) {
        const std::string key = fmt::format("layers[{}].{}", i, kind);
        const int r = e.rank_index(sp.rank);
        if (r < 0)
          throw InputError({}, key, "Einsum '" + e.name + "' has no rank '" + sp.rank + "'" +
                                        did_you_mean(sp.rank, rank_names(e)));
        if (std::find(used.begin(), used.end(), r) != used.end())
          throw InputError({}, key, "rank '" + sp.rank + "' of '" + e.name + "' is split twice");
        if (sp.parts < 0)
          throw InputError({}, key, fmt::format("parts {} is negative; expected >= 1, or 0 for one "
                                                "tile per index", sp.parts));
        if (sp.size < 0)
          throw InputError({}, key, fmt::format("size {} is negative; expected a tile size >= 1, or 0 "
                                                "to cut by parts", sp.size));
        used.push_back(r);
        if (!keep) return;
        const int64_t size = e.ranks[r].size;
        const int64_t parts = sp.size > 0 ? (size + sp.size - 1) / sp.size : sp.parts == 0 ? size : sp.parts;
        Loop l{r, (size + parts - 1) / parts, parts};
        if (opt.remainder == Remainder::Ragged) l.count = (size + l.tile - 1) / l.tile;
        loops[i].push_back(l);
      };
      for (const auto& sp : lt.intra) add(sp, "intra", fused);
      n_intra_loops[i] = static_cast<int>(loops[i].size());
      for (const auto& sp : lt.inter) add(sp, "inter", true);
    }
    for (int k = 0; k < static_cast<int>(loops[i].size()); ++k)
      (k < n_intra_loops[i] ? n_intra[i] : n_inter[i]) *= loops[i][k].count;
    // Ranges are 32-bit: every rank (padded) and every tensor dimension must fit.
    constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
    for (const auto& r : e.ranks)
      if (2 * r.size > kMax)
        throw InputError({}, fmt::format("layers[{}]", i),
                         fmt::format("rank '{}' of '{}' has {} indices; tiles support below 2^30", r.name,
                                     e.name, r.size));
    for (const auto& ta : e.tensors)
      for (int64_t b : bounds[w.tensor_index(ta.name)])
        if (b > kMax)
          throw InputError({}, fmt::format("layers[{}]", i),
                           fmt::format("tensor '{}' has a dimension of {}; tiles support below 2^31", ta.name, b));
    const size_t nt = static_cast<size_t>(n_intra[i] * n_inter[i]);
    size_t dims = 0;
    for (const auto& ta : e.tensors) dims += ta.dims.size();
    total_tiles += nt;
    total_ranges += nt * (e.ranks.size() + dims);
    total_accesses += nt * e.tensors.size();
  }
  if (total_tiles > static_cast<size_t>(std::numeric_limits<int>::max()) ||
      total_ranges > std::numeric_limits<uint32_t>::max() ||
      total_accesses > std::numeric_limits<uint32_t>::max())
    throw InputError({}, "layers", fmt::format("the tiling gives {} CTs; too many to index", total_tiles));
  ts.tiles.reserve(total_tiles);
  ts.ranges.reserve(total_ranges);
  ts.accesses.reserve(total_accesses);
  advise_huge_pages(ts.tiles);
  advise_huge_pages(ts.ranges);
  advise_huge_pages(ts.accesses);
  populate_pages(ts.tiles.data(), total_tiles * sizeof(Tile));
  populate_pages(ts.ranges.data(), total_ranges * sizeof(Range));
  populate_pages(ts.accesses.data(), total_accesses * sizeof(TileAccess));
  ts.layer_first.reserve(n + 1);
  ts.layer_groups.reserve(n);

  for (int i = 0; i < n; ++i) {
    const Einsum& e = w.einsums[i];
    const int nr = static_cast<int>(e.ranks.size());
    ts.layer_first.push_back(static_cast<int>(ts.tiles.size()));
    ts.layer_groups.push_back(static_cast<int>(n_inter[i]));
    // Per access: tensor index, whether offsets apply (only where a producer fixes the coordinates).
    struct Acc {
      int tensor;
      bool shifted;
    };
    std::vector<Acc> acc;
    for (const auto& ta : e.tensors) {
      const int t = w.tensor_index(ta.name);
      acc.push_back({t, w.tensors[t].producer >= 0 && !ta.offset.empty()});
    }
    const auto& lp = loops[i];
    const int64_t count = n_intra[i] * n_inter[i];
    int64_t idx[kMaxRanks * 2];
    for (int64_t sub = 0; sub < count; ++sub) {
      // Mixed-radix decode of the sub id, innermost (last) loop fastest.
      int64_t rest = sub;
      for (int k = static_cast<int>(lp.size()) - 1; k >= 0; --k) {
        idx[k] = rest % lp[k].count;
        rest /= lp[k].count;
      }
      Tile t;
      t.layer = i;
      t.sub_id = static_cast<int>(sub);
      t.group = static_cast<int>(sub % n_inter[i]);
      t.stack = stack_of[i];
      t.ranks = static_cast<uint32_t>(ts.ranges.size());
      t.accesses = static_cast<uint32_t>(ts.accesses.size());
      t.n_ranks = static_cast<uint16_t>(nr);
      t.n_accesses = static_cast<uint16_t>(e.tensors.size());
      struct {
        int64_t lo, hi;
      } eff[kMaxRanks];  // the real work: rank ranges clipped to the rank
      bool empty = false;
      int64_t lo[kMaxRanks], hi[kMaxRanks];  // the CT's rank ranges, padding included
      for (int r = 0; r < nr; ++r) lo[r] = 0, hi[r] = e.ranks[r].size;
      for (size_t k = 0; k < lp.size(); ++k) {
        const int r = lp[k].rank;
        lo[r] = idx[k] * lp[k].tile;
        hi[r] = lo[r] + lp[k].tile;
        if (opt.remainder == Remainder::Ragged) hi[r] = std::min(hi[r], e.ranks[r].size);
      }
      for (int r = 0; r < nr; ++r) {
        ts.ranges.push_back({static_cast<int32_t>(lo[r]), static_cast<int32_t>(hi[r])});
        eff[r] = {lo[r], std::min(hi[r], e.ranks[r].size)};
        empty |= eff[r].hi <= eff[r].lo;
      }
      for (size_t a = 0; a < e.tensors.size(); ++a) {
        const TensorAccess& ta = e.tensors[a];
        const auto& bound = bounds[acc[a].tensor];
        TileAccess out{acc[a].tensor, static_cast<uint32_t>(ts.ranges.size()), 0, 0, ta.role,
                       static_cast<uint8_t>(ta.dims.size())};
        int64_t vol = empty ? 0 : 1, stream_vol = 1;
        for (size_t d = 0; d < ta.dims.size(); ++d) {
          int64_t blo = acc[a].shifted ? ta.offset[d] : 0, bhi = blo + 1, nominal = 1;
          for (const auto& term : ta.dims[d]) {
            blo += term.coeff * eff[term.rank].lo;
            bhi += term.coeff * (eff[term.rank].hi - 1);
            nominal += term.coeff * (hi[term.rank] - lo[term.rank] - 1);
          }
          stream_vol *= nominal;
          blo = std::max<int64_t>(blo, 0);
          bhi = std::min(bhi, bound[d]);
          if (empty || bhi <= blo) blo = bhi = 0;
          vol *= bhi - blo;
          ts.ranges.push_back({static_cast<int32_t>(blo), static_cast<int32_t>(bhi)});
        }
        out.bits = vol * ta.bits_per_value;
        out.stream_bits = stream_vol * ta.bits_per_value;
        ts.accesses.push_back(out);
      }
      ts.tiles.push_back(t);
    }
  }
  ts.layer_first.push_back(static_cast<int>(ts.tiles.size()));

  // Scheduling order (Stream classic, scheduling_order_generation): stacks in sequence; within a
  // fused stack, slot by slot over min(#intra tiles) slots, each layer in order contributing its
  // share of intra tiles (all their inter-core tiles, sub ids ascending).
  ts.order.reserve(ts.tiles.size());
  for (const auto& stack : ts.stacks) {
    int64_t slots = std::numeric_limits<int64_t>::max();
    for (int e : stack) slots = std::min(slots, n_intra[e]);
    for (int64_t s = 0; s < slots; ++s)
      for (int e : stack) {
        const int64_t a0 = s * n_intra[e] / slots, a1 = (s + 1) * n_intra[e] / slots;
        for (int64_t sub = a0 * n_inter[e]; sub < a1 * n_inter[e]; ++sub)
          ts.order.push_back(ts.layer_first[e] + static_cast<int>(sub));
      }
  }
  for (size_t p = 0; p < ts.order.size(); ++p) ts.tiles[ts.order[p]].priority = static_cast<int64_t>(p);
  return ts;
}

}  // namespace mapfuse
