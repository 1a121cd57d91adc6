#include "engine/search/stream/waco.hpp"

#include <fmt/format.h>

#include <CbcModel.hpp>
#include <CoinPackedMatrix.hpp>
#include <OsiClpSolverInterface.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <numeric>
#include <set>

#include "engine/common/error.hpp"

namespace mapfuse {
namespace {

const char* const kKey = "allocation.waco";

// A MILP as plain arrays: columns (bounds, cost, integrality) and rows as triplets.
struct Milp {
  std::vector<double> lb, ub, obj;
  std::vector<char> integer;
  std::vector<double> row_lb, row_ub;
  std::vector<int> row_of, col_of;
  std::vector<double> value;

  int col(double lo, double hi, double cost, bool is_integer) {
    lb.push_back(lo);
    ub.push_back(hi);
    obj.push_back(cost);
    integer.push_back(is_integer);
    return int(lb.size()) - 1;
  }
  int binary(double cost = 0) { return col(0, 1, cost, true); }
  void row(const std::vector<std::pair<int, double>>& terms, double lo, double hi) {
    const int r = int(row_lb.size());
    for (const auto& [c, v] : terms) {
      if (v == 0) continue;
      row_of.push_back(r);
      col_of.push_back(c);
      value.push_back(v);
    }
    row_lb.push_back(lo);
    row_ub.push_back(hi);
  }
};

constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace

int64_t core_weight_capacity_bits(const Core& c) {
  for (int l = int(c.levels.size()) - 1; l >= 0; --l) {
    const Level& lv = c.levels[size_t(l)];
    if (lv.unbounded()) continue;  // off-chip
    if (lv.may_keep & role_bit(TensorRole::Weight)) return lv.entries * lv.word_bits * lv.instances;
  }
  return 0;
}

namespace {

// Eq. 12, and the overlap o it subtracts (N - 1) times.
double eq12(const WacoInstance& inst, std::span<const int> slot, const std::vector<std::vector<int>>& cores,
            std::span<const int> choice, double* overlap_out) {
  const size_t n = slot.size();
  std::vector<double> l(n, 0);
  std::vector<int> first(size_t(inst.cores), int(n)), last(size_t(inst.cores), -1);
  for (size_t i = 0; i < n; ++i) {
    const int c = choice[size_t(inst.layer_of_tile[i])];
    for (int j : cores[i]) {
      l[size_t(slot[i])] = std::max(l[size_t(slot[i])], inst.latency[i][size_t(j)][size_t(c)]);
      first[size_t(j)] = std::min(first[size_t(j)], slot[i]);
      last[size_t(j)] = std::max(last[size_t(j)], slot[i]);
    }
  }
  double total = 0;
  for (double x : l) total += x;
  double overlap = kInf;
  for (int j = 0; j < inst.cores; ++j) {
    double idle = 0;
    if (last[size_t(j)] < 0) {
      idle = total;  // an unused core is idle for the whole iteration, once
    } else {
      for (int s = 0; s < first[size_t(j)]; ++s) idle += l[size_t(s)];
      for (size_t s = size_t(last[size_t(j)]) + 1; s < n; ++s) idle += l[s];
    }
    overlap = std::min(overlap, idle);
  }
  if (inst.cores == 0) overlap = 0;
  if (overlap_out) *overlap_out = overlap;
  const double N = double(inst.iterations);
  return N * total - (N - 1) * overlap;
}

}  // namespace

double waco_latency(const WacoInstance& inst, std::span<const int> slot, const std::vector<std::vector<int>>& cores,
                    std::span<const int> choice) {
  return eq12(inst, slot, cores, choice, nullptr);
}

namespace {

// A discrete allocation of a stack's tiles.
struct Allocation {
  std::vector<int> slot;
  std::vector<std::vector<int>> cores;
  std::vector<int> choice;
};

// One tile per slot in index order (a topological order), each layer split as far as allowed over
// its fastest cores that still hold its weights. False when some tile finds too few such cores.
bool greedy_allocation(const WacoInstance& inst, Allocation& a) {
  const int n = int(inst.layer_of_tile.size()), J = inst.cores, L = int(inst.choices.size());
  a.slot.resize(size_t(n));
  a.cores.assign(size_t(n), {});
  a.choice.assign(size_t(L), 0);
  for (int l = 0; l < L; ++l) a.choice[size_t(l)] = int(inst.choices[size_t(l)].size()) - 1;
  std::vector<double> load(static_cast<size_t>(J), 0);
  std::vector<std::set<int>> layers_on(static_cast<size_t>(J));
  // Slots in a topological order of the dependencies (index order where it is one).
  std::vector<std::vector<int>> succ(static_cast<size_t>(n));
  std::vector<int> indegree(size_t(n), 0);
  for (const auto& [i, i2] : inst.deps) {
    succ[size_t(i)].push_back(i2);
    ++indegree[size_t(i2)];
  }
  std::set<int> ready;
  for (int i = 0; i < n; ++i)
    if (indegree[size_t(i)] == 0) ready.insert(i);
  std::vector<int> order;
  while (!ready.empty()) {
    const int i = *ready.begin();
    ready.erase(ready.begin());
    order.push_back(i);
    for (int i2 : succ[size_t(i)])
      if (--indegree[size_t(i2)] == 0) ready.insert(i2);
  }
  if (int(order.size()) != n) return false;  // a cycle: no allocation
  for (size_t pos = 0; pos < order.size(); ++pos) {
    const int i = order[pos];
    a.slot[size_t(i)] = int(pos);
    const int l = inst.layer_of_tile[size_t(i)], k = a.choice[size_t(l)];
    const double share = inst.weight_bits[size_t(l)] / inst.choices[size_t(l)][size_t(k)];
    std::vector<int> order;
    for (int j = 0; j < J; ++j)
      if (std::isfinite(inst.latency[size_t(i)][size_t(j)][0])) order.push_back(j);
    std::stable_sort(order.begin(), order.end(), [&](int p, int r) {
      return inst.latency[size_t(i)][size_t(p)][size_t(k)] < inst.latency[size_t(i)][size_t(r)][size_t(k)];
    });
    for (int j : order) {
      if (int(a.cores[size_t(i)].size()) == inst.choices[size_t(l)][size_t(k)]) break;
      const bool held = layers_on[size_t(j)].count(l) > 0;
      if (inst.weight_constraint && !held && load[size_t(j)] + share > inst.capacity_bits[size_t(j)]) continue;
      if (!held) load[size_t(j)] += share;
      layers_on[size_t(j)].insert(l);
      a.cores[size_t(i)].push_back(j);
    }
    if (int(a.cores[size_t(i)].size()) != inst.choices[size_t(l)][size_t(k)]) return false;
    std::sort(a.cores[size_t(i)].begin(), a.cores[size_t(i)].end());
  }
  return true;
}

// Whether an allocation keeps, on every core, the weights of the layers it runs there (Eq. 5: a
// layer's W / p once per core, however many of its tiles run there).
bool weights_fit(const WacoInstance& inst, const Allocation& a) {
  if (!inst.weight_constraint) return true;
  std::vector<double> load(static_cast<size_t>(inst.cores), 0);
  std::vector<char> on(inst.choices.size() * static_cast<size_t>(inst.cores), 0);
  for (size_t i = 0; i < a.cores.size(); ++i) {
    const int l = inst.layer_of_tile[i];
    for (int j : a.cores[i]) {
      char& seen = on[size_t(l) * size_t(inst.cores) + size_t(j)];
      if (seen) continue;
      seen = 1;
      load[size_t(j)] += inst.weight_bits[size_t(l)] / inst.choices[size_t(l)][size_t(a.choice[size_t(l)])];
    }
  }
  for (int j = 0; j < inst.cores; ++j)
    if (load[size_t(j)] > inst.capacity_bits[size_t(j)] * (1 + 1e-12)) return false;
  return true;
}

// Whether an allocation satisfies the model's rows: one choice per layer and its p capable cores
// per tile, slots in range and in dependency order, one tile per core and slot (Eq. 1), weights
// (Eq. 5). What CBC returns is checked with it before use.
bool allocation_valid(const WacoInstance& inst, const Allocation& a) {
  const size_t n = inst.layer_of_tile.size();
  if (a.slot.size() != n || a.cores.size() != n || a.choice.size() != inst.choices.size()) return false;
  for (size_t l = 0; l < a.choice.size(); ++l)
    if (a.choice[l] < 0 || size_t(a.choice[l]) >= inst.choices[l].size()) return false;
  std::set<std::pair<int, int>> core_slot;
  for (size_t i = 0; i < n; ++i) {
    const int l = inst.layer_of_tile[i], k = a.choice[size_t(l)];
    if (a.slot[i] < 0 || size_t(a.slot[i]) >= n) return false;
    if (int(a.cores[i].size()) != inst.choices[size_t(l)][size_t(k)]) return false;
    for (int j : a.cores[i])
      if (j < 0 || j >= inst.cores || !std::isfinite(inst.latency[i][size_t(j)][size_t(k)]) ||
          !core_slot.insert({j, a.slot[i]}).second)
        return false;
  }
  for (const auto& [i, i2] : inst.deps)
    if (a.slot[size_t(i)] >= a.slot[size_t(i2)]) return false;
  return weights_fit(inst, a);
}

// Local search from a feasible allocation, slots kept: per layer each parallelism with its tiles
// on their fastest cores, and per tile each window of p consecutive capable cores (every start)
// and its p fastest; the first move that lowers Eq. 12, or keeps it and uses fewer cores, and fits
// the weights is taken, until a pass changes nothing (at most 50 passes). CBC's start, and the
// polish of what CBC returns (never a higher Eq. 12).
void improve_allocation(const WacoInstance& inst, Allocation& a) {
  const int n = int(inst.layer_of_tile.size()), J = inst.cores, L = int(inst.choices.size());
  std::vector<std::vector<int>> capable(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < J; ++j)
      if (std::isfinite(inst.latency[size_t(i)][size_t(j)][0])) capable[size_t(i)].push_back(j);
  auto fastest = [&](int i, int k, int p) {
    std::vector<int> c = capable[size_t(i)];
    std::stable_sort(c.begin(), c.end(), [&](int x, int y) {
      return inst.latency[size_t(i)][size_t(x)][size_t(k)] < inst.latency[size_t(i)][size_t(y)][size_t(k)];
    });
    c.resize(size_t(p));
    std::sort(c.begin(), c.end());
    return c;
  };
  double best = waco_latency(inst, a.slot, a.cores, a.choice);
  // Eq. 1: no core runs two tiles of one slot (CBC's allocations may share slots).
  auto one_per_core_and_slot = [&](const Allocation& b, int i) {
    for (int t = 0; t < n; ++t)
      if (t != i && b.slot[size_t(t)] == b.slot[size_t(i)])
        for (int j : b.cores[size_t(i)])
          if (std::count(b.cores[size_t(t)].begin(), b.cores[size_t(t)].end(), j)) return false;
    return true;
  };
  // Cores in use summed over tiles: among allocations of equal Eq. 12, fewer (a split that does
  // not shorten the slot only repeats its input reads and transfers: FSRCNN's 3 x 3 layers on
  // stream_t3_8c_0ws_ps tie at p = 1 and p = 6, and p = 6 cost 27 % more EDP).
  auto spread = [&](const Allocation& b) {
    size_t c = 0;
    for (const auto& x : b.cores) c += x.size();
    return c;
  };
  auto try_move = [&](Allocation& b) {
    for (int i = 0; i < n; ++i)
      if (b.cores[size_t(i)] != a.cores[size_t(i)] && !one_per_core_and_slot(b, i)) return false;
    if (!weights_fit(inst, b)) return false;
    const double v = waco_latency(inst, b.slot, b.cores, b.choice);
    const bool better = v < best * (1 - 1e-12), tie = !better && v <= best * (1 + 1e-12);
    if (!better && !(tie && spread(b) < spread(a))) return false;
    best = std::min(best, v);
    a = b;
    return true;
  };
  for (int pass = 0; pass < 50; ++pass) {
    bool improved = false;
    for (int l = 0; l < L; ++l)
      for (size_t k = 0; k < inst.choices[size_t(l)].size(); ++k) {
        if (int(k) == a.choice[size_t(l)]) continue;
        const int p = inst.choices[size_t(l)][k];
        Allocation b = a;
        b.choice[size_t(l)] = int(k);
        bool ok = true;
        for (int i = 0; i < n && ok; ++i)
          if (inst.layer_of_tile[size_t(i)] == l) {
            ok = int(capable[size_t(i)].size()) >= p;
            if (ok) b.cores[size_t(i)] = fastest(i, int(k), p);
          }
        if (ok) improved |= try_move(b);
      }
    for (int i = 0; i < n; ++i) {
      const int l = inst.layer_of_tile[size_t(i)], k = a.choice[size_t(l)], p = inst.choices[size_t(l)][size_t(k)];
      const std::vector<int>& c = capable[size_t(i)];
      if (int(c.size()) < p) continue;
      Allocation b = a;
      b.cores[size_t(i)] = fastest(i, k, p);
      if (b.cores[size_t(i)] != a.cores[size_t(i)]) improved |= try_move(b);
      for (size_t start = 0; start < c.size(); ++start) {
        b = a;
        b.cores[size_t(i)].clear();
        for (int q = 0; q < p; ++q) b.cores[size_t(i)].push_back(c[(start + size_t(q)) % c.size()]);
        std::sort(b.cores[size_t(i)].begin(), b.cores[size_t(i)].end());
        if (b.cores[size_t(i)] != a.cores[size_t(i)]) improved |= try_move(b);
      }
    }
    if (!improved) break;
  }
}

// Classes of identical cores: the same weight memory and the same latency for every tile and
// choice. Relabelling cores within a class changes neither Eq. 12 nor the weights that fit.
// Each class ascending; cores in no class with another are left out.
std::vector<std::vector<int>> identical_core_classes(const WacoInstance& inst) {
  const int J = inst.cores, n = int(inst.layer_of_tile.size());
  std::vector<std::vector<int>> classes;
  std::vector<char> taken(static_cast<size_t>(J), 0);
  for (int j = 0; j < J; ++j) {
    if (taken[size_t(j)]) continue;
    std::vector<int> members{j};
    for (int j2 = j + 1; j2 < J; ++j2) {
      bool same = !taken[size_t(j2)] && inst.capacity_bits[size_t(j)] == inst.capacity_bits[size_t(j2)];
      for (int i = 0; i < n && same; ++i) same = inst.latency[size_t(i)][size_t(j)] == inst.latency[size_t(i)][size_t(j2)];
      if (same) taken[size_t(j2)] = 1, members.push_back(j2);
    }
    if (members.size() > 1) classes.push_back(std::move(members));
  }
  return classes;
}

// Within each class, `from` (members in some order) takes the labels `to` (the same members).
// Returns the relabelling, old label -> new.
std::vector<int> relabel(std::vector<std::vector<int>>& cores,
                         const std::vector<std::pair<std::vector<int>, std::vector<int>>>& maps, int J) {
  std::vector<int> perm(static_cast<size_t>(J));
  std::iota(perm.begin(), perm.end(), 0);
  for (const auto& [from, to] : maps)
    for (size_t q = 0; q < from.size(); ++q) perm[size_t(from[q])] = to[q];
  for (auto& c : cores) {
    for (int& j : c) j = perm[size_t(j)];
    std::sort(c.begin(), c.end());
  }
  return perm;
}

// Relabels identical cores so that, within each class, a lower index starts no later (unused
// last): the MILP's symmetry rows then hold for the allocation, which CBC would otherwise reject
// as a start.
void canonical_labels(const WacoInstance& inst, const std::vector<std::vector<int>>& classes, Allocation& a) {
  std::vector<int> first(static_cast<size_t>(inst.cores), std::numeric_limits<int>::max());
  for (size_t i = 0; i < a.cores.size(); ++i)
    for (int j : a.cores[i]) first[size_t(j)] = std::min(first[size_t(j)], a.slot[i]);
  std::vector<std::pair<std::vector<int>, std::vector<int>>> maps;
  for (const std::vector<int>& members : classes) {
    std::vector<int> by_start = members;
    std::stable_sort(by_start.begin(), by_start.end(), [&](int x, int y) { return first[size_t(x)] < first[size_t(y)]; });
    maps.push_back({std::move(by_start), members});
  }
  relabel(a.cores, maps, inst.cores);
}

// A lower bound on Eq. 12 that needs no LP: the busiest core works at least the total work over
// the cores (each tile's least p x L_ijp), a core works at most one tile per slot and its idle
// time excludes its own work, so lat = N sum l_s - (N - 1) o >= N x that work.
double work_bound(const WacoInstance& inst) {
  if (inst.cores == 0) return 0;
  double work = 0;
  for (size_t i = 0; i < inst.layer_of_tile.size(); ++i) {
    const auto& ch = inst.choices[size_t(inst.layer_of_tile[i])];
    double least = kInf;
    for (const auto& per_core : inst.latency[i])
      for (size_t k = 0; k < ch.size(); ++k) least = std::min(least, ch[k] * per_core[k]);
    if (std::isfinite(least)) work += least;
  }
  return double(inst.iterations) * work / inst.cores;
}

}  // namespace

WacoSolution solve_waco(const WacoInstance& inst, const WacoOptions& opt, const std::string& what) {
  const int n = int(inst.layer_of_tile.size()), J = inst.cores, S = n, L = int(inst.choices.size());
  if (n == 0) return {};
  const double N = double(inst.iterations);
  double big = 0;  // the largest latency: bounds every slot's
  for (const auto& t : inst.latency)
    for (const auto& c : t)
      for (double x : c)
        if (std::isfinite(x)) big = std::max(big, x);

  Milp m;
  // y[i][j][s][k]: tile i runs on core j in slot s with its layer's choice k. Eq. 1's a_ijs is
  // sum_k y; carrying k in the variable linearises Eq. 8's product a_ijs * p_ik exactly and gives
  // the slot latency (Eq. 9) a tight relaxation. x[i][s]: tile i in slot s (Slot_i of Eq. 4).
  std::vector<size_t> ybase(size_t(n) + 1, 0);  // first y column offset of each tile
  for (int i = 0; i < n; ++i)
    ybase[size_t(i) + 1] = ybase[size_t(i)] +
                           size_t(J) * size_t(S) * inst.choices[size_t(inst.layer_of_tile[size_t(i)])].size();
  auto nk = [&](int i) { return int(inst.choices[size_t(inst.layer_of_tile[size_t(i)])].size()); };
  std::vector<int> y(ybase.back()), x(size_t(n) * size_t(S));
  auto Y = [&](int i, int j, int s, int k) {
    return y[ybase[size_t(i)] + (size_t(j) * size_t(S) + size_t(s)) * size_t(nk(i)) + size_t(k)];
  };
  auto runs = [&](int i, int j) { return std::isfinite(inst.latency[size_t(i)][size_t(j)][0]); };
  // A tile has at least `depth` predecessors in a chain before it and `height` successors after
  // it, so its slot lies in [depth, S - 1 - height]: in a stack that is one chain of layers each
  // tile has one possible slot. Fixing the others at 0 is exact and shrinks the LP CBC solves.
  std::vector<int> depth(size_t(n), 0), height(size_t(n), 0);
  {
    std::vector<std::vector<int>> succ(static_cast<size_t>(n)), pred(static_cast<size_t>(n));
    std::vector<int> indegree(size_t(n), 0), order;
    for (const auto& [i, i2] : inst.deps) {
      succ[size_t(i)].push_back(i2);
      pred[size_t(i2)].push_back(i);
      ++indegree[size_t(i2)];
    }
    for (int i = 0; i < n; ++i)
      if (indegree[size_t(i)] == 0) order.push_back(i);
    for (size_t h = 0; h < order.size(); ++h)
      for (int i2 : succ[size_t(order[h])])
        if (--indegree[size_t(i2)] == 0) order.push_back(i2);
    if (int(order.size()) == n) {  // a cycle is left to CBC, which finds it infeasible
      for (int i : order)
        for (int p : pred[size_t(i)]) depth[size_t(i)] = std::max(depth[size_t(i)], depth[size_t(p)] + 1);
      for (auto it = order.rbegin(); it != order.rend(); ++it)
        for (int c : succ[size_t(*it)]) height[size_t(*it)] = std::max(height[size_t(*it)], height[size_t(c)] + 1);
    }
  }
  auto slot_ok = [&](int i, int s) { return s >= depth[size_t(i)] && s <= S - 1 - height[size_t(i)]; };
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < J; ++j)
      for (int s = 0; s < S; ++s)
        for (int k = 0; k < nk(i); ++k)
          y[ybase[size_t(i)] + (size_t(j) * size_t(S) + size_t(s)) * size_t(nk(i)) + size_t(k)] =
              m.col(0, runs(i, j) && slot_ok(i, s) ? 1 : 0, 0, true);
  for (int i = 0; i < n; ++i)
    for (int s = 0; s < S; ++s) x[size_t(i) * size_t(S) + size_t(s)] = m.col(0, slot_ok(i, s) ? 1 : 0, 0, true);
  // The terms of a_ijs.
  auto a_terms = [&](int i, int j, int s, double coef, std::vector<std::pair<int, double>>& t) {
    for (int k = 0; k < nk(i); ++k) t.push_back({Y(i, j, s, k), coef});
  };
  // pc[l][k]: layer l takes choices[l][k] (Eq. 2's one-hot vector).
  std::vector<std::vector<int>> pc(static_cast<size_t>(L));
  for (int l = 0; l < L; ++l)
    for (size_t k = 0; k < inst.choices[size_t(l)].size(); ++k) pc[size_t(l)].push_back(m.binary());
  std::vector<int> ls(static_cast<size_t>(S)), used(static_cast<size_t>(S));
  std::vector<int> is(size_t(J) * size_t(S)), ie(size_t(J) * size_t(S)), q(size_t(J) * size_t(S));
  for (int s = 0; s < S; ++s) {
    ls[size_t(s)] = m.col(0, big, N, false);
    used[size_t(s)] = m.col(0, 1, 0, false);
  }
  for (size_t k = 0; k < is.size(); ++k) {
    is[k] = m.binary();
    ie[k] = m.binary();
    q[k] = m.col(0, big, 0, false);
  }
  const int o = m.col(0, kInf, -(N - 1), false);

