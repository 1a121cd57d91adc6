#pragma once
// Joint mapping and fusion search for a whole network on one core: FADiff (Gumbel-softmax over
// divisors, straight-through estimator, fusion variables sigma, penalties, Adam, multi-start) and
// its baselines on the same encoding (engine/search/fadiff/encoding.hpp) and budget: DOSA-style
// layer-wise gradient search (no fusion, Adam with periodic rounding to divisors), a genetic
// algorithm and Bayesian optimisation (Gaussian process, expected improvement). The reported EDP is
// always the exact model's (ExactNetworkEvaluator). docs/fadiff.md describes every method.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/arch/architecture.hpp"
#include "engine/mapping/mapping.hpp"
#include "engine/search/fadiff/gumbel.hpp"
#include "engine/workload/workload.hpp"

namespace mapfuse {

enum class Method : uint8_t { FADiff, DosaStyle, Genetic, Bayesian };

// "fadiff", "dosa", "ga", "bo" (also "genetic", "bayesian", "dosa_style"); InputError otherwise.
Method parse_method(std::string_view name);
std::string_view to_string(Method m);

struct OptimizeOptions {
  // Budget: the run stops at whichever comes first. The time budget must be > 0 (seconds of
  // wall time); max_evaluations 0 = no evaluation budget. A run is deterministic for a seed when
  // the evaluation budget ends it (OptimizeResult::stopped_by == "evaluations").
  double time_budget_s = 10;
  int64_t max_evaluations = 0;
  uint64_t seed = 1;
  bool try_dram_orders = true;  // decode: WS/IS/OS DRAM order per layer (all methods)

  // Gradient methods (FADiff, DOSA-style). Each start runs `steps_per_start` Adam steps; starts
  // follow one another until the budget ends (max_starts 0 = no limit).
  int steps_per_start = 300;
  int max_starts = 0;
  int init_samples = 32;       // a start begins at the best of this many random points (exact)
  // Step sizes and temperatures were tuned per method on development seeds 11-13 (ResNet-18,
  // VGG-16, MobileNetV1 on Small and Large Gemmini, 7 s budgets), not on the Table 1 seeds;
  // docs/fadiff.md "Tuning" has the figures. Each method gets its own best setting.
  double lr = 0.12;           // FADiff: Adam step on u = ln T
  double dosa_lr = 0.04;      // DOSA-style: Adam step on u = ln T
  double sigma_lr = 0.05;     // Adam step on sigma (FADiff)
  double sigma_init = 0;      // every edge starts unfused; the EDP gradient opens them
  double lambda = 1;          // penalty weight (Eq. 20), on normalised penalties (docs/fadiff.md)
  double align_weight = 1e-3; // extra factor on P_align
  // FADiff
  double alpha = 2;           // proximity logit scale (Eq. 1)
  double tau0 = 0.6, tau_min = 0.1;  // temperature, annealed geometrically over each start
  Proximity proximity = Proximity::Log;
  int decode_every = 10;      // exact decode of the current point every this many steps
  bool decode_max_fusion = true;  // end of a start: also decode with every edge fused (then repaired)
  // DOSA-style: round to divisors every this many steps and at the end of a start.
  int round_every = 100;
  // GA (settings of FADiff's public precursor, shared/notes/dosa_gemmini.md section 7).
  int population = 50;
  double crossover = 0.8, mutation = 0.1;
  int tournament = 3;
  // BO
  int bo_initial = 20;        // random points before the GP (skopt's min(20, n/2) default)
  int bo_candidates = 1000;   // random candidates scored by EI per iteration (then local search)
  int bo_max_points = 400;    // GP fitted on at most this many (the best) observations
};

struct TracePoint {
  double seconds = 0;
  int64_t evaluations = 0;  // cost-model evaluations of the whole network so far (see below)
  double best_edp = 0;      // best exact EDP so far
};

struct OptimizeResult {
  Method method = Method::FADiff;
  bool found = false;
  // Exact model: network energy (pJ), delay (cycles, layers in sequence), EDP; MAC layers only,
  // weighted by counts.
  double energy_pj = 0, cycles = 0, edp = 0;
  std::vector<std::string> layers;    // MAC Einsum names, in network order
  std::vector<Mapping> mappings;      // per layer
  std::vector<double> factors;        // the reported point (SearchSpace::net() layout, repaired):
                                      // re-priced under another fusion by price_fusion (cross.hpp)
  std::vector<std::pair<int, int>> edges;  // producer -> consumer (layer indices)
  std::vector<uint8_t> fused;         // per edge
  std::vector<std::vector<int>> groups;    // fusion groups (layer indices)
  double dram_words_saved = 0;        // by fusion, weighted by counts
  int capacity_repairs = 0, group_splits = 0;  // repairs in the reported decode
  // Evaluations: relaxed gradient steps (FADiff, DOSA-style) plus exact network evaluations
  // (every decode, every GA/BO sample).
  int64_t evaluations = 0, gradient_steps = 0, exact_evaluations = 0;
  int starts = 0;
  double seconds = 0;
  std::string stopped_by;  // "time", "evaluations" or "starts"
  std::vector<TracePoint> trace;  // each improvement of the best exact EDP
};

// Throws InputError for a time budget <= 0 (or not finite), a negative evaluation budget, an
// unknown method, a workload without MAC Einsums, a layer with no valid factorisation under the
// spatial limits or a buffer too small for any mapping of some layer (SearchSpace).
OptimizeResult optimize_network(const Workload& w, const Core& c, Method method, const OptimizeOptions& o);

}  // namespace mapfuse
