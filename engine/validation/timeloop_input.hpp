#pragma once
// Timeloop v0.4 runs as mapfuse inputs, and their reference statistics: the importer reads a
// Timeloop `parsed-processed-input.yaml` (architecture tree, problem, mapping), its energy
// reference table (`*.ERT.yaml`) and optionally a separate `*.map.yaml`; the reader takes the
// totals and per-level, per-dataspace counts from `*.stats.txt`. Together they validate the cost
// model against Timeloop's own fixed-mapping outputs (docs/validation.md).
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "engine/arch/architecture.hpp"
#include "engine/mapping/mapping.hpp"
#include "engine/workload/einsum.hpp"

namespace mapfuse {

// One Timeloop run expressed in mapfuse types.
//  - Architecture: the tree is flattened outermost first; every component that is not the
//    arithmetic unit is a storage level (dummy levels included). `Name[lo..hi]` gives instance
//    counts, meshX/meshY the fan-out per axis (child mesh / parent mesh), width/datawidth the
//    block size, depth x block the entries (DRAM: unbounded). Per-word energies are the ERT's
//    vector-access energies divided by the block size (reads at read, fills at write, updates at
//    write: Timeloop never looks up `update`), divided by Timeloop's cluster utilisation.
//  - Pass-through levels (keep nothing, no temporal loop with a factor > 1) are folded into their
//    parent: their spatial loops and fan-out join the parent's. Those without spatial loops are
//    always folded (no number changes); those with spatial loops only while the hierarchy has
//    more than kMaxLevels levels, innermost first (simba_like needs none of those).
//  - Mapping: per target, temporal factors and permutation (innermost first), spatial factors
//    and permutation with `split` (the first `split` dimensions go to X, the rest to Y), and
//    keep/bypass directives (default: keep).
struct TimeloopCase {
  std::string input;          // parsed-processed-input.yaml
  std::string ert;            // *.ERT.yaml
  std::string mapping_file;   // *.map.yaml, or empty when the input's mapping was used
  Einsum einsum;
  Core core;
  Mapping mapping;
  std::vector<std::string> folded_levels;  // pass-through levels folded into their parent
};

// Throws InputError naming the file and key for anything malformed or inexpressible.
TimeloopCase import_timeloop_input(const std::string& input_yaml, const std::string& ert_yaml,
                                   const std::string& map_yaml = {});

// The reference numbers of one `timeloop-model.stats.txt` / `timeloop-mapper.stats.txt`.
struct TimeloopStats {
  struct Dataspace {
    int64_t reads = 0, fills = 0, updates = 0;  // scalar, per instance
    int64_t utilized_capacity = 0, utilized_instances = 0;
    double energy_pj = 0;  // dynamic, all instances (accesses + reductions + address generation)
  };
  struct Level {
    std::string name;
    bool arithmetic = false;
    int64_t cycles = 0;
    double energy_pj = 0;   // dynamic, all instances; leakage excluded
    double leakage_pj = 0;  // printed separately by Timeloop
    std::map<std::string, Dataspace> dataspaces;  // kept dataspaces only
  };
  std::string source;
  std::vector<Level> levels;  // as printed: arithmetic, then storage innermost first
  int64_t cycles = 0, computes = 0;
  double energy_uj_printed = 0;  // total including leakage, two decimals

  double dynamic_energy_pj() const;
  double leakage_pj() const;
  const Level* level(std::string_view name) const;  // nullptr if absent
};
TimeloopStats read_timeloop_stats(const std::string& path);

// The files of one reference run: `path` is a run directory or its parsed-processed-input.yaml.
// The mapping is the directory's *.map.yaml when there is one (mapper runs), else the input's.
struct TimeloopCaseFiles {
  std::string dir, input, ert, map, stats;
};
TimeloopCaseFiles locate_timeloop_case(const std::string& path);

// Every run directory below `root` (directories holding a parsed-processed-input.yaml), sorted.
std::vector<std::string> find_timeloop_cases(const std::string& root);

struct TimeloopValidation {
  std::string name;  // e.g. "04-model-conv1d+oc-3levelspatial/cp", "eyeriss_like/default_problem"
  std::string dir;
  bool valid = false;          // the model evaluated the mapping as valid
  std::string invalid_reason;
  double ref_cycles = 0, model_cycles = 0;
  double ref_energy_pj = 0, model_energy_pj = 0;  // dynamic (no leakage)
  double ref_leakage_pj = 0;
  struct LevelEnergy {
    std::string level;  // Timeloop's level name; the arithmetic level too
    double ref_pj = 0, model_pj = 0;
  };
  std::vector<LevelEnergy> levels;
  // Word counts summed over all instances (Timeloop prints per instance x utilised instances).
  struct Counts {
    std::string level, tensor;
    int64_t ref_reads = 0, ref_fills = 0, ref_updates = 0, ref_capacity = 0;
    int64_t model_reads = 0, model_fills = 0, model_updates = 0, model_capacity = 0;
    bool match() const {
      return ref_reads == model_reads && ref_fills == model_fills && ref_updates == model_updates &&
             ref_capacity == model_capacity;
    }
  };
  std::vector<Counts> counts;  // every (kept level, tensor) of either side

  double energy_error_pct() const { return 100.0 * (model_energy_pj - ref_energy_pj) / ref_energy_pj; }
  double cycle_error_pct() const { return 100.0 * (model_cycles - ref_cycles) / ref_cycles; }
  bool counts_match() const;
};

// Imports the run, evaluates its mapping with the cost model and compares with its stats.
TimeloopValidation validate_timeloop_case(const std::string& path);

}  // namespace mapfuse
