#pragma once
// Exhaustive, exact search of one Einsum's mapspace on one core: every factorisation of every
// rank over the levels' temporal and spatial slots, every choice of kept tensors the
// architecture and constraints allow, and every temporal loop order of the ranks a level
// actually iterates. Levels are chosen innermost first, so a level whose kept tiles overflow its
// capacity is pruned with everything above it (exact: such mappings are invalid). Complete
// choices are grouped by support (which ranks each level iterates and spreads, what it keeps) and
// evaluated 16 at a time by the SIMD lane evaluator, once per loop-order class. OpenMP over the
// innermost level's choices; the result does not depend on the thread count (ties are broken by
// the mapping's text). Without the front, branch and bound skips choices that cannot be optimal.
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "engine/cost/model.hpp"
#include "engine/search/mapspace.hpp"
#include "engine/search/random_search.hpp"

namespace mapfuse {

struct ExhaustiveOptions {
  Objective objective = Objective::Edp;
  bool prune = true;          // false: evaluate over-capacity mappings too (for testing)
  bool reduce_orders = true;  // false: every loop order, even those that cost the same (testing)
  // A level keeping no tensor leaves its temporal factors to the level above when that one has no
  // fan-out (TileSearchSpec::merge_passthrough): the optimum and the front keep their costs (a
  // merged nest costs no more), the optimum's text may differ. false: every split (testing).
  bool merge_passthrough = true;
  int64_t max_mappings = 0;   // stop with an error beyond this many evaluations; 0 = no limit
  // true: also the energy/cycles Pareto front of the valid mappings. false: the optimum only.
  // With `bound`, both by branch and bound (TileSearchSpec::bound_scalar): partial choices whose
  // completions' lower bounds the best mapping found so far beats (a front: strictly dominates)
  // are not extended; the counts depend on the thread count, the optimum and the front do not.
  bool front = true;
  bool bound = true;  // false: evaluate the whole mapspace (--no-bound; testing)
  // Tensors the caller's constraints hold whole on chip (Stream's per-tile costs, tile_cost.hpp):
  // the outermost level does not keep them and their outermost kept level is their backing store
  // (FlatMapping::onchip_backing; Mapping::levels.back().keep still lists them). The constraints
  // must keep each at one level with no loop above it over its ranks. Branch and bound works
  // with it (its bounds do not depend on where a tensor is backed).
  TensorMask onchip_backing = 0;
  // Only mappings of at most this many cycles count (and branch and bound cuts choices whose
  // cycles bound exceeds it): with objective Energy and the least cycles found by a first search,
  // the least energy among the fastest mappings (Stream's "min latency, then min energy").
  double max_cycles = std::numeric_limits<double>::infinity();
  // Of the mappings that tie on the objective, the least energy (then the smaller text): with
  // objective Cycles, Stream's "min latency, then min energy" in one search, whose bound cuts
  // by energy among the choices that can only tie on cycles.
  bool energy_tiebreak = false;
  // Branch and bound: extend each level's choices in the order of their bounds (best first), so
  // that a good mapping comes early and cuts more (TileSearchSpec::best_first). Same answer.
  bool best_first = true;
  // Search one of each mapping and its mirror image where the Einsum and the core are symmetric
  // under swapping pairs of ranks (TileSearchSpec::break_symmetry): the same optimum, half the
  // work on a square convolution. false: every mapping (--no-symmetry; testing).
  bool symmetry = true;
  // Branch and bound: a value of the objective that some mapping of the mapspace is known to
  // reach (e.g. the optimum of a narrower mapspace): choices whose bound is above it are cut from
  // the start, and only mappings of at most this value count: a value below the optimum leaves
  // no mapping (best stays empty).
  double upper_bound = std::numeric_limits<double>::infinity();
  // With energy_tiebreak and a finite upper_bound: the energy of a mapping known to reach
  // upper_bound; mappings that tie on it with more energy do not count either (e.g. the best of an
  // earlier search over another kept set).
  double upper_bound_energy = std::numeric_limits<double>::infinity();
  // Branch and bound with a relative optimality gap (a MIP solver's "gap"): a choice is cut once
  // its bound, raised by this fraction, is not below the best found. With energy_tiebreak only the
  // energy gets the gap (the objective stays exact: the least cycles are found), otherwise the
  // objective. The result is then at most (1 + gap) x the optimum in that quantity, not always the
  // optimum, and which of the near-optimal mappings it is depends on the order in which they are
  // found: a search with a gap runs on one thread, so that the answer is deterministic. 0: exact.
  double gap = 0;
  // An anytime search: stop after this much work (TileSearchSpec::max_work: level choices
  // enumerated; ~0.1 us each on Stream's cores) with the best mapping found, which is then not
  // proven optimal (MapperResult::truncated). Like a gap, it runs on one thread, so where it stops
  // and what it returns are deterministic. 0: no limit (exact).
  int64_t max_work = 0;
};

struct ParetoMapping {
  double energy_pj = 0;
  double cycles = 0;
  Mapping mapping;
};

struct MapperResult {
  std::optional<Mapping> best;  // empty when no valid mapping exists
  CostResult cost;
  std::vector<ParetoMapping> pareto;  // energy / cycles front of the valid mappings, by energy
  int64_t evaluated = 0;  // by the search proper
  int64_t valid = 0;
  // Branch and bound: mappings evaluated by the probes of the roots before the search
  // (exhaustive.cpp), on top of `evaluated`; the search evaluates some of them again.
  int64_t probe_evaluated = 0;
  // At least this many mappings in the mapspace (TileSearch::temporal_mapspace_size: tile shapes
  // over the temporal loops times kept sets; spatial factors and loop orders only multiply it).
  double mapspace_at_least = 0;
  int64_t pruned = 0;      // partial mappings cut at a full level
  int64_t lane_calls = 0;  // SIMD evaluator calls (evaluated / lane_calls = lanes filled)
  // Branch and bound: per level, choices cut because the best mapping (or the front) found so far
  // beat the lower bounds of all their completions.
  std::vector<int64_t> bound_pruned;
  // Branch and bound: complete choices that passed their bound when parked for SIMD evaluation
  // but were beaten by a better mapping found before their bucket was evaluated (not evaluated).
  int64_t stale_dropped = 0;
  // Branch and bound: (complete choice, loop-order combination) lanes not evaluated because the
  // top's traffic in that loop order beat them (TileWorker's per-order bound).
  int64_t order_pruned = 0;
  // ExhaustiveOptions::max_work stopped the search: `best` is the best found, not proven optimal.
  bool truncated = false;
  int64_t work = 0;  // level choices enumerated (TileSearch::work), counted with a work limit only
};

// Throws InputError if the mapspace exceeds options.max_mappings.
MapperResult exhaustive_search(const Einsum& e, const Core& c, const Mapspace& space,
                               const ExhaustiveOptions& options = {});

}  // namespace mapfuse
