#include "engine/search/get/exact.hpp"

#include <algorithm>
#include <chrono>
#include <functional>
#include <limits>
#include <queue>
#include <unordered_map>

#include "engine/search/get/explain.hpp"

namespace mapfuse::get {

namespace {

using Bits = std::vector<uint64_t>;

struct BitsHash {
  size_t operator()(const Bits& b) const noexcept {
    uint64_t h = 0x9e3779b97f4a7c15ULL;
    for (uint64_t w : b) h = (h ^ w) * 0xff51afd7ed558ccdULL, h ^= h >> 32;
    return static_cast<size_t>(h);
  }
};

bool test(const Bits& b, int32_t v) { return (b[v >> 6] >> (v & 63)) & 1; }
void set(Bits& b, int32_t v) { b[v >> 6] |= uint64_t{1} << (v & 63); }

class IdealSearch {
 public:
  IdealSearch(const Problem& p, Evaluator& ev, const ExactOptions& opt)
      : p_(p), g_(p.dag), ev_(ev), opt_(opt), words_((p.dag.n + 63) / 64), in_group_(p.dag.n, 0),
        excluded_(p.dag.n, 0) {}

  ExactResult run(ExactResult r) {
    const auto t0 = std::chrono::steady_clock::now();
    deadline_check_ = [&] {
      return opt_.time_limit_s > 0 &&
             std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > opt_.time_limit_s;
    };
    Bits start(words_, 0);
    close_unfuseable(start);
    add_state(std::move(start), 0, -1);
    Bits full(words_, 0);
    for (int32_t v = 0; v < g_.n; ++v) set(full, v);
    using Item = std::pair<double, int32_t>;
    std::priority_queue<Item, std::vector<Item>, std::greater<>> queue;
    queue.push({0.0, 0});
    double settled_key = 0;
    int32_t target = -1;
    while (!queue.empty()) {
      const auto [d, s] = queue.top();
      if (d > dist_[s]) {
        queue.pop();
        continue;
      }
      // Every state not yet expanded is at least this far: a valid lower bound when stopping here.
      settled_key = d;
      if (states_[s] == full) {
        target = s;
        break;
      }
      const bool out_of_time =
          opt_.time_limit_s > 0 &&
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > opt_.time_limit_s;
      if (out_of_time || (opt_.max_states > 0 && r.states >= opt_.max_states) || stopped_) break;
      queue.pop();
      ++r.states;
      expand(s, [&](int32_t next, double nd) { queue.push({nd, next}); });
      if (stopped_) break;  // a half-expanded state: its own distance is still a bound
    }
    r.groups = groups_enumerated_;
    r.assumed_monotone = opt_.assume_monotone;
    if (target >= 0) {
      r.optimal = true;
      r.lower_bound = dist_[target];
      r.plan.groups.clear();
      for (int32_t s = target; parent_[s] >= 0; s = parent_[s]) {
        Group grp;
        for (int32_t v = 0; v < g_.n; ++v)
          if (p_.fuseable[v] && test(states_[s], v) && !test(states_[parent_[s]], v)) grp.push_back(v);
        if (!grp.empty()) r.plan.groups.push_back(std::move(grp));
      }
      std::sort(r.plan.groups.begin(), r.plan.groups.end(), [](const Group& a, const Group& b) { return a[0] < b[0]; });
      r.plan.cut = encode(p_, r.plan.groups);
      price(ev_, r.plan);
    } else {
      r.lower_bound = std::min(settled_key, r.plan.groups.empty() ? settled_key : r.plan.dram);
    }
    r.gap = r.plan.groups.empty() ? 1.0 : r.plan.dram > 0 ? (r.plan.dram - r.lower_bound) / r.plan.dram : 0.0;
    return r;
  }

 private:
  // Unfuseable nodes are singleton groups; taking them as soon as they are ready loses nothing
  // (moving a ready singleton earlier keeps every group order topological) and shrinks the lattice.
  void close_unfuseable(Bits& d) const {
    for (int32_t v = 0; v < g_.n; ++v) {
      if (p_.fuseable[v] || test(d, v)) continue;
      bool ready = true;
      for (int32_t e : g_.in(v)) ready = ready && test(d, g_.edges[e].from);
      if (ready) set(d, v);  // labels are topological, so one pass in order closes transitively
    }
  }

  int32_t add_state(Bits b, double d, int32_t parent) {
    auto [it, fresh] = index_.try_emplace(b, static_cast<int32_t>(states_.size()));
    if (fresh) {
      states_.push_back(std::move(b));
      dist_.push_back(d);
      parent_.push_back(parent);
    } else if (d < dist_[it->second]) {
      dist_[it->second] = d;
      parent_[it->second] = parent;
    } else {
      return -1;
    }
    return it->second;
  }

