#pragma once
// The search space shared by FADiff and its baselines (DOSA-style, GA, BO): for every MAC Einsum of
// a workload the free tiling factors of the relaxed model (engine/cost/relaxed.hpp), chosen one after
// another among the divisors of what is left of their rank (so that every decoded point is a
// structurally valid integer mapping: factors multiply to the rank sizes, spatial factors fit the
// fan-out), the DRAM temporal factor taking the remainder; and one fusion flag per producer->consumer
// edge. `ExactNetworkEvaluator` turns such a point into exact-model costs (engine/cost/model.hpp),
// with the fused intermediates' DRAM traffic removed, the fusion-group capacity check, and repairs
// (docs/fadiff.md, "Decoding, verification and repair").
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/cost/model.hpp"
#include "engine/cost/plan.hpp"
#include "engine/cost/relaxed.hpp"
#include "engine/workload/workload.hpp"

namespace mapfuse {

// Most divisors a rank of the workloads in scope has (16384 has 15, 8192*3 has 28); checked.
inline constexpr int kMaxDivisors = 256;

// One free tiling factor: T_t[rank][level] or T_s[rank][level] of one layer.
struct FactorVar {
  int var = 0;      // index into the layer's variables (RelaxedLayer::tt / ts)
  int8_t rank = 0, level = 0;
  int8_t axis = -1;  // spatial: fan-out axis of `level` (0 = x, 1 = y); -1 = temporal
};

struct LayerSpace {
  // Decode order: spatial factors inner -> outer, then temporal factors inner -> outer (DOSA's
  // round_mapping order); every rank's DRAM temporal factor is the remainder.
  std::vector<FactorVar> vars;
  std::array<std::vector<int64_t>, kMaxRanks> divisors;  // of each rank size, ascending
};

// Candidates for one factor: divisors of what is left of the rank, at most the fan-out left on the
// axis for a spatial factor. Always contains 1.
struct Candidates {
  int n = 0;
  std::array<int64_t, kMaxDivisors> value{};
};

class SearchSpace {
 public:
  // Builds the relaxed network and the free variables. Temporal factors below a one-entry level
  // keeping a tensor the rank indexes (Gemmini's weight registers) are fixed at 1. Throws
  // InputError when the workload has no MAC Einsum, a rank has too many divisors, a layer has no
  // structurally valid mapping in this space (spatial limits, keeps), or a buffer is too small for
  // the smallest tiles of some layer (everything at DRAM).
  SearchSpace(const Workload& w, const Core& c);

  const RelaxedNetwork& net() const { return net_; }
  const Workload& workload() const { return *w_; }
  const Core& core() const { return *c_; }
  int n_layers() const { return static_cast<int>(net_.layers.size()); }
  int n_edges() const { return static_cast<int>(net_.edges.size()); }
  const LayerSpace& layer(int v) const { return layers_[v]; }
  int n_factor_genes() const { return n_factor_genes_; }  // free factors over all layers
  int gene_begin(int v) const { return gene_begin_[v]; }  // first free factor of layer v
  int n_genes() const { return n_factor_genes_ + n_edges(); }

  // Decodes layer v: for every free factor i (in decode order) `choose(i, candidates)` returns the
  // index of the chosen candidate; writes the layer's n_vars() factors (integers) into x.
  template <class Choose>
  void decode_layer(int v, double* x, Choose&& choose) const {
    const RelaxedLayer& L = net_.layers[v];
    const LayerSpace& S = layers_[v];
    std::array<int64_t, kMaxRanks> left{};
    for (int d = 0; d < L.n_ranks; ++d) left[d] = L.rank_size[d];
    std::array<std::array<int64_t, 2>, kMaxLevels> fan{};
    for (int m = 0; m < L.n_levels; ++m) fan[m] = L.levels[m].fanout;
    std::fill_n(x, L.n_vars(), 1.0);
    Candidates c;
    for (int i = 0; i < static_cast<int>(S.vars.size()); ++i) {
      const FactorVar& f = S.vars[i];
      const int64_t cap = f.axis >= 0 ? fan[f.level][f.axis] : left[f.rank];
      c.n = 0;
      for (int64_t d : S.divisors[f.rank]) {
        if (d > cap || d > left[f.rank]) break;
        if (left[f.rank] % d == 0) c.value[c.n++] = d;
      }
      const int k = choose(i, c);
      const int64_t pick = c.value[k];
      x[f.var] = static_cast<double>(pick);
      left[f.rank] /= pick;
      if (f.axis >= 0) fan[f.level][f.axis] /= pick;
    }
    for (int d = 0; d < L.n_ranks; ++d) x[L.tt(L.n_levels - 1, d)] = static_cast<double>(left[d]);
  }

