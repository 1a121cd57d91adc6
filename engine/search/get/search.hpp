#pragma once
// GET-fusion's searches over partition plans (docs/get_search.md §5): random search, local search
// (top-K, 1-edit shift/merge/split) and a single-objective NSGA-II, each with a plan budget where
// every generated plan counts (after repair, memo hits included) and deterministic per seed.
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "engine/search/get/explain.hpp"
#include "engine/search/get/plan.hpp"
#include "engine/search/get/split.hpp"

namespace mapfuse::get {

enum class SearchKind : uint8_t { Random, Local, Nsga2 };
// Gnne, Pg, Rg: GNNExplainer, PGExplainer and RG-Explainer against the trained classifier
// (engine/search/get/gnn/), which need the network's operator graph: partition_network makes
// them, make_explainer cannot.
enum class SplitKind : uint8_t { Random, Cut, Occlusion, Dp, Gnne, Pg, Rg };
inline bool uses_gnn(SplitKind k) { return k == SplitKind::Gnne || k == SplitKind::Pg || k == SplitKind::Rg; }

SearchKind search_kind_from_string(std::string_view s);  // rs | ls | nsga2; throws InputError
SplitKind split_kind_from_string(std::string_view s);    // random | cut | occlusion | dp | gnne | pg | rg; throws InputError
std::string_view to_string(SearchKind k);
std::string_view to_string(SplitKind k);
// The explainer behind a split kind; null for the random baseline. Throws std::logic_error for
// the GNN explainers (see gnn::make_gnn_explainer, make_pg_explainer, make_rg_explainer).
std::unique_ptr<Explainer> make_explainer(SplitKind k, double occlusion_fraction = 0.2);

struct SearchOptions {
  int64_t budget = 2000;  // plans generated, every one counted
  uint64_t seed = 1;
  int population = 10;    // K of LS and NSGA-II ([P] §IV-B)
  SplitOptions split;
  double crossover_rate = 1.0;  // NSGA-II: HUX probability (Platypus's default)
  double mutation_rate = 0;     // NSGA-II: per-bit flip probability; 0 = 1/genes
};

struct TracePoint {
  int64_t plan = 0;  // 1-based index of the plan that improved the best
  double dram = 0;
};

struct SearchResult {
  Plan best;
  int64_t plans = 0;
  RectifyStats rectify;
  bool rectify_defined = false;  // false for the random baseline (no explanation to rectify with)
  std::vector<TracePoint> trace;
  int64_t model_calls = 0;  // F_β/F_D evaluations that missed the memo
};

// Throws InputError when the budget is below 1.
SearchResult run_search(const Problem& p, SearchKind kind, Explainer* explainer, const SearchOptions& opt);

}  // namespace mapfuse::get
