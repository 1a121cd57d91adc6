#pragma once
// The true optimum of GET-fusion's problem (beyond the paper; docs/get_search.md §6): the
// minimum-DRAM valid plan. A valid plan's groups can be ordered along a topological order of its
// quotient graph, so every plan is a path through the lattice of ideals (down-closed node sets,
// i.e. topological cuts) where each step adds one weakly connected, valid group whose nodes'
// predecessors are all behind the cut. Dijkstra over that lattice is exact for any DAG; on a chain
// the ideals are the prefixes and it is the interval DP. Stopped by a limit, it reports the best
// plan known (the interval DP's) and a lower bound (the last distance settled) with their gap.
#include <cstdint>
#include <string>

#include "engine/search/get/plan.hpp"

namespace mapfuse::get {

struct ExactOptions {
  double time_limit_s = 60;    // wall-clock limit; <= 0: none
  int64_t max_states = 0;      // ideals expanded before stopping (deterministic limit); 0: none
  // Prune a group's growth once F_β itself reaches β, as if F_β never decreased when nodes are
  // added. Not a proof unless the model is monotone; the result says whether it was used.
  bool assume_monotone = false;
};

struct ExactResult {
  Plan plan;                 // best plan known (the optimum when `optimal`)
  double lower_bound = 0;    // on the optimal Σ F_D, bytes
  bool optimal = false;      // proven (the search finished)
  double gap = 0;            // (dram − lower_bound) / dram
  int64_t states = 0;        // ideals expanded
  int64_t groups = 0;        // candidate groups enumerated
  bool assumed_monotone = false;
  double interval_dram = -1;  // the interval DP's plan (topologically contiguous groups), -1 if none
};

ExactResult exact_optimum(const Problem& p, Evaluator& ev, const ExactOptions& opt = {});

}  // namespace mapfuse::get
