#pragma once
// The share of valid fusion groups among random ones ([P] Fig. 3, note §5.1): the groups that a
// simple random search draws on a whole network, checked against one buffer size.
#include <cstdint>

#include "engine/search/get/plan.hpp"

namespace mapfuse::get {

struct GroupSample {
  int64_t plans = 0;   // random plans drawn
  int64_t groups = 0;  // their groups of two or more operators
  int64_t valid = 0;   // of those, supported with F_β < β
  double share() const { return groups > 0 ? static_cast<double>(valid) / static_cast<double>(groups) : 0.0; }
};

// Draws `plans` random plans over every edge of the DAG, fuseable or not (each plan: q ~ U(0,1),
// every edge cut with probability q, as random search draws its genomes), and checks each of their
// groups of >= 2 nodes against β. Single operators are left out: they say nothing about fusion.
// The groups depend on the seed only, not on β or the model, so curves over β compare the same
// groups. Deterministic per seed.
GroupSample sample_group_validity(const Dag& g, const GroupModel& model, double beta, int64_t plans, uint64_t seed);

}  // namespace mapfuse::get
