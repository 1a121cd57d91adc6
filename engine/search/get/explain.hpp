#pragma once
// Explainers of invalid fusion groups (docs/get_search.md §4): given a group that does not fit,
// the edges most responsible, ranked. GET-fusion's GNN explainers (GNNExplainer, PGExplainer,
// RG-Explainer) implement the same interface; the three here query F_β/F_D directly (note §3.4).
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "engine/search/get/plan.hpp"

namespace mapfuse::get {

struct Explanation {
  std::vector<int32_t> edges;  // dag edge ids with both ends in the group, most responsible first
  // Optional: a complete split proposed directly (the interval DP's optimum); Algorithm 1 takes it
  // when every part is valid, else works from `edges`.
  std::vector<Group> split;
};

class Explainer {
 public:
  virtual ~Explainer() = default;
  virtual std::string_view name() const = 0;
  virtual Explanation explain(std::span<const int32_t> group, Evaluator& ev, Workspace& ws) = 0;
};

// The edges of the topological cut C_t inside a group: (u, v) with u ≤ t < v, both in the group.
std::vector<int32_t> cut_edges(const Dag& g, std::span<const int32_t> group, int32_t t, Workspace& ws);

// Exact 1-cut: scores every topological cut of the group as Algorithm 1 would (category 1 by
// Σ F_D, then category 2 by the most nodes in valid parts, then category 3 by the smallest largest
// F_β) and returns the best cut's edges.
std::unique_ptr<Explainer> make_exact_cut_explainer();
// Occlusion: a(i,j) = F_β(φ) − max F_β over the parts of C_{label(i)}; the top
// max(1, ⌈fraction·E⌉) edges by a (fraction 0.2: the note's mask-to-edges rule, §5.2).
std::unique_ptr<Explainer> make_occlusion_explainer(double fraction = 0.2);
// Interval DP: the minimum-Σ F_D split of the group into topologically contiguous intervals
// (each split into its components), returned as `split`, and the edges of its cuts as `edges`.
std::unique_ptr<Explainer> make_interval_dp_explainer();

// The interval DP itself: the minimum-DRAM partition of `nodes` (increasing ids) into valid
// groups, each a weakly connected component of a contiguous run of `nodes`. Empty when some node
// is invalid alone. O(k²) group evaluations; `prune_monotone` stops extending an interval once
// the model's monotone bound (or, when assumed monotone, F_β itself) reaches β.
struct IntervalResult {
  std::vector<Group> groups;
  double dram = 0;
  bool found = false;
};
IntervalResult interval_dp(Evaluator& ev, std::span<const int32_t> nodes, Workspace& ws, bool assume_monotone = false);

}  // namespace mapfuse::get