  // (1) one tile per core and slot.
  for (int j = 0; j < J; ++j)
    for (int s = 0; s < S; ++s) {
      std::vector<std::pair<int, double>> t;
      for (int i = 0; i < n; ++i) a_terms(i, j, s, 1, t);
      m.row(t, -kInf, 1);
    }
  // (2) one parallelism per layer.
  for (int l = 0; l < L; ++l) {
    std::vector<std::pair<int, double>> t;
    for (int c : pc[size_t(l)]) t.push_back({c, 1});
    m.row(t, 1, 1);
  }
  // (3) per choice k, p_k assignments when the layer takes k (none otherwise), all in the tile's
  // one slot.
  for (int i = 0; i < n; ++i) {
    const int l = inst.layer_of_tile[size_t(i)];
    for (int k = 0; k < nk(i); ++k) {
      std::vector<std::pair<int, double>> t{{pc[size_t(l)][size_t(k)], -inst.choices[size_t(l)][size_t(k)]}};
      for (int j = 0; j < J; ++j)
        for (int s = 0; s < S; ++s) t.push_back({Y(i, j, s, k), 1});
      m.row(t, 0, 0);
    }
    std::vector<std::pair<int, double>> one;
    for (int s = 0; s < S; ++s) one.push_back({x[size_t(i) * size_t(S) + size_t(s)], 1});
    m.row(one, 1, 1);
    for (int j = 0; j < J; ++j)
      for (int s = 0; s < S; ++s) {
        std::vector<std::pair<int, double>> t{{x[size_t(i) * size_t(S) + size_t(s)], -1}};
        a_terms(i, j, s, 1, t);
        m.row(t, -kInf, 0);
      }
  }
  // Empty slots only at the end (they cost nothing anywhere: this only removes symmetric copies).
  for (int s = 0; s < S; ++s) {
    std::vector<std::pair<int, double>> t{{used[size_t(s)], 1}};
    for (int i = 0; i < n; ++i) {
      t.push_back({x[size_t(i) * size_t(S) + size_t(s)], -1});
      m.row({{x[size_t(i) * size_t(S) + size_t(s)], 1}, {used[size_t(s)], -1}}, -kInf, 0);
    }
    m.row(t, -kInf, 0);
    if (s > 0) m.row({{used[size_t(s)], 1}, {used[size_t(s) - 1], -1}}, -kInf, 0);
  }
  // (4) dependencies: Slot_i + 1 <= Slot_i'.
  for (const auto& [i, i2] : inst.deps) {
    std::vector<std::pair<int, double>> t;
    for (int s = 1; s < S; ++s) {
      t.push_back({x[size_t(i2) * size_t(S) + size_t(s)], double(s)});
      t.push_back({x[size_t(i) * size_t(S) + size_t(s)], -double(s)});
    }
    m.row(t, 1, kInf);
  }
  struct WeightCol { int layer, core, choice, col; };
  std::vector<WeightCol> vcols;
  // (5) weights per core: v[l][j][k] = 1 when a tile of layer l runs on core j with choice k (the
  // layer's W / p_k kept there once, however many of its tiles run there).
  if (inst.weight_constraint) {
    std::vector<std::vector<std::pair<int, double>>> load(static_cast<size_t>(J));
    for (int l = 0; l < L; ++l) {
      if (inst.weight_bits[size_t(l)] <= 0) continue;
      for (int j = 0; j < J; ++j)
        for (size_t k = 0; k < pc[size_t(l)].size(); ++k) {
          const int v = m.col(0, 1, 0, false);
          vcols.push_back({l, j, int(k), v});
          for (int i = 0; i < n; ++i) {
            if (inst.layer_of_tile[size_t(i)] != l || !runs(i, j)) continue;
            std::vector<std::pair<int, double>> t{{v, 1}};
            for (int s = 0; s < S; ++s) t.push_back({Y(i, j, s, int(k)), -1});
            m.row(t, 0, kInf);
          }
          load[size_t(j)].push_back({v, inst.weight_bits[size_t(l)] / inst.choices[size_t(l)][k]});
        }
    }
    for (int j = 0; j < J; ++j)
      if (!load[size_t(j)].empty()) m.row(load[size_t(j)], -kInf, inst.capacity_bits[size_t(j)]);
  }
  // (8), (9): l_s >= the latency of the (at most one) tile core j runs in slot s.
  for (int j = 0; j < J; ++j)
    for (int s = 0; s < S; ++s) {
      std::vector<std::pair<int, double>> t{{ls[size_t(s)], 1}};
      for (int i = 0; i < n; ++i) {
        if (!runs(i, j)) continue;
        for (int k = 0; k < nk(i); ++k) t.push_back({Y(i, j, s, k), -inst.latency[size_t(i)][size_t(j)][size_t(k)]});
      }
      m.row(t, 0, kInf);
    }
  // (10): IdleStart is a prefix of the slots before the core's first tile, IdleEnd a suffix after
  // its last; a slot is at most one of them (an unused core is idle for one whole iteration).
  // q_js = (IdleStart + IdleEnd) * l_s, bounded from above only: o is maximised.
  for (int j = 0; j < J; ++j) {
    std::vector<std::pair<int, double>> idle{{o, 1}};
    for (int s = 0; s < S; ++s) {
      const size_t k = size_t(j) * size_t(S) + size_t(s);
      std::vector<std::pair<int, double>> busy_s{{is[k], 1}}, busy_e{{ie[k], 1}};
      for (int i = 0; i < n; ++i) {
        a_terms(i, j, s, 1, busy_s);
        a_terms(i, j, s, 1, busy_e);
      }
      m.row(busy_s, -kInf, 1);
      m.row(busy_e, -kInf, 1);
      if (s > 0) m.row({{is[k], 1}, {is[k - 1], -1}}, -kInf, 0);
      if (s + 1 < S) m.row({{ie[k], 1}, {ie[k + 1], -1}}, -kInf, 0);
      m.row({{is[k], 1}, {ie[k], 1}}, -kInf, 1);
      // q_js <= l_s minus what core j runs in slot s: 0 in every integer solution where j is busy
      // (is = ie = 0 there), but in the relaxation it ties the overlap to each core's work, so the
      // bound becomes at least about N x the busiest core's work instead of one iteration's.
      std::vector<std::pair<int, double>> cap{{q[k], 1}, {ls[size_t(s)], -1}};
      for (int i = 0; i < n; ++i) {
        if (!runs(i, j)) continue;
        for (int kk = 0; kk < nk(i); ++kk)
          cap.push_back({Y(i, j, s, kk), inst.latency[size_t(i)][size_t(j)][size_t(kk)]});
      }
      m.row(cap, -kInf, 0);
      m.row({{q[k], 1}, {is[k], -big}, {ie[k], -big}}, -kInf, 0);
      idle.push_back({q[k], -1});
    }
    m.row(idle, -kInf, 0);  // (11) o <= idle_j
  }

