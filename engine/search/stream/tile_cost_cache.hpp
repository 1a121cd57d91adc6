#pragma once
// A cache of per-tile costs shared by every map_tile_costs call of a process (WACO's phases, a
// study's units) and kept in a file across runs (docs/stream.md, "Tile-cost cache"). The mapper
// is exact and deterministic, so an entry keyed by everything its answer depends on (the key is
// made by tile_costs.cpp: the core's fingerprint, the CT-sized Einsum, the off-chip operands and
// the options) can stand for a search: results are bit-identical with and without the cache.
#include <cstdint>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/arch/architecture.hpp"
#include "engine/cost/tile_cost.hpp"

namespace mapfuse {

// Bump when map_tile_costs's rules change what it answers for a key (the off-chip rule, the
// objective's tie-breaks, what the search sees) without the cost model changing: entries written
// by an older mapper are then dropped on load. Changes to the cost model itself are caught by
// model_fingerprint() (engine/validation), which the file header records too.
inline constexpr int kTileCostMapperVersion = 1;
// The file's own layout (header line, entry line fields).
inline constexpr int kTileCostCacheFormat = 1;

// Every field of a core that the mapper or the cost model reads, as bytes: levels (capacity, word
// width, block, buffering, bandwidths, energies, energy fits, roles kept, level names, which
// appear in mapping texts and so in the mapper's tie-break), fan-outs (sizes, accepted ranks,
// reuse, multicast, minimum usage), compute and vector units, the operators it runs and its
// vector view. Not the core's name: identical cores of different systems share entries.
std::string core_fingerprint(const Core& c);

struct TileCostCacheCounts {
  int64_t hits = 0, misses = 0;
};

class TileCostCache {
 public:
  TileCostCache() = default;
  TileCostCache(const TileCostCache&) = delete;
  TileCostCache& operator=(const TileCostCache&) = delete;

  // Thread-safe (a shared lock for lookups, an exclusive one for inserts): map_tile_costs looks
  // up before its OpenMP loop and inserts each search as it ends, from the loop's threads, and a
  // study's units run on several threads.
  std::optional<TileCost> find(const std::string& key) const;
  // Keeps the first value of a key (two units that missed the same key at once computed the same
  // value). Returns whether the key was new; a new key is also queued for take_fresh().
  bool insert(const std::string& key, const TileCost& cost);
  size_t size() const;

  // The entries inserted since the last call, as entry lines (the file's body): what a study's
  // worker hands to rank 0, which keeps the file.
  std::string take_fresh();
  // Inserts the entries of entry lines (take_fresh's text, or a file's body) without queueing
  // them; a malformed line is an InputError naming `file`, the line (first_line + its index) and
  // its byte offset (first_offset + its offset in `text`).
  void add_lines(const std::string& text, const std::string& file = "tile-cost cache", int first_line = 1,
                 size_t first_offset = 0);

  // The whole cache as a file: a header (format, mapper version, model fingerprint) and one line
  // per entry, sorted by key, so that the same entries give the same bytes however they arrived.
  std::string to_text() const;

 private:
  mutable std::shared_mutex mutex_;
  std::unordered_map<std::string, TileCost> entries_;
  std::vector<std::string> fresh_;
};

// The header line a file written by this build starts with.
std::string tile_cost_cache_header();

enum class CacheLoad { Missing, Loaded, Stale };
struct CacheLoadResult {
  CacheLoad status = CacheLoad::Missing;
  size_t entries = 0;
  std::string message;  // Stale: why the file was not used (its header against this build's)
};
// Loads `path` into `cache`. A missing file: nothing. A file whose header is a tile-cost cache
// header of another format, mapper version or cost model: Stale, nothing loaded (an entry of an
// older model would be a wrong cost; the file is replaced at the next save). Anything else that
// is not a valid cache (another file, a line cut short, a checksum that does not match): an
// InputError naming the file and the line.
CacheLoadResult load_tile_cost_cache(const std::string& path, TileCostCache& cache);
// Writes to_text() to `path` atomically (a temporary file, synced, renamed over `path`), so a
// killed run leaves the old file or the new one, never a part. Throws InputError on I/O errors.
void save_tile_cost_cache(const std::string& path, const TileCostCache& cache);

}  // namespace mapfuse
