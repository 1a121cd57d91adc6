#pragma once
// Slices of a study: a deterministic partition of its work units into n parts, for job arrays
// (`mapfuse run STUDY --slice i/n`, one array task per slice, then `mapfuse merge`).
#include <string>
#include <vector>

#include "partitioners/work_unit.hpp"

namespace mapfuse {

struct StudySlice {
  int index = 0;  // 0 <= index < count
  int count = 0;  // number of slices; 0 = not sliced (the whole study)
  bool whole() const { return count == 0; }
  bool operator==(const StudySlice&) const = default;
};

// "i/n" with 0 <= i < n and n >= 1; InputError (key "--slice") otherwise.
StudySlice parse_slice(const std::string& spec);
// "slice i/n", or "the whole study".
std::string describe(const StudySlice& s);

// The slice (0..count-1) of every unit, in the order of `units`. Greedy by cost: the units are
// taken in dispatch order (largest cost hint first, ties by id) and each goes to the slice with
// the least cost so far (ties: fewest units, then the lowest index). Depends only on the units'
// ids and cost hints, not on their order in `units`, so every array task computes the same
// partition.
std::vector<int> slice_assignment(const std::vector<WorkUnit>& units, int count);

// The units of one slice, in dispatch order (all units, in dispatch order, when s.whole()).
std::vector<WorkUnit> units_of_slice(std::vector<WorkUnit> units, const StudySlice& s);

}  // namespace mapfuse
