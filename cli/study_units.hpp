#pragma once
// What computes a study's work units: the engine side of `mapfuse run`.
#include <string>
#include <vector>

#include "partitioners/study.hpp"
#include "partitioners/work_unit.hpp"
#include "results/unit_result.hpp"

namespace mapfuse::cli {

// The MAC Einsums of a study workload (for layer lists left empty).
std::vector<std::string> mac_layers(const StudyWorkload& w);

// Computes one "map_layer" unit: the best mapping of one layer on one architecture by the
// study's method, with its cost breakdown and Pareto front. Throws on bad parameters (the
// executor records the unit as failed with the message).
UnitResult run_map_layer(const WorkUnit& unit);

}  // namespace mapfuse::cli
