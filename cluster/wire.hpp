#pragma once
// The byte form of a work unit between ranks: five length-prefixed fields (id, kind, label, cost
// hint as the 8 bytes of its double, payload). Results travel as their JSON text (unit_result.hpp).
#include <string>

#include "partitioners/work_unit.hpp"

namespace mapfuse {

std::string encode_unit(const WorkUnit& unit);
// Throws std::runtime_error on truncated or oversized input.
WorkUnit decode_unit(const std::string& bytes);

}  // namespace mapfuse
