#pragma once
// What computes a study's work units: the engine side of `mapfuse run`.
#include <functional>
#include <string>
#include <vector>

#include "engine/arch/architecture.hpp"
#include "engine/search/stream/tile_cost_cache.hpp"
#include "engine/workload/einsum.hpp"
#include "engine/workload/op_graph.hpp"
#include "engine/workload/workload.hpp"
#include "partitioners/study.hpp"
#include "partitioners/work_unit.hpp"
#include "results/unit_result.hpp"

namespace mapfuse::cli {

// The layers of a study workload (its `layers`, or every Einsum, MAC ones flagged) with their
// shape keys, so that the partitioner can map identical layers once (a layer name the workload
// lacks gets an empty key; its unit fails with the reason).
std::vector<StudyLayer> study_layers(const StudyWorkload& w);

// The shape key of an Einsum: op, ranks (names and sizes), tensors (role, bits, projections);
// not the names of the Einsum or its tensors.
std::string shape_key(const Einsum& e);

// Computes one "map_layer" unit: the best mapping of one layer on one architecture by the
// study's method, with its cost breakdown and Pareto front. Throws on bad parameters (the
// executor records the unit as failed with the message).
UnitResult run_map_layer(const WorkUnit& unit);

// Computes one "optimize_network" unit: a network optimizer's joint mapping and fusion of a whole
// workload (engine/search/fadiff), reported with the exact model; the trace is its best-so-far
// EDP against time and evaluations.
UnitResult run_optimize_network(const WorkUnit& unit);

// FFM's pmapping generation for one slice of one Einsum's contexts ("ffm_pmappings"; the
// pmappings travel in UnitResult::data) and one FFM baseline run ("ffm_baseline").
UnitResult run_ffm_pmappings(const WorkUnit& unit);
UnitResult run_ffm_baseline(const WorkUnit& unit);

// Computes one "get_partition" unit (GET-fusion, docs/get_search.md): a search, the exact optimum or
// the sampling of random groups on one network. Metrics (UnitResult::metrics): nodes,
// fuseable_nodes, plans, seconds; dram_mb, mbu_kb, groups for a plan; rectify_rate (NaN when
// undefined), rectify_rate_calls, invalid_groups, fallbacks, model_calls for a search; optimal,
// lower_bound_mb, gap, interval_dp_mb for exact; sampled_groups, valid_groups, valid_share for
// sample. best_mapping holds the groups, one "{op,op,...}" line each; the trace is (0, plan,
// best DRAM in MB) at each improvement.
UnitResult run_get_partition(const WorkUnit& unit);

// Computes one "get_dataset" unit (GET-fusion's classifier data, docs/get.md): replays the random
// draws of the networks before its own, labels its shard of its network's groups at 128 … 2048 KB
// and returns the rows in UnitResult::data (results/get_dataset_h5.hpp). Metrics: groups, samples,
// valid_samples.
UnitResult run_get_dataset(const WorkUnit& unit);

// Computes one "schedule" unit (Stream's COALA on a multi-core architecture, docs/studies.md,
// "Stream schedules"): energy_pj, cycles (the latency), edp; metrics latency_cc, energy_pj,
// cts, edges, stacks, transfers, energy_<part>_pj (the ten parts, summing to energy_pj),
// peak_core_memory_bits, schedule_seconds and, with mapper costs, tile_cost_unique_keys,
// tile_cost_mapper_calls, tile_cost_seconds, tile_cost_cache_hits and tile_cost_cache_misses;
// data: the schedule record (results/schedule_h5.hpp). Mapper costs go through `tile_cache` (the
// process's, shared by its units), or a cache of the unit alone when null.
UnitResult run_schedule_unit(const WorkUnit& unit, TileCostCache* tile_cache = nullptr);

// The training networks' operator graphs, each named by its stem (`networks`): files of
// `onnx_dir`, or else as resolve_get_network finds them. InputError (key `key`) when one is missing.
std::vector<OpGraph> load_training_graphs(const std::vector<std::string>& networks, const std::string& onnx_dir,
                                          const std::string& key = "--networks");

// A path, or a network name from the GET data set ($MAPFUSE_SHARED_DATA/get/onnx/<name>.onnx);
// InputError (key `key`) with the nearest name otherwise.
std::string resolve_get_network(const std::string& w, const std::string& key = "--workload");
// What GET-fusion reads for `w`: the ONNX file resolve_get_network finds, else `w` itself when it
// names a CNN of the model zoo that has no ONNX file there (xception, vgg19, mobilenet_v1, ...).
std::string get_network_spec(const std::string& w, const std::string& key = "--workload");
// Its operator graph: load_op_graph, or op_graph_from_workload for a zoo CNN (activations folded).
OpGraph load_get_network(const std::string& w, const std::string& key = "--workload");

// Any of the above by the unit's kind; `tile_cache` goes to schedule units.
UnitResult run_unit(const WorkUnit& unit, TileCostCache* tile_cache = nullptr);

// What computes this process's results: "<mapfuse version>/<model fingerprint>"
// (engine/validation/model_fingerprint.hpp). Journaled with every result; resume refuses others.
const std::string& result_producer();

// Joins FFM's generated pmappings (docs/ffm.md, "Distribution and studies"): for every (point,
// workload) of a study with method "ffm" whose generation units are all in `results` and whose
// join is not, merges the slices, joins them, and passes one "ffm_join" result (the optimum for
// the study's objective, the energy-latency front, the LoopTree, generation vs join time) to
// `append` and to `results`. A failed generation unit or join gives a failed join result with
// the reason. Runs on the master (rank 0) after the units, so the result does not depend on how
// many ranks generated the slices.
void complete_ffm_joins(const Study& study, std::vector<UnitResult>& results,
                        const std::function<void(const UnitResult&)>& append);

// Bad input of a fused-mapper run (nothing to fuse; a tensor no level can hold): InputError.
void check_ffm_input(const Workload& w, const Core& c, bool fusion);
// Every intermediate tensor (produced and consumed inside the workload) not in `excluded`:
// must_fuse = "others", e.g. TransFusion's "everything fused except K and V".
std::vector<int> other_intermediates(const Workload& w, const std::vector<int>& excluded);
std::vector<int> ffm_tensor_indices(const Workload& w, const std::vector<std::string>& names, const std::string& key);

}  // namespace mapfuse::cli
