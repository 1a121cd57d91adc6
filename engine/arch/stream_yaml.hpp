#pragma once
// Stream's hardware YAML (KULeuven-MICAS/stream: a system file listing core files by id, the
// off-chip core and `core_connectivity`) read into a multi-core Architecture. A core file is a
// ZigZag accelerator (memories bottom-up with size in bits, r_cost / w_cost in pJ per access of
// bandwidth_max bits, ports in bits per cycle, served_dimensions) with an operational array and
// `dataflows` (its fixed spatial unrolling). docs/architectures.md, "Stream hardware YAML".
#include <string>

#include "engine/arch/architecture.hpp"

namespace mapfuse {

// Does the file look like a Stream system file (top-level `cores` and `core_connectivity`)?
// False for anything unreadable or not a YAML map.
bool is_stream_hardware_yaml(const std::string& path);

// Reads a system file and the core files it names. A core file is looked up as written, then by
// its file name in the system file's `cores/` folder, then in every `*/hardware*/cores/` folder
// below the system file's grandparent (sorted), as Stream resolves core files by name.
// Throws InputError (file, line, key, what was expected) on malformed input.
Architecture load_stream_hardware(const std::string& path);

}  // namespace mapfuse
