#pragma once
// GET-fusion's partition problem for a real network: the operator graph (engine/workload/op_graph)
// priced by the LBDF/BRR fusion-group models (engine/cost/fusion_group).
#include <memory>

#include "engine/cost/fusion_group.hpp"
#include "engine/search/get/plan.hpp"
#include "engine/workload/op_graph.hpp"

namespace mapfuse::get {

class OpGraphModel final : public GroupModel {
 public:
  OpGraphModel(const OpGraph& g, FusionScheme scheme, int64_t beta_bytes, const GroupModelOptions& opt);
  GroupCost evaluate(std::span<const int32_t> sorted_nodes) const override;
  // LBDF keeps every weight of the group on chip, so the weights bound F_β of every superset;
  // BRR streams weights, so it has no such bound (0).
  double monotone_buffer_bound(std::span<const int32_t> sorted_nodes) const override;

 private:
  const OpGraph* g_;
  FusionScheme scheme_;
  int64_t beta_bytes_;
  GroupModelOptions opt_;
  mutable GroupWorkspace ws_;
};

struct NetworkProblem {
  const OpGraph* graph = nullptr;
  std::unique_ptr<OpGraphModel> model;  // Problem points at it
  Problem problem;
};

// Throws InputError (key "--buffer-kb") when β is not positive or no operator fits alone, naming
// the smallest single-operator need.
NetworkProblem make_network_problem(const OpGraph& g, FusionScheme scheme, int64_t beta_bytes,
                                    const GroupModelOptions& opt = {});

}  // namespace mapfuse::get
