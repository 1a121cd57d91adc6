#pragma once
// For results/ only (it needs the HDF5 C API): the /schedules group of a schedule file, written
// into any open file, so that a study file holds its "schedule" units' schedules in the same
// layout (docs/results.md).
#include <vector>

#include "results/hdf5_io.hpp"
#include "results/schedule_h5.hpp"

namespace mapfuse {

// Creates /schedules in `file` with one group per record. Throws std::invalid_argument for two
// records of one name or an index out of range.
void write_schedules_group(const h5io::Context& c, hid_t file, const std::vector<ScheduleRecord>& schedules);

}  // namespace mapfuse
