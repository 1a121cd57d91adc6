#pragma once
// One GET-fusion run on a whole network, as `mapfuse partition` and a study's "get_partition"
// unit run it (docs/get_search.md): a search with its repair, the true optimum, or the sampling of
// random groups behind [P] Fig. 3, on an operator graph under LBDF or BRR at one buffer size.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/cost/fusion_group.hpp"
#include "engine/search/get/exact.hpp"
#include "engine/search/get/sample.hpp"
#include "engine/search/get/search.hpp"
#include "engine/workload/op_graph.hpp"

namespace mapfuse::get {

// rs, ls, nsga2: a search with a plan budget; exact: the true optimum (no budget, no seed);
// sample: `budget` random plans' groups checked against β (Fig. 3; no repair, no best plan).
enum class PartitionMode : uint8_t { Rs, Ls, Nsga2, Exact, Sample };
PartitionMode partition_mode_from_string(std::string_view s);  // throws InputError (key "--search")
std::string_view to_string(PartitionMode m);
inline constexpr const char* kPartitionModes[] = {"rs", "ls", "nsga2", "exact", "sample"};

struct PartitionSpec {
  FusionScheme scheme = FusionScheme::Lbdf;
  double buffer_kb = 128;  // β in KB of model.kb bytes
  PartitionMode mode = PartitionMode::Ls;
  SplitKind split = SplitKind::Random;
  int64_t budget = 2000;
  uint64_t seed = 1;
  int population = 10, max_depth = 8, max_category3 = 16;
  double occlusion_fraction = 0.2;
  double time_limit_s = 60;  // exact: wall-clock limit (<= 0: none)
  int64_t max_states = 0;    // exact: deterministic limit (0: none)
  bool assume_monotone = false;
  std::string gnn_model;  // split gnne, pg, rg: the classifier's model file; empty = the one built in for the scheme
  std::string pg_model, rg_model;  // split pg / rg: the explainer's model file; empty = the one built in
  GroupModelOptions model;
};

// Throws InputError naming the `mapfuse partition` option when a value is out of range.
void check_partition_spec(const PartitionSpec& s);

struct PartitionOutcome {
  Plan best;            // empty for sample
  int32_t nodes = 0, fuseable = 0;
  int64_t plans = 0;    // generated (search) or drawn (sample)
  double seconds = 0;   // wall time of the run, graph loading excluded
  // Searches
  bool rectify_defined = false;  // false for the random split (and exact, sample)
  RectifyStats rectify;
  int64_t model_calls = 0;
  std::vector<TracePoint> trace;
  // Exact
  ExactResult exact;  // meaningful when mode == Exact (exact.plan is moved into best)
  // Sample
  GroupSample sample;
  // The rectify rate is undefined for the random split, and when no group needed repair (0 of 0).
  bool rectify_rated() const { return rectify_defined && rectify.distinct > 0; }
};

// Throws InputError on bad options and when no operator fits the buffer (key "--buffer-kb").
PartitionOutcome partition_network(const OpGraph& g, const PartitionSpec& s);

// The best plan's groups as text, one line per group: "{name,name,...}".
std::string groups_text(const OpGraph& g, const std::vector<Group>& groups);

}  // namespace mapfuse::get
