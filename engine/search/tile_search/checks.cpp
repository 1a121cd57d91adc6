// Testing hooks (TileWorker::check_bounds, check_classification): a row of partial choices is
// bounded or classified as complete() does, then completed with nothing skipped, and every lane
// is reported with its bound or verdict, so that tests can hold them against the exact costs.
#include <functional>
#include <stdexcept>

#include "engine/search/tile_search/worker_state.hpp"

namespace mapfuse {

namespace {

// check_bounds: matches each lane to the fan-out its free levels use and reports its bounds.
struct BoundCheckSink final : TileSink {
  const TileSearch* s = nullptr;
  int d = 0;
  std::array<int64_t, kMaxRanks> rem{};
  std::function<int(const TileCandidate&)> match;  // index of the lane's bound, -1 if none
  std::function<void(const CompactCost&, int)> report;
  void consume(const TileCandidate& cand, const CompactCost& cost) override {
    if (cost.invalid != Invalid::None && cost.invalid != Invalid::CapacityExceeded) return;
    const int k = match(cand);
    if (k < 0) throw std::logic_error("check_bounds: a completion uses a fan-out the bounds do not list");
    report(cost, k);
  }
};

}  // namespace

bool TileWorker::check_bounds(const TileSearch& s, const PartialChoices& p, size_t i, const BoundCheck& check,
                              bool level_more) {
  State& st = *st_;
  BoundCheckSink sink;
  st.bind(s, &sink);
  st.pstride = p.stride;
  const int d0 = p.levels;
  std::array<int64_t, kMaxRanks> rem0{};
  st.load(p.rows.data() + i * p.stride, d0, rem0);
  const EvalPlan& plan = s.plan();
  bool any = false;
  // The bounds of chosen[0..d) with `rem` left, against every completion.
  auto check_one = [&](int d, const std::array<int64_t, kMaxRanks>& rem) {
    st.record_relaxed = true;
    st.per_keep_d = true;  // and per kept set of level d, as complete classifies a row
    const bool made = st.completion_bounds(d, rem);
    st.record_relaxed = false;
    st.per_keep_d = false;
    if (!made) return;
    any = true;
    const std::vector<State::OuterFanout> outer = *st.outer_last;
    const auto bounds = st.bounds;
    const std::vector<double> relaxed_energy = st.relaxed_energy, relaxed_cycles = st.relaxed_cycles;
    sink.report = [&](const CompactCost& cost, int k) {
      check(cost, bounds[static_cast<size_t>(k)].energy, bounds[static_cast<size_t>(k)].cycles);
      if (!relaxed_energy.empty()) {  // the bound for every fan-out at once, of the lane's kept set
        const size_t j = static_cast<size_t>(k) / outer.size();
        check(cost, relaxed_energy[j], relaxed_cycles[j]);
      }
    };
    sink.match = [&](const TileCandidate& cand) {
      State::OuterFanout o;
      o.irr.fill(1);
      o.mc.fill(1);
      o.temporal = rem;
      double above = 1;
      for (int l = s.L - 1; l >= d; --l) {
        o.inst[l] = above;
        for (int axis = 0; axis < 2; ++axis) {
          const LoopKind k = axis == 0 ? LoopKind::SpatialX : LoopKind::SpatialY;
          const RoleMask multicast = axis == 0 ? plan.levels[l].multicast_x : plan.levels[l].multicast_y;
          for (int r = 0; r < s.R; ++r) {
            const int64_t f = cand.factor(l, k, r);
            if (f == 1) continue;
            above *= static_cast<double>(f);
            o.temporal[r] /= f;
            for (int t = 0; t < s.T; ++t) {
              if (plan.tensors[t].relevant_ranks >> r & 1) continue;
              o.irr[t] *= static_cast<double>(f);
              if (multicast & role_bit(plan.tensors[t].role)) o.mc[t] *= static_cast<double>(f);
            }
          }
        }
      }
      o.used = above;
      for (size_t k = 0; k < outer.size(); ++k) {
        const State::OuterFanout& q = outer[k];
        bool same = q.used == o.used && q.temporal == o.temporal;
        for (int t = 0; t < s.T && same; ++t) same = q.irr[t] == o.irr[t] && q.mc[t] == o.mc[t];
        for (int l = d; l < s.L && same; ++l) same = q.inst[l] == o.inst[l];
        if (!same) continue;
        // Bounds come per kept set at b and at d (if any), each with one per fan-out in `outer` order.
        for (size_t j = k; j < bounds.size(); j += outer.size())
          if ((!bounds[j].by_keep || bounds[j].kept_b == (*cand.keep)[s.spec_.backing_level]) &&
              (!bounds[j].by_keep_d || bounds[j].kept_d == (*cand.keep)[d]))
            return static_cast<int>(j);
      }
      return -1;
    };
    st.fixed_levels = d;
    st.descend(d, rem);
    st.flush_all();
  };
  if (!level_more) check_one(d0, rem0);
  else st.each_choice(d0, rem0, [&](const std::array<int64_t, kMaxRanks>& rest) { check_one(d0 + 1, rest); });
  st.fixed_levels = 0;
  st.sink = nullptr;
  st.s = nullptr;
  return any;
}

namespace {

// check_classification: a front of one point at `threshold` pJ (and no time, no words).
struct ThresholdSink final : TileSink {
  double threshold = 0;
  std::function<void(const TileCandidate&, const CompactCost&)> each;
  void consume(const TileCandidate& cand, const CompactCost& cost) override {
    if (cost.invalid != Invalid::None && cost.invalid != Invalid::CapacityExceeded) return;
    each(cand, cost);
  }
  bool beaten(double energy_pj, double /*cycles*/, int /*level*/, int64_t /*words*/) override {
    return energy_pj > threshold;
  }
};

}  // namespace

bool TileWorker::check_classification(const TileSearch& s, const PartialChoices& p, size_t i, double threshold,
                                      const ClassCheck& check, bool level_more) {
  State& st = *st_;
  ThresholdSink sink;
  sink.threshold = threshold;
  st.bind(s, &sink);
  st.pstride = p.stride;
  const int d0 = p.levels;
  std::array<int64_t, kMaxRanks> rem0{};
  st.load(p.rows.data() + i * p.stride, d0, rem0);
  bool any = false;
  // Classifies chosen[0..d) as complete() does (the top level's choices when `top`), then
  // completes it with nothing skipped and reports each lane with the verdict for its choice of
  // level d.
  auto run = [&](int d, const std::array<int64_t, kMaxRanks>& rem, bool top) {
    bool all = false;
    if (top) {
      all = !st.classify_top(d, rem);
    } else {
      st.force_keep_d = true;
      const bool made = st.classify_fanouts(d, rem, all);
      st.force_keep_d = false;
      if (!made) return;
    }
    any = true;
    sink.each = [&](const TileCandidate& cand, const CompactCost& cost) {
      LevelChoice ch;
      for (int r = 0; r < s.R; ++r) {
        ch.x[r] = cand.factor(d, LoopKind::SpatialX, r);
        ch.y[r] = cand.factor(d, LoopKind::SpatialY, r);
      }
      const TensorMask keep = (*cand.keep)[d];
      const bool skipped = all || (top ? st.top_beaten(ch, keep) : st.fanout_beaten(ch) || st.keep_beaten(ch, keep));
      check(cost, skipped);
    };
    st.fixed_levels = d;
    st.descend(d, rem);
    st.flush_all();
  };
  if (!level_more) run(d0, rem0, false);
  else if (d0 + 1 == s.top)
    st.each_choice(d0, rem0, [&](const std::array<int64_t, kMaxRanks>& rest) { run(d0 + 1, rest, true); });
  st.fixed_levels = 0;
  st.sink = nullptr;
  st.s = nullptr;
  return any;
}


bool TileWorker::check_order_bound(const TileSearch& s, const FlatMapping& fm, double serving, double& energy_lb,
                                   double& cycles_lb) {
  struct None final : TileSink {
    void consume(const TileCandidate&, const CompactCost&) override {}
  } none;
  State& st = *st_;
  st.bind(s, &none);
  const int L = s.L, R = s.R;
  // The mapping as one parked lane: its factors by slot and its kept sets in the support.
  std::vector<int32_t> lane(st.W, 1);
  Support key;
  for (int l = 0; l < L; ++l) key.w[l] = static_cast<uint32_t>(fm.keep[l]) << 24;
  for (int i = 0; i < fm.n_loops; ++i) {
    const FlatLoop& lp = fm.loops[i];
    lane[static_cast<size_t>((lp.level * 3 + static_cast<int>(lp.kind)) * R + lp.rank)] *= static_cast<int32_t>(lp.factor);
  }
  const double bounds[State::kBoundWords] = {0, 0, serving};
  st.order_setup(key, lane.data(), 1, bounds);
  const bool on = st.order_cut.on;
  if (on) {
    double rd = 0, wr = 0;
    st.order_bounds(fm, lane.data(), 1, bounds, &energy_lb, &rd, &wr);
    cycles_lb = s.bandwidth_cycles(s.L - 1, rd, wr);
  }
  st.bind(s, nullptr);  // `none` ends here
  return on;
}

}  // namespace mapfuse
