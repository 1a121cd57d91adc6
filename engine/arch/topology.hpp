#pragma once
// Interconnects of multi-core architectures: generators for the common topologies, and the path
// every transfer between two nodes takes.
#include <string>
#include <vector>

#include "engine/arch/architecture.hpp"

namespace mapfuse {

enum class TopologyKind { Bus, Mesh, Torus, Pairs };

struct TopologySpec {
  TopologyKind kind = TopologyKind::Bus;
  int rows = 0, cols = 0;           // mesh, torus: node i sits at row i / cols, column i % cols
  std::vector<int> nodes;           // the nodes it connects, in order
  double bits_per_cycle = 0;
  double pj_per_bit = 0, pj_per_cycle = 0;
  std::string name = "topology";    // prefix of the generated links' names
};

// Appends the topology's links: a bus (one shared link); a 2-D mesh (two directed links between
// horizontal and vertical neighbours: 2 (R (C-1) + C) links); a torus (the mesh plus the
// wrap-around neighbours, a pair counted once: 4 R C links when R, C >= 3); pairs (a directed link
// from every node to every other: n (n-1)). Throws InputError (at `where`) on a bad shape.
void add_topology(Architecture& a, const TopologySpec& t, const std::string& where);

// Fills a.routes: for every ordered pair of nodes, the path with the fewest links; among those,
// the widest (largest smallest bandwidth along it); among those, the one whose sequence of link
// indices is lexicographically smallest, so paths do not depend on anything but the file.
// Throws InputError (at `where`) naming a pair no path connects.
void compute_routes(Architecture& a, const std::string& where);

// Checks a multi-core architecture (node names unique, links name existing nodes, a core runs
// something, an off-chip memory exists) and computes its routes.
void finalize_system(Architecture& a, const std::string& where);

}  // namespace mapfuse
