#pragma once
// GET-fusion's fusion-group models (docs/get.md, "Buffer and DRAM models"): the on-chip buffer a
// group of operators needs (F_beta) and its DRAM traffic (F_D) under line-buffer depth-first
// execution (LBDF) and Optimus's buffer requirement reduction (BRR). Element counts are exact
// integers; bytes = elements * bytes_per_element. A group is a sorted list of OpGraph node ids.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/workload/op_graph.hpp"

namespace mapfuse {

enum class FusionScheme : uint8_t { Lbdf, Brr };
std::string_view to_string(FusionScheme s);
FusionScheme fusion_scheme_from_string(std::string_view s);  // "lbdf" | "brr"; throws InputError

// LBDF line buffer of a windowed op: K_h padded input rows (the note's default), or
// (K_h - 1) rows plus one K_w window (the classic line buffer of the paper's Fig. 1).
enum class LineBufferForm : uint8_t { FullRows, RowsPlusWindow };

struct GroupModelOptions {
  int bytes_per_element = 2;
  int64_t kb = 1024;            // bytes per KB; MB = kb * kb
  LineBufferForm line_buffer = LineBufferForm::FullRows;
  bool count_bias = true;       // biases are weights (the note's 80,256 for VGG16 conv1_2 omits them)
  // LBDF skip connections: false keeps a branch tensor on chip until its join (skip buffer in
  // F_beta); true writes it to DRAM and reads it back at each join (no skip buffer; F_D gains
  // |T| once plus |T| per join), the alternative of Shi et al. that the note's §3.2 names.
  bool skip_to_dram = false;
  int brr_partition = 32;       // BRR's channel block k of a partially buffered conv output
  // Fuseable filter: merge every Unary/Reshape op into its single producer before testing
  // single-op validity (the note's §7.6 alternative); see fuseable_nodes().
  bool merge_activations = false;
};

struct GroupCost {
  int64_t buffer_elems = 0, dram_elems = 0;
  int64_t buffer_bytes = 0, dram_bytes = 0;
  int64_t weight_elems = 0;
  bool supported = true;  // false: the scheme cannot run this group (BRR: SE scale, first-node rule)
  bool valid(int64_t beta_bytes) const { return supported && buffer_bytes < beta_bytes; }
};

// Scratch space sized for one graph, reused across calls so group_cost allocates nothing.
class GroupWorkspace {
 public:
  explicit GroupWorkspace(const OpGraph& g);
  GroupWorkspace() = default;
  void reserve(const OpGraph& g);

  // Internal state (public for the model's free functions; not an interface).
  std::vector<int> local;     // node -> position in the group, or -1
  std::vector<int> stamp;     // node -> epoch of the last group that touched it
  int epoch = 0;
  std::vector<int64_t> a, b, c;  // per group position scratch
  std::vector<int> ia, ib;
  std::vector<uint64_t> mask;
  std::vector<int64_t> row, netrow;
  std::vector<int> pstamp;  // per group position: epoch (pepoch) of the skip source that set mask
  int pepoch = 0;  // per node / per network input: buffered elements of a tensor
};

// F_beta and F_D of one group (sorted ascending, distinct node ids, any shape: validity of the
// group as a plan member is check_plan's business). beta_bytes matters for BRR's F_D only.
GroupCost group_cost(const OpGraph& g, std::span<const int> sorted_nodes, FusionScheme scheme,
                     int64_t beta_bytes, const GroupModelOptions& opt, GroupWorkspace& ws);

// A 64-bit key for memo tables: a hash of the node-id set (equal sets, equal keys).
uint64_t group_key(std::span<const int> sorted_nodes);

// fuseable[v]: the op can run in some group at all: F_beta({v}) < beta (or, with
// merge_activations, F_beta of v with its chain of Unary/Reshape successors).
std::vector<char> fuseable_nodes(const OpGraph& g, FusionScheme scheme, int64_t beta_bytes,
                                 const GroupModelOptions& opt);

// ---- partition plans ----
using FusionGroup = std::vector<int>;  // sorted node ids
using PartitionPlan = std::vector<FusionGroup>;

struct PlanCheck {
  bool ok = true;
  std::string rule;   // "disjoint", "connected", "acyclic", "range" or empty
  std::string detail; // which group / node / cycle
};
// Groups disjoint, each weakly connected (through edges inside the group), quotient graph acyclic.
// Nodes not in any group are allowed (dropped, unfuseable ops).
PlanCheck check_plan(const OpGraph& g, const PartitionPlan& plan);

struct PlanCost {
  int64_t dram_bytes = 0;
  int64_t mbu_bytes = 0;  // max over groups of buffer_bytes
  int invalid_groups = 0; // groups with !valid(beta)
  bool valid = true;
};
PlanCost plan_cost(const OpGraph& g, const PartitionPlan& plan, FusionScheme scheme,
                   int64_t beta_bytes, const GroupModelOptions& opt, GroupWorkspace& ws);

// Every fuseable node its own group.
PartitionPlan singleton_plan(const std::vector<char>& fuseable);

}  // namespace mapfuse
