#pragma once
// What computes a study's work units: the engine side of `mapfuse run`.
#include <string>
#include <vector>

#include "engine/workload/einsum.hpp"
#include "partitioners/study.hpp"
#include "partitioners/work_unit.hpp"
#include "results/unit_result.hpp"

namespace mapfuse::cli {

// The layers of a study workload (its `layers`, or every MAC Einsum) with their shape keys, so
// that the partitioner can map identical layers once (a layer name the workload lacks gets an
// empty key; its unit fails with the reason).
std::vector<StudyLayer> mac_layers(const StudyWorkload& w);

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

// Either of the above by the unit's kind.
UnitResult run_unit(const WorkUnit& unit);

}  // namespace mapfuse::cli
