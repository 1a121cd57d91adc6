#pragma once
// A study as written in experiments/*.toml, and its partition into work units.
//
//   name = "quickstart"
//   [[workload]]      spec = "resnet18", layers = ["conv1"] (default: every MAC Einsum), batch = 1, tokens = 8192
//   [[architecture]]  spec = "gemmini_default", constraints = "presets/constraints/gemmini_dosa.toml"
//   [method]          name = "random" | "exhaustive", objective = "edp", budget = 20000, seeds = [1],
//                     max_mappings = 200000000
//
// One unit per (architecture, workload layer, seed): kind "map_layer", payload = its parameters
// as JSON, id = stable hash of kind and payload.
#include <cstdint>
#include <string>
#include <vector>

#include "partitioners/work_unit.hpp"

namespace mapfuse {

struct StudyWorkload {
  std::string spec;
  std::vector<std::string> layers;  // empty = every MAC Einsum
  int64_t batch = 1, tokens = 8192;
};

struct StudyArchitecture {
  std::string spec;
  std::string constraints;  // constraint file, "" = none
};

struct StudyMethod {
  std::string name = "random";
  std::string objective = "edp";
  int64_t budget = 20000;
  std::vector<uint64_t> seeds = {1};
  int64_t max_mappings = 200'000'000;
};

struct Study {
  std::string name;
  std::string file;       // where it was read from
  std::string toml_text;  // verbatim
  std::vector<StudyWorkload> workloads;
  std::vector<StudyArchitecture> architectures;
  StudyMethod method;
};

// Parses and validates a study (InputError with file, line and key; unknown keys get the nearest
// valid one; an empty sweep or an unknown method is an error). Relative constraint paths are
// taken relative to the study file's directory.
Study parse_study(const std::string& toml_text, const std::string& file);
Study load_study(const std::string& path);

// The study's work units (layer lists are resolved by `layers_of`, which the caller supplies so
// that this stays free of workload loading).
using LayerLister = std::vector<std::string> (*)(const StudyWorkload&);
std::vector<WorkUnit> partition_study(const Study& s, LayerLister layers_of);

}  // namespace mapfuse
