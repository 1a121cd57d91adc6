#pragma once
// The dependency graph over computation tiles (tiles.hpp), as Stream builds it (§3.3.3):
// intra-layer edges follow the outer-CT loop order (consecutive CTs of one inter-core group),
// inter-layer edges join a producer CT to every consumer CT whose input box of that tensor overlaps
// the producer's output box. The overlaps are found with an R-tree per produced tensor
// (Boost.Geometry), queried with each consumer box. docs/stream.md, "Computation tiles".
#include <cstdint>
#include <vector>

#include "engine/workload/tiles.hpp"

namespace mapfuse {

enum class EdgeKind : uint8_t { Intra, Inter };

struct TileEdge {
  int producer = -1, consumer = -1;  // tile indices
  int tensor = -1;                   // Workload tensor carried; -1 for an intra edge
  EdgeKind kind = EdgeKind::Intra;
  int64_t bits = 0;           // the overlap of the produced and the consumed box; 0 for intra
  int64_t producer_bits = 0;  // the producer CT's whole output (Stream moves whole outputs); 0 for intra
};

struct TileGraph {
  TileSet tiles;
  // Grouped by consumer (tile order): its intra edge first, then inter edges by the consumer's
  // tensor order, producers ascending.
  std::vector<TileEdge> edges;
  std::vector<int> first_pred;  // CSR: edges[first_pred[t] .. first_pred[t+1]) have consumer t
};

enum class EdgeSearch : uint8_t {
  RTree,     // Boost.Geometry rtree over each tensor's produced boxes (the product path)
  Pairwise,  // every producer CT against every consumer CT (a reference for tests)
};

TileGraph build_tile_graph(const Workload& w, const TilingOptions& opt,
                           EdgeSearch search = EdgeSearch::RTree);
// The edges of an existing tile set (build_tile_graph = generate_tiles + this).
TileGraph connect_tiles(const Workload& w, TileSet tiles, EdgeSearch search = EdgeSearch::RTree);

}  // namespace mapfuse
