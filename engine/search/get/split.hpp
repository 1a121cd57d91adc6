#pragma once
// Repair of invalid fusion groups (docs/get_search.md §3): the baseline random split and
// GET-fusion's Algorithm 1 (recursive greedy tree split) fed by an explainer, with memoisation of
// splits and the rectify rate.
#include <random>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "engine/search/get/explain.hpp"
#include "engine/search/get/plan.hpp"

namespace mapfuse::get {

// Candidate splits from explanation edges (note §2, choice): for an edge (i, j) every topological
// cut C_t with i ≤ t < j, t a node of the group (other t give the same cut); deduplicated, in the
// order of the ranked edges. Returns the positions t. A residual block's explanation
// {(add,conv),(conv,relu),(relu,add),(add,add)} gives 3 cuts, each the skip plus one main-path edge.
std::vector<int32_t> candidate_cuts(const Dag& g, std::span<const int32_t> group, std::span<const int32_t> edges);

// The baseline (note §2, choice): cut an invalid group at a uniformly random topological position
// until every part is valid. Parts appended to `out`. Singletons are valid (fuseable filter).
void random_split(Evaluator& ev, std::span<const int32_t> group, std::mt19937_64& rng, Workspace& ws,
                  std::vector<Group>& out);

struct SplitOptions {
  int max_depth = 8;      // recursion depth of Algorithm 1 before falling back (choice, note §2)
  int max_category3 = 16;  // category-3 candidates explored, smallest largest-part F_β first
};

// Rectify rate (note §7.5): an invalid group is rectified when Algorithm 1 split it into valid
// parts without the random fallback anywhere in its recursion. `distinct_*` count each invalid
// group once (memo hits excluded), `calls_*` every repair request.
struct RectifyStats {
  int64_t calls = 0, calls_rectified = 0;
  int64_t distinct = 0, distinct_rectified = 0;
  int64_t fallbacks = 0;  // random splits Algorithm 1 fell back to (anywhere in a recursion)
  double rate() const { return distinct ? static_cast<double>(distinct_rectified) / distinct : 0.0; }
  double call_rate() const { return calls ? static_cast<double>(calls_rectified) / calls : 0.0; }
};

// Repairs invalid groups: with no explainer by the random split (not memoised: the baseline draws
// afresh each time), else by Algorithm 1 (memoised per node set).
class Splitter {
 public:
  Splitter(Evaluator& ev, Explainer* explainer, SplitOptions opt, std::mt19937_64& rng);
  // Appends valid parts covering `group` to `out` (the group itself when it is valid).
  void repair(std::span<const int32_t> group, std::vector<Group>& out);
  const RectifyStats& stats() const { return stats_; }
  bool uses_explainer() const { return explainer_ != nullptr; }

 private:
  struct Outcome {
    std::vector<Group> parts;
    double dram = 0;
    bool fallback = false;
  };
  struct GroupHash {
    size_t operator()(const Group& g) const noexcept;
  };
  const Outcome& split(const Group& group, int depth);
  Outcome fallback_split(std::span<const int32_t> group);

  Evaluator& ev_;
  Explainer* explainer_;
  SplitOptions opt_;
  std::mt19937_64& rng_;
  Workspace ws_;
  RectifyStats stats_;
  std::unordered_map<Group, Outcome, GroupHash> memo_;  // node references stay valid on rehash
  std::unordered_set<Group, GroupHash> seen_invalid_;    // top-level invalid groups, for `distinct`
};

}  // namespace mapfuse::get