  // Identical cores (the same weight memory and the same latency for every tile and choice) are
  // interchangeable, and CBC would otherwise branch on each permutation of them. Any allocation
  // can be relabelled so that of two identical cores j < j', j starts no later than j' (an unused
  // core counting as starting last): j' busy in slot s needs j busy in some slot <= s.
  const std::vector<std::vector<int>> classes = identical_core_classes(inst);
  for (const std::vector<int>& members : classes)
    for (size_t q = 0; q + 1 < members.size(); ++q) {
      const int j = members[q], j2 = members[q + 1];
      for (int s = 0; s < S; ++s) {
        std::vector<std::pair<int, double>> t;
        for (int i = 0; i < n; ++i) {
          for (int s2 = 0; s2 <= s; ++s2) a_terms(i, j, s2, 1, t);
          a_terms(i, j2, s, -1, t);
        }
        m.row(t, 0, kInf);
      }
    }

  WacoSolution sol;
  sol.rows = int(m.row_lb.size());
  sol.columns = int(m.lb.size());
  sol.nonzeros = int64_t(m.value.size());
  for (char c : m.integer) sol.integers += c;

  CoinPackedMatrix matrix(false, m.row_of.data(), m.col_of.data(), m.value.data(), CoinBigIndex(m.value.size()));
  matrix.setDimensions(sol.rows, sol.columns);
  OsiClpSolverInterface si;
  si.loadProblem(matrix, m.lb.data(), m.ub.data(), m.obj.data(), m.row_lb.data(), m.row_ub.data());
  for (int c = 0; c < sol.columns; ++c)
    if (m.integer[size_t(c)]) si.setInteger(c);
  si.messageHandler()->setLogLevel(0);

