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

// 16 bytes: a 10^6-CT graph has ~7*10^6 edges, and writing them to fresh memory is most of the
// time of building it. The consumer is the CSR row (TileGraph::first_pred); the producer CT's
// whole output (what Stream moves) is TileGraph::producer_bits.
struct TileEdge {
  int producer = -1;  // tile index
  int tensor = -1;    // Workload tensor carried; -1 for an intra edge
  int64_t bits = 0;   // the overlap of the produced and the consumed box; 0 for intra
  EdgeKind kind() const { return tensor < 0 ? EdgeKind::Intra : EdgeKind::Inter; }
};

struct TileGraph {
  TileSet tiles;
  // Grouped by consumer (tile order): its intra edge first, then inter edges by the consumer's
  // tensor order, producers ascending.
  std::vector<TileEdge> edges;
  std::vector<int> first_pred;  // CSR: edges[first_pred[t] .. first_pred[t+1]) have consumer t

  // The consumer of edges[edge] (a binary search over first_pred; loops over a consumer's
  // predecessors know it already).
  int consumer(size_t edge) const;
  // The producer CT's whole output bits (Stream moves whole outputs; its edges.csv "bits"); 0 for
  // an intra edge.
  int64_t producer_bits(const TileEdge& e) const;
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
