#pragma once
// The study's HDF5 file: one per study, written by rank 0 only, always rebuilt from the journal.
// Schema (groups, datasets, attributes, types, units): docs/results.md.
//
// Layout in short (schema_version 2):
//   /                 attributes: format = "mapfuse-study", schema_version = 2
//   /study            group; attributes name, study_id, toml, mapfuse_version, start_time,
//                     end_time (ISO 8601 UTC), ranks, threads, unit_count, failed_count;
//                     a slice's partial file (run --slice i/n) also slice_index, slice_count
//   /units            compound table, one row per unit, sorted by unit id; the *_offset/*_count
//                     columns index the ragged tables below; then the parameter columns
//                     (UnitResult::columns: workload, einsum, arch, method, seed, objective, ...)
//   /levels           compound (name, energy_pj, cycles), per-unit runs, outermost level first
//   /trace            float64 N x 3 (seconds, evaluations, best)
//   /pareto           compound (energy_pj, cycles, mapping)
// The file is written to "<path>.tmp.<pid>" and renamed over <path> once complete and synced, so
// a file at <path> is always complete.
#include <chrono>
#include <string>
#include <vector>

#include "partitioners/slice.hpp"
#include "results/unit_result.hpp"

namespace mapfuse {

// "0.1.0": the version of this build (the CMake project version).
std::string mapfuse_version_string();

// ISO 8601 UTC with seconds, e.g. "2026-11-22T05:07:18Z".
std::string iso8601_utc(std::chrono::system_clock::time_point t);
std::string iso8601_now();

struct StudyMeta {
  std::string name;        // the study's name (from its TOML)
  std::string study_id;    // study_id_of(toml_text) (results/journal.hpp)
  std::string toml_text;   // the study TOML, verbatim
  std::string mapfuse_version = mapfuse_version_string();
  std::string start_time;  // ISO 8601 (iso8601_utc); of the first run when resumed
  std::string end_time;
  int ranks = 1;    // MPI ranks (1 for the local executor)
  int threads = 1;  // OpenMP threads per rank
  StudySlice slice;  // a slice's partial file (`run --slice i/n`); whole() for a study's file
};

struct StudyFile {
  StudyMeta meta;
  std::vector<UnitResult> results;  // sorted by unit id
};

// Writes the study file at `path` atomically (temporary file, fsync, rename). Results are sorted
// by unit id first, so the contents do not depend on the order units finished in. Throws
// std::invalid_argument on two results with the same unit id, std::runtime_error (naming the
// path) when the file cannot be written; on failure no file is left at `path` by this call
// (an older complete file there stays untouched) and the temporary file is removed.
void write_study_h5(const std::string& path, const StudyMeta& meta, std::vector<UnitResult> results);

// Reads a study file back (schema versions 1 and 2; a version-1 file has no parameter columns).
// Throws InputError naming the path when the file is missing, not HDF5, not a mapfuse study file,
// of a newer schema version, or cut short / damaged.
StudyFile read_study_h5(const std::string& path);

}  // namespace mapfuse
