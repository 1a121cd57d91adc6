#pragma once
// GET-fusion's classifier data ([P] §IV-A, Table I; note §5.1): fusion groups drawn by random
// search on the training networks' operator graphs, each labelled valid/invalid by F_β at several
// buffer sizes (128 … 2048 KB), for one scheme. No torch here.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/cost/fusion_group.hpp"
#include "engine/search/get/plan.hpp"
#include "engine/workload/op_graph.hpp"

namespace mapfuse::get::gnn {

// The networks of shared/data/get/onnx the classifiers are trained on: [P] Table I's, less those
// we have no graph of (MobileNetV3-Small/Large, ResNet-101); BRR leaves out the SE networks
// (EfficientNets) as [P] Fig. 3 does. The tables' other networks (ResNet-50, ResNet-152,
// DeepLabV3+MobileNetV3, SqueezeNet 1.1) are never trained on.
std::vector<std::string> training_networks(FusionScheme scheme);
inline const std::vector<double> kTrainingBuffersKb = {128, 256, 512, 1024, 2048};

struct DatasetSpec {
  FusionScheme scheme = FusionScheme::Lbdf;
  std::vector<double> buffers_kb = kTrainingBuffersKb;
  // Distinct groups of 2 … max_group_nodes operators drawn per network; 0: the scheme's default
  // (LBDF 400 on 6 networks, BRR 700 on 4: at 400, BRR's test F1 was 0.946).
  int64_t groups_per_network = 0;
  int32_t max_group_nodes = 48;      // larger random groups are skipped (choice: bounds training time)
  int64_t max_plans = 200000;        // per network, in case a network has too few distinct groups
  uint64_t seed = 1;
  GroupModelOptions model;
};

struct LabelledGroup {
  int32_t network = 0;  // index into Dataset::networks
  Group nodes;
  double buffer_kb = 0;
  double buffer_need = 0;  // F_β, bytes
  bool supported = true, valid = false;
  int32_t split = 0;  // 0 train, 1 validation, 2 test (by group: all β of a group share it)
};

struct Dataset {
  FusionScheme scheme = FusionScheme::Lbdf;
  std::vector<std::string> networks;  // names (file stems)
  std::vector<LabelledGroup> samples;
};

// Draws groups as random search does (per plan q ~ U(0,1), each edge cut with probability q),
// keeps distinct ones, labels each at every buffer size, and splits them 80/10/10 by group.
// Deterministic per seed. `graphs` are the networks in the order of the returned names.
// = draw_groups, then label_groups of every network in order.
Dataset make_dataset(const std::vector<const OpGraph*>& graphs, const DatasetSpec& spec);

// One network's drawn groups and their splits (0 train, 1 validation, 2 test), in drawing order.
struct DrawnGroups {
  std::vector<Group> groups;
  std::vector<int32_t> splits;
};

// The drawing half of make_dataset: one random stream runs through the networks in order, so
// network k's groups depend on networks 0 … k-1. Drawing is cheap (union-find over random cuts);
// a dataset unit that labels network k replays the draws of `graphs[0..k]` (pass those only).
std::vector<DrawnGroups> draw_groups(const std::vector<const OpGraph*>& graphs, const DatasetSpec& spec);

// The labelling half: groups [first, last) of one network's draw at every buffer size of the spec,
// in make_dataset's order (group by group, buffers in order); `network` is written into each sample.
std::vector<LabelledGroup> label_groups(const OpGraph& g, int32_t network, const DrawnGroups& drawn, size_t first,
                                        size_t last, const DatasetSpec& spec);

// One row per sample: network,split,buffer_kb,nodes,buffer_need_bytes,supported,valid,group
// (group: node names joined by ';').
void write_dataset_csv(const Dataset& d, const std::vector<const OpGraph*>& graphs, const std::string& path);

}  // namespace mapfuse::get::gnn
