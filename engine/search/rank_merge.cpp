#include "engine/search/rank_merge.hpp"

#include <numeric>
#include <stdexcept>

namespace mapfuse {

namespace {

// Whether some fan-out of `c` names rank `name` (it then accepts that rank and not its peers).
bool named_by_fanout(const Core& c, const std::string& name) {
  for (const Core* core : {&c, c.vector_core.get()}) {
    if (!core) continue;
    for (const Level& lv : core->levels)
      for (const auto* list : {&lv.fanout.x_ranks, &lv.fanout.y_ranks})
        for (const std::string& n : *list)
          if (n == name) return true;
  }
  return false;
}

}  // namespace

RankMerge equivalent_ranks(const Einsum& e, const Core& c, int64_t max_size) {
  const int R = static_cast<int>(e.ranks.size()), T = static_cast<int>(e.tensors.size());
  // Per rank, the tensors indexing it; -1 where the rank may not be merged.
  std::vector<int> pattern(static_cast<size_t>(R), 0);
  for (int t = 0; t < T; ++t)
    for (const Projection& d : e.tensors[t].dims) {
      if (d.size() != 1 || d[0].coeff != 1) return {};  // strided or summed dimensions: keep the ranks apart
      int& p = pattern[static_cast<size_t>(d[0].rank)];
      if (p >= 0 && (p >> t & 1)) return {};  // one rank twice in a tensor (a diagonal)
      if (p >= 0) p |= 1 << t;
    }
  for (int r = 0; r < R; ++r)
    if (named_by_fanout(c, e.ranks[r].name)) pattern[static_cast<size_t>(r)] = -1;
  RankMerge m;
  std::vector<int64_t> product;  // per group
  std::vector<int> open(static_cast<size_t>(1) << T, -1);  // per pattern: the group still taking ranks
  bool merged = false;
  for (int r = 0; r < R; ++r) {
    const int p = pattern[static_cast<size_t>(r)];
    const int64_t size = e.ranks[static_cast<size_t>(r)].size;
    int g = p >= 0 ? open[static_cast<size_t>(p)] : -1;
    if (g >= 0 && product[static_cast<size_t>(g)] > max_size / size) g = -1;
    if (g < 0) {
      g = static_cast<int>(m.groups.size());
      m.groups.emplace_back();
      product.push_back(1);
      if (p >= 0) open[static_cast<size_t>(p)] = g;
    } else {
      merged = true;
    }
    product[static_cast<size_t>(g)] *= size;
    m.groups[static_cast<size_t>(g)].push_back(r);
  }
  if (!merged) return {};
  return m;
}

Einsum merge_ranks(const Einsum& e, const RankMerge& m) {
  if (m.identity()) return e;
  std::vector<int> group_of(e.ranks.size());
  Einsum out;
  out.name = e.name;
  out.op = e.op;
  for (size_t g = 0; g < m.groups.size(); ++g) {
    Rank r{{}, 1};
    for (int q : m.groups[g]) {
      group_of[static_cast<size_t>(q)] = static_cast<int>(g);
      r.name += (r.name.empty() ? "" : "*") + e.ranks[static_cast<size_t>(q)].name;
      r.size *= e.ranks[static_cast<size_t>(q)].size;
    }
    out.ranks.push_back(std::move(r));
  }
  for (const TensorAccess& t : e.tensors) {
    TensorAccess x{t.name, t.role, {}, t.bits_per_value};
    uint32_t seen = 0;
    for (const Projection& d : t.dims) {
      const int g = group_of[static_cast<size_t>(d[0].rank)];
      if (seen >> g & 1) continue;
      seen |= 1u << g;
      x.dims.push_back({{g, 1}});
    }
    out.tensors.push_back(std::move(x));
  }
  return out;
}

Mapping split_ranks(const Mapping& merged, const RankMerge& m, const Einsum& original) {
  if (m.identity()) return merged;
  std::vector<int64_t> left(original.ranks.size());
  for (size_t r = 0; r < left.size(); ++r) left[r] = original.ranks[r].size;
  Mapping out;
  out.levels.resize(merged.levels.size());
  for (size_t l = merged.levels.size(); l-- > 0;) {  // outermost first: the outer loops take the large factors
    const LevelMapping& in = merged.levels[l];
    LevelMapping& lv = out.levels[l];
    lv.keep = in.keep;
    for (const Loop& loop : in.loops) {
      int64_t f = loop.factor;
      for (int r : m.groups.at(static_cast<size_t>(loop.rank))) {
        const int64_t g = std::gcd(f, left[static_cast<size_t>(r)]);
        if (g == 1) continue;
        lv.loops.push_back({r, g, loop.kind});
        left[static_cast<size_t>(r)] /= g;
        f /= g;
      }
      if (f != 1) throw std::logic_error("split_ranks: a loop's factor does not divide what is left of its ranks");
    }
  }
  for (size_t r = 0; r < left.size(); ++r)
    if (left[r] != 1) throw std::logic_error("split_ranks: the loops do not cover rank " + original.ranks[r].name);
  return out;
}

}  // namespace mapfuse