  // The greedy allocation as CBC's first incumbent: every column of the model set from it (the
  // idle prefixes and suffixes, q = idle x l_s, o the least idle), so CBC starts from a solution
  // and its cutoff at once instead of searching for a first one (large per-layer stacks found none
  // within the time limit).
  Allocation start;
  std::vector<double> start_col;
  double start_objective = kInf;
  if (greedy_allocation(inst, start)) {
    improve_allocation(inst, start);
    canonical_labels(inst, classes, start);
    start_col.assign(m.lb.size(), 0);
    std::vector<double> l(static_cast<size_t>(S), 0);
    std::vector<int> first(size_t(J), S), last(size_t(J), -1);
    for (int i = 0; i < n; ++i) {
      const int s = start.slot[size_t(i)], k = start.choice[size_t(inst.layer_of_tile[size_t(i)])];
      start_col[size_t(x[size_t(i) * size_t(S) + size_t(s)])] = 1;
      start_col[size_t(used[size_t(s)])] = 1;
      for (int j : start.cores[size_t(i)]) {
        start_col[size_t(Y(i, j, s, k))] = 1;
        l[size_t(s)] = std::max(l[size_t(s)], inst.latency[size_t(i)][size_t(j)][size_t(k)]);
        first[size_t(j)] = std::min(first[size_t(j)], s);
        last[size_t(j)] = std::max(last[size_t(j)], s);
      }
    }
    for (int l2 = 0; l2 < L; ++l2) start_col[size_t(pc[size_t(l2)][size_t(start.choice[size_t(l2)])])] = 1;
    for (const WeightCol& v : vcols)
      for (int i = 0; i < n; ++i)
        if (inst.layer_of_tile[size_t(i)] == v.layer && start.choice[size_t(v.layer)] == v.choice &&
            std::count(start.cores[size_t(i)].begin(), start.cores[size_t(i)].end(), v.core))
          start_col[size_t(v.col)] = 1;
    double least_idle = kInf;
    for (int j = 0; j < J; ++j) {
      double idle = 0;
      for (int s = 0; s < S; ++s) {
        const size_t k = size_t(j) * size_t(S) + size_t(s);
        const bool before = s < first[size_t(j)], after = last[size_t(j)] >= 0 && s > last[size_t(j)];
        start_col[size_t(is[k])] = before;
        start_col[size_t(ie[k])] = after;
        start_col[size_t(q[k])] = before || after ? l[size_t(s)] : 0;
        idle += start_col[size_t(q[k])];
      }
      least_idle = std::min(least_idle, idle);
    }
    start_col[size_t(o)] = J > 0 ? least_idle : 0;
    for (int s = 0; s < S; ++s) start_col[size_t(ls[size_t(s)])] = l[size_t(s)];
    start_objective = waco_latency(inst, start.slot, start.cores, start.choice);
  }
  sol.start = start_col.empty() ? 0 : start_objective;

