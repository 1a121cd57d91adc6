#pragma once
// Architectures as TOML. A file describes one core, outermost level first:
//
//   name = "gemmini_default"
//   [compute]   name = "MACC", energy_pj = 0.5608, frequency_mhz = 1000
//   [[level]]   name = "DRAM", word_bits = 8, shared_bandwidth = 8, energy_pj = 100,
//               keeps = ["weight", "input", "output"]
//   [[level]]   name = "Scratchpad", size_kb = 256, energy_fit = { base_pj = 0.49, per_kb_pj = 0.02513 },
//               keeps = ["weight", "input"], fanout = { x = 16, x_ranks = ["K"] }
//
// Capacity per instance: `entries` (words), `size_bytes` or `size_kb` (KiB); none = unbounded.
// Bandwidths are words per cycle per instance. Energies are pJ per word access: `energy_pj` sets
// read, write and update alike; `read_pj`/`write_pj`/`update_pj` override; `energy_fit` derives
// them from the capacity. See docs/architectures.md.
#include <string>
#include <string_view>
#include <vector>

#include <toml++/toml.h>

#include "engine/arch/architecture.hpp"

namespace mapfuse {

Architecture parse_architecture(std::string_view toml_text, const std::string& file);
// The same from an already parsed table, e.g. an architecture written inline in a study's
// [[architecture]] table: `key_path` prefixes the keys in error messages, `also_valid` names the
// table's other keys (read by someone else) so that they are not reported as unknown.
Architecture architecture_from_table(const toml::table& t, const std::string& file, const std::string& key_path = {},
                                     const std::vector<std::string>& also_valid = {});
// `name_or_path`: a preset name (see preset_names()) or a path to a TOML file.
Architecture load_architecture(const std::string& name_or_path);
std::vector<std::string> arch_preset_names();

// Human-readable description (for `mapfuse arch`).
std::string describe(const Architecture& a);

// The TOML form of a single-core architecture, which parse_architecture reads back to the same
// values (energies and bandwidths printed in round-trip precision). Capacity-energy fits are
// written as fits.
std::string to_toml(const Architecture& a);

}  // namespace mapfuse
