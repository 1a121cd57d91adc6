// Loop orders: which temporal orders of a level cost the same (order_signature), one order per
// class cached per (level, ranks, tensors kept below), their compact codes for merged buckets,
// and the minimal orders the completion bounds must try.
#include <algorithm>
#include <bit>

#include "engine/search/tile_search/worker_state.hpp"

namespace mapfuse {

// A level's loop order matters to the cost model only through the refills of the tiles of
// tensors kept below it. For one tensor, walking the level's loops from the inside: a loop over a
// rank that moves only window-free dimensions ends every reuse (its step can never be undone, and
// a tile moved by a full extent shares nothing), so the order of the loops outside the innermost
// such loop is irrelevant; inside it, what matters is the sequence of sliding-window ranks and,
// between them, the sets of ranks the tensor does not index (only their product counts). Orders
// with the same signature for every tensor cost the same.
std::vector<int> TileSearch::order_signature(const std::vector<int>& order, uint32_t below) const {
  std::vector<int> sig;
  for (int t = 0; t < T; ++t) {
    if (!(below >> t & 1)) continue;
    sig.push_back(-1 - t);
    if (!plain[t]) {  // no reduction for this tensor: the whole order counts
      sig.insert(sig.end(), order.begin(), order.end());
      continue;
    }
    int irrelevant_set = 0;
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      const int cls = rank_class[t][*it];
      if (cls == 0) {
        irrelevant_set |= 1 << *it;
        continue;
      }
      sig.push_back(1000 + irrelevant_set);
      irrelevant_set = 0;
      if (cls == 1) break;  // nothing outside a window-free step matters
      sig.push_back(*it);
    }
    sig.push_back(1000 + irrelevant_set);
  }
  return sig;
}

void TileSearch::loop_ranks(int l, uint32_t iterated, std::vector<int>& out) const {
  out.clear();
  const LevelConstraints* lc = constraint(l);
  if (lc && lc->order) {
    for (int r : *lc->order)
      if (iterated >> r & 1) out.push_back(r);
  } else {
    for (int r = 0; r < R; ++r)
      if (iterated >> r & 1) out.push_back(r);
  }
}

const std::vector<std::vector<int>>& TileWorker::State::order_classes(int l, const std::vector<int>& ranks, uint32_t below) {
  uint32_t iterated = 0;
  for (int r : ranks) iterated |= 1u << r;
  const size_t fast = (static_cast<size_t>(l) << (kMaxTensors + kMaxRanks)) | (below << kMaxRanks) | iterated;
  if (const auto* hit = order_fast[fast]) return *hit;
  const LevelConstraints* lc = s->constraint(l);
  const bool fixed = lc && lc->order;
  const uint64_t key = (uint64_t(l) << 40) | (uint64_t(below) << 32) | (uint64_t(fixed) << 31) | iterated;
  auto [it, fresh] = orders.try_emplace(key);
  if (fresh) {
    std::vector<int> order = ranks;
    std::vector<std::vector<int>> seen;
    if (fixed) {
      it->second.push_back(order);
    } else {
      do {
        if (s->spec_.reduce_orders) {
          std::vector<int> sig = s->order_signature(order, below);
          if (std::find(seen.begin(), seen.end(), sig) != seen.end()) continue;
          seen.push_back(std::move(sig));
        }
        it->second.push_back(order);
      } while (std::next_permutation(order.begin(), order.end()));
      if (s->spec_.bound_scalar && s->spec_.reduce_orders) drop_dominated_orders(it->second, below);
    }
  }
  order_fast[fast] = &it->second;
  return it->second;
}