  CbcModel model(si);
  model.setLogLevel(0);
  model.messageHandler()->setLogLevel(0);
  if (!start_col.empty()) model.setBestSolution(start_col.data(), int(start_col.size()), start_objective, true);
  // CBC's driver (CbcMain0/CbcMain1) keeps its parameter table and command reader in globals:
  // two threads solving at once garbled each other's options ("No match for -timeMode0") and a
  // feasible stack read as infeasible. Solves within one process take turns; ranks do not share
  // them, so `mpirun` keeps WACO units parallel.
  static std::mutex cbc_driver;
  const std::lock_guard<std::mutex> one_cbc_at_a_time(cbc_driver);
  CbcMain0(model);
  // CBC's -sec is checked between branch-and-bound nodes only: the root LP of a large instance
  // (eight cores, a stack of ~30 layers modelled per layer: ~60k binaries) ran for many minutes
  // past it. Clp's own wall-clock limit bounds every LP solve; -timeMode elapsed makes -sec wall
  // time too, as the option says.
  if (auto* clp = dynamic_cast<OsiClpSolverInterface*>(model.solver()))
    clp->getModelPtr()->setMaximumWallSeconds(opt.time_limit_s);
  const std::string sec = fmt::format("{}", opt.time_limit_s), seed = std::to_string(opt.seed);
  const std::string nodes = std::to_string(opt.max_nodes > 0 ? opt.max_nodes : int64_t{2147483647});
  const char* argv[] = {"mapfuse-waco", "-log", "0", "-timeMode", "elapsed", "-sec", sec.c_str(),
                        "-maxNodes", nodes.c_str(), "-randomCbcSeed", seed.c_str(), "-randomSeed", seed.c_str(),
                        "-solve", "-quit"};
  const auto t0 = std::chrono::steady_clock::now();
  CbcMain1(int(std::size(argv)), argv, model);
  sol.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  sol.nodes = model.getNodeCount();

