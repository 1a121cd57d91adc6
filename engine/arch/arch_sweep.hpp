#pragma once
// Architecture parameters that a study sweeps (docs/studies.md, "Architecture sweeps"): a sweep
// point is a base architecture with some parameters set, e.g. {pe = 32, scratchpad_kib = 512}.
//
// Two kinds of keys:
//   - Gemmini's hardware parameters, as DOSA's GemminiConfig derives a Timeloop architecture from
//     hw_config = [pe_dim, sp_KB, acc_KB] (shared/notes/dosa_gemmini.md §1.1, §1.4, §1.5). They
//     need levels named "Scratchpad" (X fan-out onto the array columns) and "Accumulator" (Y
//     fan-out onto the rows, one instance per column):
//       pe = N               PE array N x N: Scratchpad fan-out x = N, Accumulator fan-out y = N,
//                            Scratchpad shared bandwidth 2 N words/cycle; the accumulator's total
//                            capacity is kept (per column = total / N)
//       scratchpad_kib = S   Scratchpad capacity S KiB
//       accumulator_kib = A  Accumulator capacity A KiB in total, A / N KiB per column
//   - any level's field, "<Level>.<field>", literally: entries, size_kb (per instance, KiB),
//     fanout_x, fanout_y, read_bandwidth, write_bandwidth, shared_bandwidth, block_size.
// Energies per access follow the capacity where the level has an energy fit (`energy_fit`, DOSA's
// linear fits); levels with fixed energies keep them.
#include <string>
#include <vector>

#include "engine/arch/architecture.hpp"
#include "engine/common/error.hpp"

namespace mapfuse {

struct ArchParameter {
  std::string key;   // "pe", "scratchpad_kib", "accumulator_kib" or "<Level>.<field>"
  double value = 0;
  SourceLocation where;  // for error messages
  std::string key_path;  // dotted key for error messages (e.g. architecture[0].sweep.pe)
};

// The Gemmini keys and the per-level fields, for messages and suggestions.
const std::vector<std::string>& gemmini_parameter_keys();
const std::vector<std::string>& level_parameter_fields();

// Is `key` a syntactically valid parameter key (known Gemmini key, or "<Level>.<known field>")?
// Returns "" when valid, else what is wrong (with a suggestion). Does not check that the level
// exists (that needs the base architecture; apply_parameters does).
std::string check_parameter_key(const std::string& key);

// Short tag of a key in point names: pe, sp, acc; "<level>_<field>" in lower case otherwise.
std::string parameter_tag(const std::string& key);

// The base architecture with the parameters set: fan-outs first, then capacities and bandwidths;
// derived fields and fitted energies recomputed. Throws InputError at the parameter's location for
// a value that is not positive, not an integer where one is needed, a level that does not exist,
// or a capacity that leaves less than one word per instance.
Architecture apply_parameters(const Architecture& base, const std::vector<ArchParameter>& params);

}  // namespace mapfuse