// Branch and bound needs only one best mapping, so a class whose every refill is at least another
// class's can go. Per tensor kept below, a signature that is one set of ranks the tensor does not
// index (its innermost loop over one of its ranks moves only window-free dimensions, or there is
// none) refills the tile once per iteration of the level's other loops: a larger set (each of its
// loops has a factor above 1) refills strictly less often, and so costs no more energy and no
// more time (every count of the model is monotone in the refills). Other signatures (sliding
// windows) are compared only for equality. A class is dropped if another one is at least as good
// for every tensor and better for one; the first of equals stays, so the result is deterministic.
void TileWorker::State::drop_dominated_orders(std::vector<std::vector<int>>& classes, uint32_t below) const {
  if (classes.size() < 2) return;
  struct PerTensor {
    bool one_set = false;
    int set = 0;
    std::vector<int> sig;
  };
  std::vector<std::vector<PerTensor>> sigs;
  for (const std::vector<int>& order : classes) {
    const std::vector<int> sig = s->order_signature(order, below);
    std::vector<PerTensor> per;
    for (size_t i = 0; i < sig.size();) {
      size_t j = i + 1;
      while (j < sig.size() && sig[j] >= 0) ++j;
      PerTensor pt;
      pt.sig.assign(sig.begin() + static_cast<std::ptrdiff_t>(i), sig.begin() + static_cast<std::ptrdiff_t>(j));
      const int t = -1 - sig[i];
      // order_signature closes a window-free step with an empty set: [t, S, {}]; no loop over
      // the tensor's ranks at all leaves [t, S].
      pt.one_set = s->plain[static_cast<size_t>(t)] && (j == i + 2 || (j == i + 3 && sig[i + 2] == 1000));
      if (pt.one_set) pt.set = sig[i + 1] - 1000;
      per.push_back(std::move(pt));
      i = j;
    }
    sigs.push_back(std::move(per));
  }
  // 0: incomparable, 1: a at least as good as b for every tensor, 2: and strictly better for one.
  auto compare = [&](const std::vector<PerTensor>& a, const std::vector<PerTensor>& b) {
    if (a.size() != b.size()) return 0;
    bool strict = false;
    for (size_t t = 0; t < a.size(); ++t) {
      if (a[t].one_set && b[t].one_set) {
        if ((a[t].set & b[t].set) != b[t].set) return 0;
        strict = strict || a[t].set != b[t].set;
      } else if (a[t].sig != b[t].sig) {
        return 0;
      }
    }
    return strict ? 2 : 1;
  };
  std::vector<bool> drop(classes.size(), false);
  for (size_t i = 0; i < classes.size(); ++i)
    for (size_t j = 0; j < classes.size() && !drop[i]; ++j)
      if (j != i && !drop[j] && compare(sigs[j], sigs[i]) == 2) drop[i] = true;
  size_t n = 0;
  for (size_t i = 0; i < classes.size(); ++i)
    if (!drop[i]) {
      if (n != i) classes[n] = std::move(classes[i]);  // a vector's self-move would empty it
      ++n;
    }
  classes.resize(n);
}

const std::vector<uint32_t>& TileWorker::State::codes_of(int l, const std::vector<std::vector<int>>& classes) {
  auto [it, fresh] = code_cache.try_emplace(&classes);
  if (fresh)
    for (const std::vector<int>& ord : classes) {
      uint32_t code = 0, used = 0;
      int shift = 0;
      for (int r : ord) code |= uint32_t(r + 1) << shift, shift += 4, used |= 1u << r;
      for (int r = 0; r < s->R; ++r)
        if ((s->loopable[l] >> r & 1) && !(used >> r & 1)) code |= uint32_t(r + 1) << shift, shift += 4;
      it->second.push_back(code);
    }
  return it->second;
}

const std::vector<std::array<int8_t, kMaxRanks>>& TileWorker::State::minimal_orders(uint32_t ranks) {
  auto [it, fresh] = bound_orders.try_emplace(ranks);
  if (!fresh) return it->second;
  const int T = s->T;
  std::array<int, kMaxRanks> order{};
  int n = 0;
  for (int r = 0; r < s->R; ++r)
    if (ranks >> r & 1) order[n++] = r;
  struct Runs {
    std::array<int8_t, kMaxRanks> order{};
    std::array<uint32_t, kMaxTensors> run{};
    int size = 0;  // sum of the runs' lengths: an order can only be dominated by a shorter or equal one
  };
  std::vector<Runs> all;
  do {
    Runs x;
    for (int t = 0; t < T; ++t) {
      uint32_t prefix = 0;
      for (int i = 0; i < n; ++i) {
        prefix |= 1u << order[i];
        if (s->plan_.tensors[t].relevant_ranks >> order[i] & 1) x.run[t] = prefix;
      }
      x.size += std::popcount(x.run[t]);
    }
    for (int i = 0; i < n; ++i) x.order[i] = static_cast<int8_t>(order[i]);
    all.push_back(x);
  } while (std::next_permutation(order.begin(), order.begin() + n));
  std::stable_sort(all.begin(), all.end(), [](const Runs& a, const Runs& b) { return a.size < b.size; });
  std::vector<Runs> kept;
  for (const Runs& x : all) {
    bool dominated = false;
    for (const Runs& k : kept) {
      bool within = true;
      for (int t = 0; t < T && within; ++t) within = (k.run[t] & ~x.run[t]) == 0;
      if ((dominated = within)) break;
    }
    if (!dominated) kept.push_back(x);
  }
  for (const Runs& k : kept) it->second.push_back(k.order);
  return it->second;
}

size_t TileWorker::State::top_orders(const std::array<int64_t, kMaxRanks>& rest) {
  const int top = s->top;
  uint32_t below = 0;
  for (int l = 0; l < top; ++l) below |= chosen[l].keep;
  uint32_t iterated = 0;
  for (int r = 0; r < s->R; ++r) iterated |= uint32_t(rest[r] > 1) << r;
  s->loop_ranks(top, iterated, top_ranks);
  return order_classes(top, top_ranks, below).size();
}

}  // namespace mapfuse
