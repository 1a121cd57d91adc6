#pragma once
// Internals of optimize_network shared by the methods: the run state (budget, best-so-far exact
// EDP, trace) and the gene-space baselines (GA, BO). Genes are numbers in [0, 1): a factor gene
// picks candidate floor(g * n) of its n candidates (SearchSpace::decode_layer), a fusion gene
// fuses its edge when > 0.5.
#include <chrono>
#include <span>
#include <vector>

#include "engine/search/fadiff/encoding.hpp"
#include "engine/search/fadiff/optimize.hpp"

namespace mapfuse {

struct SearchRun {
  SearchRun(const SearchSpace& s, const OptimizeOptions& o, OptimizeResult& r);
  const SearchSpace& space;
  const OptimizeOptions& opt;
  OptimizeResult& res;
  ExactNetworkEvaluator ev;
  std::chrono::steady_clock::time_point t0;
  bool have_best = false;
  ExactNetworkEvaluator::Result best;
  std::vector<double> best_x;

  double seconds() const;
  // Budget exhausted? Sets res.stopped_by.
  bool done();
  // One exact network evaluation (counted); x is repaired in place; updates best and trace.
  // Returns the exact EDP (infinity if invalid).
  double consider(std::span<double> x, std::span<const uint8_t> fused);
  void finish();
};

// Decodes genes (SearchSpace::n_genes()) into factors x (net layout) and fused flags.
void decode_genes(const SearchSpace& s, std::span<const double> genes, std::span<double> x, std::span<uint8_t> fused);

void run_genetic(SearchRun& run);
void run_bayesian(SearchRun& run);

}  // namespace mapfuse
