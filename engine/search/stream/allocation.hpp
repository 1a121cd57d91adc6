#pragma once
// Which core runs each computation tile (CT): Stream's `core_allocation` as a file, or a simple
// greedy rule (docs/stream.md, "Allocations"). A layer's CTs of inter-core group g go to the g-th
// core of the layer's list (a single core takes every group).
//
//   [layers]                       # per Einsum name: a core or one core per inter-core group
//   "/conv1/Conv" = ["tpu_like_0", "tpu_like_1", "tpu_like_2", "tpu_like_3"]
//   [ops]                          # for layers not listed, per operator kind (or `default`)
//   mac = ["tpu_like_0", "tpu_like_1", "tpu_like_2", "tpu_like_3"]
//   pool = "pooling_4"
//   default = "simd_5"
#include <map>
#include <span>
#include <string>
#include <vector>

#include "engine/arch/architecture.hpp"
#include "engine/workload/tiles.hpp"

namespace mapfuse {

struct Allocation {
  std::string source;  // file name, for errors
  std::map<std::string, std::vector<std::string>> layers;  // Einsum name -> cores
  std::map<std::string, std::vector<std::string>> ops;     // op kind name or "default" -> cores
  std::map<std::string, int> lines;  // "layers.<name>" / "ops.<kind>" -> line in the file
};

// Throws InputError (file, line, key) for a malformed file, an unknown key or op kind, an empty
// list. Names are checked against a workload and architecture by allocate_tiles.
Allocation load_allocation(const std::string& path);

// The core (index into arch.cores) of every tile. InputError naming the file and key for an unknown
// layer or core (with a suggestion), a core that cannot run the layer's operator (Core::can_run), a
// list whose length is neither 1 nor the layer's number of inter-core groups, or a layer that
// neither `layers`, its op kind nor `default` covers.
std::vector<int> allocate_tiles(const Allocation& a, const Workload& w, const TileSet& tiles, const Architecture& arch);

// Per Einsum the cores (arch indices, node order) that can run its operator. InputError (key
// "allocation") naming the layer when none can.
std::vector<std::vector<int>> capable_cores(const Workload& w, const Architecture& arch);

// The greedy rule: per layer, the cores that can run its operator in node order; the CTs of group g
// go to the (g mod n)-th of them (round-robin over the groups; a layer of one group on the first
// capable core). InputError when no core can run a layer.
std::vector<int> allocate_greedy(const Workload& w, const TileSet& tiles, const Architecture& arch);

// The per-layer core lists an allocation resolves to (for reports): Einsum index -> core indices,
// one per inter-core group.
std::vector<std::vector<int>> layer_cores(const Workload& w, const TileSet& tiles, std::span<const int> core_of_tile);

}  // namespace mapfuse
