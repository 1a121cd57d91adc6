#pragma once
// The baselines FFM is compared with (FFM paper §7.2, Figure 8), on FFM's own fused mapspace and
// cost model: every point they visit is a LoopTree built from one pmapping context per Einsum
// (make_contexts: fusion decisions, backing level, shared loops) and a tile mapping inside it,
// priced end to end by evaluate_fused, exactly as FFM prices its result. docs/ffm.md, "Baselines".
//  - Random: Timeloop's random-sampling mapper; every sample independent.
//  - Annealing: simulated annealing as in SET: one move at a time (a new tile mapping for one
//    Einsum, or new fusion decisions from one Einsum on), Metropolis acceptance on the log of the
//    objective, geometric cooling over the budget.
//  - Genetic: TileFlow-style genetic algorithm: populations of 10, one-point crossover between
//    Einsums with probability 0.7, mutation (an annealing move) with probability 0.2, elitism.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/arch/architecture.hpp"
#include "engine/mapping/looptree.hpp"
#include "engine/search/mapspace_toml.hpp"
#include "engine/search/random_search.hpp"
#include "engine/workload/workload.hpp"

namespace mapfuse::ffm {

enum class Baseline : uint8_t { Random, Annealing, Genetic };

Baseline parse_baseline(std::string_view name);  // "random" | "sa" | "ga"; InputError otherwise
std::string_view to_string(Baseline b);

struct BaselineOptions {
  Objective objective = Objective::Edp;
  double time_budget_s = 10;    // > 0, wall clock
  int64_t max_evaluations = 0;  // 0 = none; a run it ends is deterministic for a seed
  uint64_t seed = 1;
  // Annealing: initial temperature on ln(objective), cooled geometrically to t_end.
  double t_start = 1.0, t_end = 0.01;
  double context_move = 0.2;  // share of moves that redraw fusion decisions (else one tile mapping)
  // Genetic (TileFlow's settings)
  int population = 10;
  double crossover = 0.7, mutation = 0.2;
  // Mapspace constraints (as for `map` and FFM's PmappingOptions::constraints) on every Einsum's
  // tile mappings: contexts whose backed tensors a keep constraint leaves out are never drawn, and
  // a drawn tile mapping that breaks a factor bound is redrawn (after 1,000 tries the point counts
  // as invalid).
  std::vector<ConstraintSpec> constraints;
  // Testing: price every point also with evaluate_fused on its LoopTree and throw
  // std::logic_error if the incremental pricing differs (slow).
  bool verify = false;
};

struct BaselineTracePoint {
  double seconds = 0;
  int64_t evaluations = 0;
  double best = 0;
};

struct BaselineResult {
  bool found = false;  // a valid (within capacity) fused mapping was found
  double energy_pj = 0, cycles = 0, objective = 0;
  LoopTree tree;          // the best, as evaluate_fused priced it
  int64_t evaluations = 0;  // fused mappings priced (invalid points included)
  int64_t valid = 0;        // of which within capacity
  double seconds = 0;
  std::string stopped_by;   // "time" or "evaluations"
  std::vector<BaselineTracePoint> trace;  // each improvement of the best
};

BaselineResult run_baseline(const Workload& w, const Core& c, Baseline b, const BaselineOptions& o);

}  // namespace mapfuse::ffm
