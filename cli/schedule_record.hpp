#pragma once
// A COALA schedule (engine/cost/coala.hpp) as the record the schedule file stores
// (results/schedule_h5.hpp): the glue between the scheduler and results/, which knows no cost model.
#include <string>

#include "engine/cost/coala.hpp"
#include "results/schedule_h5.hpp"

namespace mapfuse::cli {

ScheduleRecord schedule_record(const std::string& name, const std::string& semantics, const std::string& source,
                               const coala::Problem& problem, const coala::Schedule& schedule);

}  // namespace mapfuse::cli
