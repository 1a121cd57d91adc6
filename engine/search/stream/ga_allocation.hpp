#pragma once
// Stream classic's genetic allocator (the baseline of Stream §5.5, Fig. 13: Karl et al., DATE
// 2023; shared/notes/stream_zigzag.md §2.2 item 6): NSGA-II over layer -> core allocations, one
// gene per (layer, inter-core group) whose layer more than one core can run, two minimised
// objectives (latency, energy), each fitness a full COALA schedule of the whole CT graph.
// docs/stream.md, "Genetic allocator".
//
// The per-tile costs of every (CT, candidate core) are computed once, before the search
// (capable_cores, candidate_tiles, then one map_tile_costs or table call); a fitness then only
// rewrites the per-CT core, runtime and energies of one coala::Problem that lives as long as the
// evaluator.
#include <cstdint>
#include <span>
#include <vector>

#include "engine/arch/architecture.hpp"
#include "engine/cost/coala.hpp"
#include "engine/cost/tile_cost.hpp"
#include "engine/search/stream/allocation.hpp"
#include "engine/search/stream/schedule_problem.hpp"
#include "engine/workload/tile_graph.hpp"

namespace mapfuse {

// The CTs of `tiles` repeated once per candidate slot: tile j*n + t is CT t (n CTs) and `cores`
// holds, for it, the (j mod k)-th of the k capable cores of its layer. One map_tile_costs or
// tile-cost table call on it costs every (CT, candidate core) pair, each unique key once.
struct CandidateTiles {
  TileSet tiles;
  std::vector<int> cores;
  int slots = 0;  // the largest number of capable cores of a layer
};
CandidateTiles candidate_tiles(const TileSet& tiles, const std::vector<std::vector<int>>& layer_cores);

// Evaluates allocations by COALA on one reused problem.
class AllocationEvaluator {
 public:
  // candidate_costs: the costs of the CandidateTiles built from the same tiles and layer_cores
  // (size slots * CTs). InputError on mismatched sizes.
  AllocationEvaluator(const Workload& w, const TileGraph& g, const Architecture& arch,
                      std::vector<std::vector<int>> layer_cores, std::vector<TileCost> candidate_costs,
                      const ScheduleProblemOptions& popt, const coala::Options& opt);

  // The genome: per gene its layer and group; a value is a core index (Stream's encoding).
  struct Gene {
    int layer = 0, group = 0;
  };
  const std::vector<Gene>& genes() const { return genes_; }
  const std::vector<int>& choices(int gene) const { return layer_cores_[size_t(genes_[size_t(gene)].layer)]; }

  // Per CT its core; layers with a single capable core take it.
  std::vector<int> core_of_tile(std::span<const int> genome) const;
  // The genome of a per-CT allocation (the core of each gene's first CT). InputError when a CT's
  // core cannot run its layer or differs from that of its group's other CTs.
  std::vector<int> genome_of(std::span<const int> core_of_tile) const;

  // The COALA schedule of the allocation (coala::schedule's InputError when it refuses it, e.g. a
  // CT whose tensors its core's memory cannot hold; counted in evaluations() all the same). No
  // problem copy: the CTs' core, runtime and energies are rewritten in place; only when a CT's too-large operands (TileCost::operands offchip flags or
  // bandwidths) differ between its candidate cores is the problem rebuilt (counted in rebuilds()).
  const coala::Schedule& evaluate(std::span<const int> genome);
  int64_t evaluations() const { return evaluations_; }
  int64_t rebuilds() const { return rebuilds_; }
  const coala::Problem& problem() const { return problem_; }
  // The cost of CT t on core c (c must be one of its layer's capable cores).
  const TileCost& cost(int tile, int core) const;

 private:
  const Workload* w_;
  const TileGraph* g_;
  const Architecture* arch_;
  std::vector<std::vector<int>> layer_cores_;
  std::vector<TileCost> costs_;
  ScheduleProblemOptions popt_;
  coala::Options opt_;
  std::vector<Gene> genes_;
  std::vector<int> gene_of_tile_;   // -1 for a CT whose layer has one capable core
  std::vector<int> slot_of_core_;   // per (layer, core): its candidate slot, -1 when not capable
  std::vector<char> same_blocks_;   // per CT: every candidate's operand flags agree
  bool all_same_blocks_ = true;
  std::vector<int> built_cores_;    // the allocation problem_'s block structure was built for
  coala::Problem problem_;
  coala::Schedule schedule_;
  std::vector<int> cores_;          // scratch
  int64_t evaluations_ = 0, rebuilds_ = 0;
};

struct GaOptions {
  int generations = 16;
  int population = 16;   // lambda = population offspring per generation, mu = population / 2 kept
  uint64_t seed = 1;
  double crossover_probability = 0.3;  // Stream's cxpb
  double mutation_probability = 0.7;   // Stream's mutpb
};

struct GaPoint {
  std::vector<int> genome;
  double latency_cc = 0, energy_pj = 0;
  double edp() const { return latency_cc * energy_pj; }
};

// Best so far after a generation (0 = the initial population), over every allocation evaluated.
struct GaGeneration {
  int generation = 0;
  int64_t evaluations = 0;
  double best_latency_cc = 0, best_energy_pj = 0, best_edp = 0;
};

struct GaResult {
  GaPoint best;                     // least EDP of the front (ties: the first found)
  std::vector<GaPoint> front;       // non-dominated over every allocation evaluated, by latency
  std::vector<GaGeneration> trace;  // generations + 1 entries
  int64_t evaluations = 0;          // COALA schedules run (an allocation seen before is not rescheduled)
  int64_t infeasible = 0;           // of them, allocations the scheduler refused (InputError)
  int64_t offspring = 0;            // individuals created (evaluated or found in the cache)
  double seconds = 0;
};

// NSGA-II (mu + lambda, DEAP's eaMuPlusLambda with selNSGA2, as Stream classic runs it):
// `population` random genomes, then per generation `population` offspring, each from a crossover
// of two random parents (probability cxpb; ordered crossover over more than 10 genes, else two
// point), a mutation of one (mutpb; with probability 0.75 each gene redrawn with probability
// 1/genes, else two genes swapped) or a copy; the next population is the best population / 2 of
// parents and offspring by non-dominated rank, then crowding distance. Deterministic for a seed.
// An allocation the scheduler refuses is infeasible (worse than every other; GaResult::infeasible).
// InputError as check_ga_options, or when every allocation drawn is refused.
GaResult ga_allocate(AllocationEvaluator& ev, const GaOptions& opt);
// InputError (keys --population, --generations) for a population below 2 or negative generations
// (callers check before costing the tiles).
void check_ga_options(const GaOptions& opt);

// Indices of the non-dominated points (both objectives minimised; equal points all kept), in
// ascending latency.
std::vector<int> pareto_front(std::span<const GaPoint> points);

}  // namespace mapfuse
