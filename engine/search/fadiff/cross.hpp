#pragma once
// Cross-method pricing (issue 23): another method's fusion decision - GET-fusion's groups of ONNX
// operators - priced by the exact network evaluator FADiff uses, on FADiff's own mapping, so that
// two fusion methods meet on one cost model and differ only in what they fuse
// (docs/get_search.md, "GET groups on FADiff's cost model").
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/search/fadiff/encoding.hpp"
#include "engine/workload/op_graph.hpp"

namespace mapfuse {

// The operator of `g` an Einsum of the ONNX importer stands for: the ONNX node of the same name,
// or, for an unnamed node (Einsum "Op:output"), the node named after its first output. Throws
// InputError (key "--workload") when there is none: the graph and the workload are different files.
int op_node_of_einsum(const OpGraph& g, const std::string& einsum_name);

// Per edge of `net` (producer -> consumer MAC layers): fused iff both layers' operators lie in the
// same group of `groups` (node ids of `g`; a node in no group is a group of its own). Unary
// operators folded into an Einsum by the importer are not checked: the group holds both ends.
std::vector<uint8_t> fused_edges_of_groups(const RelaxedNetwork& net, const OpGraph& g,
                                           std::span<const std::vector<int32_t>> groups);

struct FusionPrice {
  double energy_pj = 0, cycles = 0, edp = 0;  // network, MAC layers weighted by counts
  double dram_words = 0;                      // DRAM reads + fills + updates, weighted by counts
  int fused_edges = 0;                        // after the evaluator's group splits
  int group_splits = 0, capacity_repairs = 0;
  std::vector<uint8_t> fused;                 // per edge, after repair
  std::vector<std::vector<int>> groups;       // layer indices
};

// Exact cost of fusion flags `fused` (per edge of s.net()) with the layer factors `x` held fixed
// (a copy is repaired, as ExactNetworkEvaluator::evaluate does). `try_orders` as the evaluator's:
// the DRAM loop order per layer is re-chosen for this fusion.
FusionPrice price_fusion(const SearchSpace& s, std::span<const double> x, std::span<const uint8_t> fused,
                         bool try_orders = true);

}  // namespace mapfuse