  template <class Push>
  void expand(int32_t s, Push push) {
    const Bits base = states_[s];
    const double d0 = dist_[s];
    for (int32_t r = 0; r < g_.n; ++r) {
      if (!p_.fuseable[r] || test(base, r) || !ready(base, r)) continue;
      group_.assign(1, r);
      in_group_[r] = 1;
      if (!hopeless()) {
        // Every node after r that is ready may join, adjacent or not (a later node can connect it).
        frontier_.clear();
        for (int32_t w = r + 1; w < g_.n; ++w)
          if (p_.fuseable[w] && !test(base, w) && ready(base, w)) frontier_.push_back(w);
        enumerate(base, r, s, d0, push);
      }
      in_group_[r] = 0;
      if (stopped_) return;
    }
  }

  bool ready(const Bits& base, int32_t v) const {
    for (int32_t e : g_.in(v)) {
      const int32_t u = g_.edges[e].from;
      if (!test(base, u) && !in_group_[u]) return false;
    }
    return true;
  }

  void add_ready_successors(const Bits& base, int32_t root, int32_t v) {
    for (int32_t e : g_.out(v)) {
      const int32_t w = g_.edges[e].to;
      if (w > root && p_.fuseable[w] && !in_group_[w] && !excluded_[w] && !test(base, w) && ready(base, w) &&
          std::find(frontier_.begin(), frontier_.end(), w) == frontier_.end())
        frontier_.push_back(w);
    }
  }

  bool hopeless() {
    std::vector<int32_t> sorted = group_;
    std::sort(sorted.begin(), sorted.end());
    if (p_.model->monotone_buffer_bound(sorted) >= p_.beta) return true;
    return opt_.assume_monotone && ev_.cost(sorted).buffer >= p_.beta;
  }

  // Every down-closed extension of group_ by frontier nodes, each once: branch on the smallest
  // frontier node (take it, or exclude it and so everything after it).
  template <class Push>
  void enumerate(const Bits& base, int32_t root, int32_t s, double d0, Push push) {
    if (stopped_) return;
    if ((++steps_ & 0xfff) == 0 && deadline_check_ && deadline_check_()) {
      stopped_ = true;
      return;
    }
    if (frontier_.empty()) {
      emit(base, s, d0, push);
      return;
    }
    const auto it = std::min_element(frontier_.begin(), frontier_.end());
    const int32_t c = *it;
    const std::vector<int32_t> saved = frontier_;
    frontier_.erase(it);
    // take c
    group_.push_back(c);
    in_group_[c] = 1;
    if (!hopeless()) {
      const std::vector<int32_t> before = frontier_;
      add_ready_successors(base, root, c);
      enumerate(base, root, s, d0, push);
      frontier_ = before;
    }
    in_group_[c] = 0;
    group_.pop_back();
    // leave c out
    excluded_[c] = 1;
    enumerate(base, root, s, d0, push);
    excluded_[c] = 0;
    frontier_ = saved;
  }

  template <class Push>
  void emit(const Bits& base, int32_t s, double d0, Push push) {
    ++groups_enumerated_;
    std::vector<int32_t> sorted = group_;
    std::sort(sorted.begin(), sorted.end());
    comps_.clear();
    components(g_, sorted, ws_, comps_);
    if (comps_.size() != 1) return;
    const GroupCost c = ev_.cost(sorted);
    if (!ev_.valid(c)) return;
    Bits next = base;
    for (int32_t v : sorted) set(next, v);
    close_unfuseable(next);
    const int32_t id = add_state(std::move(next), d0 + c.dram, s);
    if (id >= 0) push(id, d0 + c.dram);
  }

  const Problem& p_;
  const Dag& g_;
  Evaluator& ev_;
  ExactOptions opt_;
  int32_t words_;
  std::unordered_map<Bits, int32_t, BitsHash> index_;
  std::vector<Bits> states_;
  std::vector<double> dist_;
  std::vector<int32_t> parent_;
  std::vector<int32_t> group_, frontier_;
  std::vector<uint8_t> in_group_, excluded_;
  std::vector<Group> comps_;
  Workspace ws_;
  int64_t groups_enumerated_ = 0, steps_ = 0;
  bool stopped_ = false;
  std::function<bool()> deadline_check_;
};

}  // namespace

ExactResult exact_optimum(const Problem& p, Evaluator& ev, const ExactOptions& opt) {
  ExactResult r;
  // Incumbent: the interval DP over the fuseable nodes in label order (exact on chains), kept if
  // it is a valid plan (an unfuseable node inside an interval can close a quotient cycle).
  std::vector<int32_t> fuseable;
  for (int32_t v = 0; v < p.dag.n; ++v)
    if (p.fuseable[v]) fuseable.push_back(v);
  Workspace ws;
  IntervalResult iv = interval_dp(ev, fuseable, ws, opt.assume_monotone);
  if (iv.found && is_valid_plan(p, ev, iv.groups)) {
    r.plan.groups = iv.groups;
    r.plan.cut = encode(p, r.plan.groups);
    price(ev, r.plan);
    r.interval_dram = r.plan.dram;
  }
  IdealSearch search(p, ev, opt);
  return search.run(std::move(r));
}

}  // namespace mapfuse::get