 private:
  const Workload* w_;
  const Core* c_;
  RelaxedNetwork net_;
  std::vector<LayerSpace> layers_;
  std::vector<int> gene_begin_;
  int n_factor_genes_ = 0;
};

// Loop-order variants tried at DRAM when decoding (DOSA tries WS, IS and OS at every rounding):
// `stationary` role's ranks outermost. The inner levels keep the relaxed layer's order.
LoopOrders dram_stationary_orders(const RelaxedLayer& L, TensorRole stationary);

// The exact cost of a decoded network point. Not thread-safe (scratch space); cheap to construct.
class ExactNetworkEvaluator {
 public:
  // `try_orders`: evaluate each layer under the WS, IS and OS DRAM orders and keep, layer by
  // layer, the one that lowers network EDP most (one coordinate pass from WS).
  ExactNetworkEvaluator(const SearchSpace& s, bool try_orders = true);

  struct Result {
    bool valid = false;  // false only if a layer could not be repaired (cannot happen past the
                         // SearchSpace checks)
    double energy_pj = 0, cycles = 0;
    double edp() const { return energy_pj * cycles; }
    std::vector<uint8_t> fused;         // per edge, after repair
    int capacity_repairs = 0;           // prime factors moved to DRAM to fit a layer's buffers
    int group_splits = 0;               // fused edges cut to fit a group into the fusion level
    std::vector<int> order;             // per layer: 0 WS, 1 IS, 2 OS (index into variants)
    std::vector<double> layer_energy_pj, layer_cycles;  // per layer (one instance, count not applied)
    std::vector<double> dram_words_saved;               // per layer: DRAM words removed by fusion
    std::vector<double> layer_dram_words;  // per layer: DRAM reads + fills + updates left after fusion
  };

  // x: factors of every layer (SearchSpace::net() layout; sigma entries ignored), modified in place
  // by the capacity repair; fused: per edge. Counts one exact network evaluation. The result lives
  // in the evaluator until the next call (no allocation per call once sized).
  const Result& evaluate(std::span<double> x, std::span<const uint8_t> fused);

  // The mapping of layer v for factors x (layer variables) under DRAM order variant `order`.
  Mapping mapping(int v, const double* x, int order) const;

  // Fusion groups (layer indices, topological order) for per-edge fused flags.
  std::vector<std::vector<int>> groups(std::span<const uint8_t> fused) const;

  int64_t evaluations() const { return evaluations_; }

 private:
  struct LayerEval {
    std::array<CostResult, 3> r;
    int n_orders = 1;
  };
  void evaluate_layer(int v, double* x, LayerEval& out, int& repairs);
  const SearchSpace& s_;
  bool try_orders_;
  std::vector<EvalPlan> plans_;
  std::vector<std::array<RelaxedLayer, 3>> variants_;
  std::vector<LayerEval> scratch_;
  Result res_;
  std::vector<int> root_, cut_;
  std::vector<double> sub_, total_, part_;
  std::vector<std::array<double, 3>> en_, cy_, saved_, dram_;
  int64_t evaluations_ = 0;
};

// FlatMapping of a relaxed layer's integer factors (as flatten(mapping_from_factors(L, x))),
// allocation-free.
FlatMapping flat_from_factors(const RelaxedLayer& L, const double* x);

}  // namespace mapfuse