  const double* best = model.bestSolution();
  // A root LP that Clp stopped on its wall-clock limit can read as infeasible to CBC: the clock
  // tells which it was.
  const bool timed_out = model.isSecondsLimitReached() || sol.seconds >= 0.98 * opt.time_limit_s;
  sol.time_limited = timed_out && !model.isProvenOptimal();
  sol.node_limited = !sol.time_limited && model.isNodeLimitReached();
  // Stopped by the node limit before any solution (its start rejected): not a proof of infeasibility.
  if (!best && !timed_out && !model.isNodeLimitReached())
    throw InputError({}, kKey,
                     fmt::format("{}: no allocation of its steady-state tiles fits the cores' weight memories "
                                 "(Eq. 5); allow more CT parallelism (--max-parallelism) or use smaller stacks",
                                 what));
  sol.optimal = model.isProvenOptimal();
  if (!best) {
    // CBC found no solution in time: the greedy allocation, if it fits the weights.
    Allocation a;
    if (!greedy_allocation(inst, a))
      throw InputError({}, kKey, fmt::format("{}: CBC found no allocation within the time limit of {} s (and the "
                                             "greedy fallback does not fit the weights)", what, opt.time_limit_s));
    sol.slot = a.slot;
    sol.cores = a.cores;
    sol.choice = a.choice;
    sol.fallback = true;
    sol.slot_latency.assign(size_t(S), 0);
    for (int i = 0; i < n; ++i)
      for (int j : sol.cores[size_t(i)])
        sol.slot_latency[size_t(i)] = std::max(sol.slot_latency[size_t(i)],
            inst.latency[size_t(i)][size_t(j)][size_t(sol.choice[size_t(inst.layer_of_tile[size_t(i)])])]);
    sol.objective = eq12(inst, sol.slot, sol.cores, sol.choice, &sol.overlap);
    sol.bound = std::min(std::max(model.getBestPossibleObjValue(), work_bound(inst)), sol.objective);
    sol.gap = sol.objective > 0 ? (sol.objective - sol.bound) / sol.objective : 0;
    return sol;
  }
  sol.slot.assign(size_t(n), 0);
  sol.cores.assign(size_t(n), {});
  for (int i = 0; i < n; ++i)
    for (int s = 0; s < S; ++s) {
      if (best[x[size_t(i) * size_t(S) + size_t(s)]] > 0.5) sol.slot[size_t(i)] = s;
      for (int j = 0; j < J; ++j) {
        double a = 0;
        for (int k = 0; k < nk(i); ++k) a += best[Y(i, j, s, k)];
        if (a > 0.5) sol.cores[size_t(i)].push_back(j);
      }
    }
  sol.choice.assign(size_t(L), 0);
  for (int l = 0; l < L; ++l)
    for (size_t k = 0; k < pc[size_t(l)].size(); ++k)
      if (best[pc[size_t(l)][k]] > 0.5) sol.choice[size_t(l)] = int(k);
  {
    // What CBC returns, polished by the same local search as its start (slots kept): a stopped
    // solve may gain, an optimal one only drops cores that do not shorten its slots.
    Allocation a{sol.slot, sol.cores, sol.choice};
    if (!allocation_valid(inst, a)) {
      // An incumbent that breaks the model's rows is not used: the start, which CBC was to improve
      // on, is. (A guard: a tile without cores once reached the unroll below in a Fig. 16 unit
      // under a binding time limit, and that run could not be reproduced.)
      if (start_col.empty())
        throw std::logic_error(fmt::format("WACO: CBC returned an allocation of {} that breaks the model, and no "
                                           "heuristic allocation fits", what));
      a = start;
      sol.slot = start.slot;
      sol.optimal = false;
      sol.rejected = true;
    }
    improve_allocation(inst, a);
    sol.cores = std::move(a.cores);
    sol.choice = std::move(a.choice);
  }
  sol.slot_latency.assign(size_t(S), 0);
  for (int i = 0; i < n; ++i)
    for (int j : sol.cores[size_t(i)])
      sol.slot_latency[size_t(sol.slot[size_t(i)])] =
          std::max(sol.slot_latency[size_t(sol.slot[size_t(i)])],
                   inst.latency[size_t(i)][size_t(j)][size_t(sol.choice[size_t(inst.layer_of_tile[size_t(i)])])]);
  // The objective of the decoded allocation, idle times taken exactly (CBC's agrees up to its tolerances).
  sol.objective = eq12(inst, sol.slot, sol.cores, sol.choice, &sol.overlap);
  // CBC's bound is meaningless when its root LP was stopped by the time limit.
  sol.bound = std::min(std::max(model.getBestPossibleObjValue(), work_bound(inst)), sol.objective);
  if (sol.optimal) sol.bound = sol.objective;
  sol.gap = sol.objective > 0 ? (sol.objective - sol.bound) / sol.objective : 0;
  return sol;
}

namespace {

// The MILP's symmetry rows put a stack's work on the lowest-numbered of its identical cores, and
// stacks run one after another, so every stack would load the same cores (layer by layer, every
// layer on the first p of eight identical cores: ResNet-18 on stream_t3_8c_0ws_ps 7 % and FSRCNN
// 27 % worse EDP than CBC's arbitrary labels). Within each class of identical cores, the stack's
// busiest cores take the labels of the cores with the least work so far (Eq. 12 is unchanged).
void balance_identical_cores(const WacoInstance& in, WacoSolution& sol, std::vector<double>& load) {
  const int n = int(in.layer_of_tile.size());
  if (sol.cores.size() != size_t(n) || n == 0) return;
  std::vector<double> work(static_cast<size_t>(in.cores), 0);
  for (int i = 0; i < n; ++i) {
    const int k = sol.choice[size_t(in.layer_of_tile[size_t(i)])];
    for (int j : sol.cores[size_t(i)]) work[size_t(j)] += in.latency[size_t(i)][size_t(j)][size_t(k)];
  }
  std::vector<std::pair<std::vector<int>, std::vector<int>>> maps;
  for (const std::vector<int>& members : identical_core_classes(in)) {
    std::vector<int> busiest = members, idlest = members;
    std::stable_sort(busiest.begin(), busiest.end(), [&](int a, int b) { return work[size_t(a)] > work[size_t(b)]; });
    std::stable_sort(idlest.begin(), idlest.end(), [&](int a, int b) { return load[size_t(a)] < load[size_t(b)]; });
    maps.push_back({std::move(busiest), std::move(idlest)});
  }
  const std::vector<int> perm = relabel(sol.cores, maps, in.cores);
  for (int j = 0; j < in.cores; ++j) load[size_t(perm[size_t(j)])] += work[size_t(j)] * double(in.iterations);
}

}  // namespace

WacoResult waco_allocate(const Workload& w, const std::vector<std::vector<int>>& stacks, const Architecture& arch,
                         const TileCostFn& cost, const WacoOptions& opt) {
  using clock = std::chrono::steady_clock;
  const size_t E = w.einsums.size();
  const int J = int(arch.cores.size());
  WacoResult res;
  TilingOptions base;
  base.layers = stream_tiling(w, 1);
  base.stacks = stacks;
  const std::vector<LayerTiling> split = stream_tiling(w, 2);  // names the rank CT parallelism splits
  const TileGraph g1 = build_tile_graph(w, base);
  const TileSet& ts1 = g1.tiles;
  std::vector<SteadyState> states = steady_states(w, g1);
  res.summary = summarize(states);

  // Per layer its capable cores and allowed p (divisors of the split rank, at most the cores).
  std::vector<std::vector<int>> capable(E), choices(E);
  for (size_t l = 0; l < E; ++l) {
    for (int j = 0; j < J; ++j)
      if (arch.cores[size_t(j)].can_run(w.einsums[l].op)) capable[l].push_back(j);
    if (capable[l].empty())
      throw InputError({}, kKey, fmt::format("no core of '{}' can run layer '{}' ({} operator)", arch.name,
                                             w.einsums[l].name, to_string(w.einsums[l].op)));
    choices[l] = {1};
    if (split[l].inter.empty()) continue;
    const Einsum& e = w.einsums[l];
    const int64_t size = e.ranks[size_t(e.rank_index(split[l].inter[0].rank))].size;
    int pmax = int(capable[l].size());
    if (opt.max_parallelism > 0) pmax = std::min(pmax, opt.max_parallelism);
    for (int p = 2; p <= pmax; ++p)
      if (size % p == 0) choices[l].push_back(p);
  }
  std::set<int> all_p;
  for (const auto& c : choices) all_p.insert(c.begin(), c.end());

  // latency[stack][tile in steady state][core][choice]
  std::vector<std::vector<std::vector<std::vector<double>>>> lat(states.size());
  for (size_t s = 0; s < states.size(); ++s) {
    lat[s].resize(states[s].tiles.size());
    for (size_t i = 0; i < states[s].tiles.size(); ++i) {
      const int l = ts1.tiles[size_t(states[s].tiles[i])].layer;
      lat[s][i].assign(size_t(J), std::vector<double>(choices[size_t(l)].size(), kInf));
    }
  }
  auto t0 = clock::now();
  for (int p : all_p) {
    TilingOptions tp = base;
    for (size_t l = 0; l < E; ++l)
      if (p > 1 && std::find(choices[l].begin(), choices[l].end(), p) != choices[l].end())
        tp.layers[l].inter = {{split[l].inter[0].rank, p}};
    TileSet cand = p == 1 ? ts1 : generate_tiles(w, tp);
    const std::vector<Tile> all = cand.tiles;
    cand.tiles.clear();
    std::vector<int> cores;
    struct Where { size_t stack, tile; int core, choice; };
    std::vector<Where> where;
    for (size_t s = 0; s < states.size(); ++s)
      for (size_t i = 0; i < states[s].tiles.size(); ++i) {
        const Tile& t1 = ts1.tiles[size_t(states[s].tiles[i])];
        const auto& ch = choices[size_t(t1.layer)];
        const auto k = std::find(ch.begin(), ch.end(), p);
        if (k == ch.end()) continue;
        const int groups = cand.layer_groups[size_t(t1.layer)];
        const Tile& tp_tile = all[size_t(cand.layer_first[size_t(t1.layer)] + t1.sub_id * groups)];
        for (int j : capable[size_t(t1.layer)]) {
          cand.tiles.push_back(tp_tile);
          cores.push_back(j);
          where.push_back({s, i, j, int(k - ch.begin())});
        }
      }
    if (cand.tiles.empty()) continue;
    const std::vector<TileCost> c = cost(cand, cores);
    for (size_t r = 0; r < where.size(); ++r)
      lat[where[r].stack][where[r].tile][size_t(where[r].core)][size_t(where[r].choice)] = c[r].latency_cc;
  }
  res.cost_seconds = std::chrono::duration<double>(clock::now() - t0).count();

  std::vector<double> capacity(static_cast<size_t>(J));
  for (int j = 0; j < J; ++j) capacity[size_t(j)] = double(core_weight_capacity_bits(arch.cores[size_t(j)]));
  std::vector<double> core_load(static_cast<size_t>(J), 0);  // the stacks' work so far, per core
  res.parallelism.assign(E, 1);
  // Per layer the steady CTs (ascending sub id) and their cores.
  std::vector<std::vector<int>> steady_of(E);
  std::vector<std::vector<std::vector<int>>> steady_cores(E);
  for (size_t s = 0; s < states.size(); ++s) {
    WacoStack ws;
    ws.steady = states[s];
    const auto& tiles = states[s].tiles;
    for (int t : tiles) ws.layers.push_back(ts1.tiles[size_t(t)].layer);
    std::sort(ws.layers.begin(), ws.layers.end());
    ws.layers.erase(std::unique(ws.layers.begin(), ws.layers.end()), ws.layers.end());
    WacoInstance& in = ws.instance;
    in.cores = J;
    in.capacity_bits = capacity;
    in.iterations = states[s].iterations;
    in.weight_constraint = ts1.stacks[s].size() > 1;
    for (int l : ws.layers) {
      in.choices.push_back(choices[size_t(l)]);
      in.weight_bits.push_back(double(weight_bits(w, l)));
      if (!in.weight_constraint || in.weight_bits.back() <= 0) continue;
      bool fits = false;
      for (int j : capable[size_t(l)])
        fits |= in.weight_bits.back() / choices[size_t(l)].back() <= capacity[size_t(j)];
      if (!fits)
        throw InputError({}, kKey,
                         fmt::format("layer '{}' of stack {}: its weights ({} bits, {} bits split {} ways) fit the "
                                     "weight memory of none of its cores (largest {} bits)",
                                     w.einsums[size_t(l)].name, s, weight_bits(w, l),
                                     in.weight_bits.back() / choices[size_t(l)].back(), choices[size_t(l)].back(),
                                     *std::max_element(capacity.begin(), capacity.end())));
    }
    std::map<int, int> index;  // tile -> position in the steady state
    std::vector<int> layer_pos;  // per steady tile its layer's position in ws.layers
    for (size_t i = 0; i < tiles.size(); ++i) {
      index[tiles[i]] = int(i);
      const int l = ts1.tiles[size_t(tiles[i])].layer;
      layer_pos.push_back(int(std::lower_bound(ws.layers.begin(), ws.layers.end(), l) - ws.layers.begin()));
    }
    std::set<std::pair<int, int>> deps;
    for (size_t i = 0; i < tiles.size(); ++i)
      for (int e = g1.first_pred[size_t(tiles[i])]; e < g1.first_pred[size_t(tiles[i]) + 1]; ++e)
        if (auto it = index.find(g1.edges[size_t(e)].producer); it != index.end()) deps.insert({it->second, int(i)});
    // A steady state larger than opt.max_steady_tiles (the whole stack, when its last layer has one
    // CT) is modelled per layer: one MILP tile per layer, its latency the sum of its CTs'.
    ws.per_layer = int(tiles.size()) > opt.max_steady_tiles;
    if (!ws.per_layer) {
      in.layer_of_tile = layer_pos;
      in.latency = lat[s];
      in.deps.assign(deps.begin(), deps.end());
    } else {
      const size_t nl = ws.layers.size();
      in.latency.assign(nl, {});
      for (size_t k = 0; k < nl; ++k) {
        in.layer_of_tile.push_back(int(k));
        in.latency[k].assign(size_t(J), std::vector<double>(in.choices[k].size(), 0));
      }
      for (size_t i = 0; i < tiles.size(); ++i)
        for (int j = 0; j < J; ++j)
          for (size_t k = 0; k < in.choices[size_t(layer_pos[i])].size(); ++k)
            in.latency[size_t(layer_pos[i])][size_t(j)][k] += lat[s][i][size_t(j)][k];
      std::set<std::pair<int, int>> ldeps;
      for (const auto& [a, b] : deps)
        if (layer_pos[size_t(a)] != layer_pos[size_t(b)]) ldeps.insert({layer_pos[size_t(a)], layer_pos[size_t(b)]});
      in.deps.assign(ldeps.begin(), ldeps.end());
    }
    const std::string what = fmt::format("stack {} ('{}' .. '{}')", s, w.einsums[size_t(ts1.stacks[s].front())].name,
                                         w.einsums[size_t(ts1.stacks[s].back())].name);
    ws.solution = solve_waco(in, opt, what);
    res.solve_seconds += ws.solution.seconds;
    balance_identical_cores(in, ws.solution, core_load);
    for (size_t k = 0; k < ws.layers.size(); ++k)
      res.parallelism[size_t(ws.layers[k])] = in.choices[k][size_t(ws.solution.choice[k])];
    for (size_t i = 0; i < tiles.size(); ++i) {
      const int l = ts1.tiles[size_t(tiles[i])].layer;
      if (ws.per_layer && !steady_of[size_t(l)].empty()) continue;  // one core set for the whole layer
      steady_of[size_t(l)].push_back(ts1.tiles[size_t(tiles[i])].sub_id);
      steady_cores[size_t(l)].push_back(ws.solution.cores[ws.per_layer ? size_t(layer_pos[i]) : i]);
    }
    res.stacks.push_back(std::move(ws));
  }

  // Unroll: the tiling with each layer's p, every CT on the cores of its steady-state counterpart.
  res.tiling = base;
  for (size_t l = 0; l < E; ++l)
    if (res.parallelism[l] > 1) res.tiling.layers[l].inter = {{split[l].inter[0].rank, res.parallelism[l]}};
  res.graph = build_tile_graph(w, res.tiling);
  const TileSet& ts = res.graph.tiles;
  res.core_of_tile.resize(ts.tiles.size());
  for (size_t t = 0; t < ts.tiles.size(); ++t) {
    const Tile& tile = ts.tiles[t];
    const size_t l = size_t(tile.layer);
    const auto& subs = steady_of[l];
    if (subs.empty()) {
      res.core_of_tile[t] = capable[l].front();
      continue;
    }
    const int nl = int(subs.size());
    const int row = tile.sub_id / ts.layer_groups[l];
    const int k = ((row - subs.front()) % nl + nl) % nl;
    const std::vector<int>& on = steady_cores[l][size_t(k)];
    if (tile.group < 0 || size_t(tile.group) >= on.size())
      throw std::logic_error(fmt::format("WACO: layer '{}' runs its steady tile {} on {} cores, but the unrolled "
                                         "tiling has group {} (p = {})", w.einsums[l].name, k, on.size(), tile.group,
                                         res.parallelism[l]));
    res.core_of_tile[t] = on[size_t(tile.group)];
  }
  return res;
}

}  // namespace mapfuse
