#pragma once
// An accelerator: cores, each a memory hierarchy over a PE array and a compute unit, plus, for a
// multi-core system (Stream's heterogeneous dataflow accelerators), memories outside the cores
// (the off-chip DRAM, shared on-chip memories), the links between them and a path per ordered
// pair of nodes (docs/architectures.md, "Multi-core architectures").
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/arch/energy_mlp.hpp"
#include "engine/workload/einsum.hpp"

namespace mapfuse {

inline constexpr int kMaxLevels = 8;

// Bit mask over TensorRole values.
using RoleMask = uint8_t;
constexpr RoleMask role_bit(TensorRole r) { return static_cast<RoleMask>(1u << static_cast<int>(r)); }
constexpr RoleMask kAllRoles = role_bit(TensorRole::Input) | role_bit(TensorRole::Weight) |
                               role_bit(TensorRole::Output);

// Energy per access that grows with the capacity of one instance (DOSA's linear fits to
// Accelergy/CACTI 40 nm): pJ = base_pj + per_kb_pj * capacity_kb.
struct CapacityEnergyFit {
  double base_pj = 0;
  double per_kb_pj = 0;
  double at(double capacity_kb) const { return base_pj + per_kb_pj * capacity_kb; }
};

// Spatial fan-out from a level into the instances of the next inner level (or the compute units).
struct Fanout {
  int64_t x = 1, y = 1;
  // Which ranks may be spread along an axis: by name (empty = any) and by the reuse the axis
  // wires up: a rank on an axis with reuse {input} must not index any input tensor, so that the
  // axis multicasts inputs (Gemmini's columns); reuse {output} means spatial reduction (rows).
  std::vector<std::string> x_ranks, y_ranks;
  RoleMask x_reuse = 0, y_reuse = 0;
  // Roles that may share one transfer across the axis (multicast of inputs and weights, spatial
  // reduction of outputs); a role left out is fetched (or drained) once per instance, as
  // AccelForge's `may_reuse` on a spatial dimension (TPUv4i's four cores: nothing).
  RoleMask x_multicast = kAllRoles, y_multicast = kAllRoles;
  // Fraction of the axis a mapping must use (AccelForge's `min_usage`): at least
  // ceil(min_usage * x) instances, or, for an Einsum whose ranks cannot fill that many, the most
  // they can fill. Copy Einsums are exempt.
  double x_min_usage = 0, y_min_usage = 0;
  int64_t total() const { return x * y; }
};

struct Level {
  std::string name;
  int64_t entries = 0;   // capacity of one instance in words; 0 = unbounded (DRAM)
  int word_bits = 8;
  int block_size = 1;    // words per vector access (Timeloop's block_size)
  int multiple_buffering = 1;
  // Words per cycle per instance; 0 = unlimited. A shared bandwidth caps reads + writes together.
  double read_bandwidth = 0, write_bandwidth = 0, shared_bandwidth = 0;
  // Energy per word access. `fit`, when present, set these from the capacity at load time and is
  // kept so that differentiable models can vary the capacity.
  double read_pj = 0, write_pj = 0, update_pj = 0;
  std::optional<CapacityEnergyFit> fit;
  std::optional<EnergyMlp> mlp;  // FADiff's MLP of capacity instead of the linear fit (energy_mlp.hpp)
  RoleMask may_keep = kAllRoles;
  // Roles the level must keep (AccelForge's `keep:` as opposed to `may_keep:`), a subset of
  // may_keep. A tensor backed on chip below the level (fused) is exempt.
  RoleMask must_keep = 0;
  // FFM: the only on-chip level that may back an intermediate tensor; each may still go through
  // DRAM (AccelForge's TPUv4i: MainMemory must keep ~Intermediates and may keep All, the
  // GlobalBuffer keeps what MainMemory does not).
  bool backs_intermediates = false;
  Fanout fanout;           // into the next inner level
  int64_t instances = 1;   // derived: product of the fan-outs of all outer levels

  double capacity_kb() const { return static_cast<double>(entries) * word_bits / 8.0 / 1024.0; }
  bool unbounded() const { return entries == 0; }
};

struct ComputeUnit {
  std::string name = "MAC";
  double energy_pj = 0;        // per operation (MAC)
  double frequency_hz = 1e9;
  int64_t instances = 1;       // derived: product of all fan-outs
};

// A vector (scalar) unit beside the MAC array that runs every Einsum that is not a MAC
// (softmax, elementwise, copy): AccelForge's TPUv4i ScalarUnit (128 operations per cycle under
// each core's LocalBuffer, enabled for two-tensor Einsums), FFM's edge accelerator's 256-lane
// vector unit. Such an Einsum reads and writes `level` directly: the levels below it hold nothing
// for it and the MAC fan-out under `level` is replaced by `lanes` lanes of one operation per cycle.
struct VectorUnit {
  std::string name = "Vector";
  int level = -1;          // index in Core::levels
  int64_t lanes = 1;
  double energy_pj = 0;    // per operation
};

// Which operator kinds a core can run (bit per OpKind).
using OpMask = uint8_t;
constexpr OpMask op_bit(OpKind k) { return static_cast<OpMask>(1u << static_cast<int>(k)); }
constexpr OpMask kAllOps = op_bit(OpKind::Mac) | op_bit(OpKind::Elementwise) | op_bit(OpKind::Pool) |
                           op_bit(OpKind::Softmax) | op_bit(OpKind::Copy);

struct Core {
  std::string name;
  // Operator kinds the core runs (special cores: pooling, SIMD); a single-core file runs all.
  OpMask runs = kAllOps;
  bool can_run(OpKind k) const { return (runs & op_bit(k)) != 0; }
  std::vector<Level> levels;   // index 0 = innermost (next to compute), back() = DRAM
  ComputeUnit compute;
  std::optional<VectorUnit> vector;
  // The core as a non-MAC Einsum sees it when there is a vector unit (made by finalize): levels
  // below VectorUnit::level keep nothing and fan out to nothing, `level` fans out to the lanes
  // along X (any rank; all lanes used, or as many as the ranks can fill: the unit's throughput
  // does not depend on the mapping), the compute unit is the vector unit. Same levels, so level
  // indices (backing levels, reservations) mean the same for every Einsum.
  std::shared_ptr<const Core> vector_core;
  // The core an Einsum runs on: this one, or vector_core for a non-MAC Einsum.
  const Core& for_op(bool mac) const { return !mac && vector_core ? *vector_core : *this; }
  // Count the first fill of partial sums (all zeros) from the level above, as Timeloop did
  // before 2023; needed to reproduce datasets made with it (DOSA's). Default: elided.
  bool legacy_output_fills = false;

  int level_index(std::string_view level_name) const;  // -1 if absent
  const Level& dram() const { return levels.back(); }
};

// The core Einsum `e` runs on (Core::for_op).
inline const Core& core_for(const Core& c, const Einsum& e) { return c.for_op(e.op == OpKind::Mac); }

// A communication resource. A point-to-point link carries data from nodes[0] to nodes[1] only; a
// bus carries data between any two of its nodes, one transfer's bandwidth shared by all (Stream's
// `type: bus`). Nodes are Architecture node ids (cores first, then memories).
struct Link {
  std::string name;
  std::vector<int> nodes;
  bool bus = false;
  // An off-chip memory's port: a bus that carries only transfers to or from nodes[0] (the
  // memory), never core-to-core traffic.
  bool port = false;
  double bits_per_cycle = 0;
  // Energy: per bit carried, and per cycle the link is busy (Stream's unit_energy_cost, which its
  // scheduler scales by the share of the bandwidth a transfer takes).
  double pj_per_bit = 0;
  double pj_per_cycle = 0;
  bool connects(int from, int to) const;
};

// A memory that is no core's own: the off-chip DRAM, or an on-chip memory shared over links
// (Stream HEAD's `zigzag.memory` cores, e.g. TPU v7's VMEM).
struct MemoryNode {
  std::string name;
  Level level;  // capacity, word width, energy per word, bandwidth (words per cycle)
  bool offchip = false;
};

struct Architecture {
  std::string name;
  std::string description;
  std::vector<Core> cores;  // node ids 0 .. cores.size() - 1
  // Multi-core systems only (all empty for a single-core file):
  std::vector<MemoryNode> memories;  // node ids cores.size() + i
  int offchip = -1;                  // node id of the off-chip memory
  std::vector<Link> links;
  // Links in order: memory ports, point-to-point links, buses (each in file order).
  // routes[from * node_count() + to]: the link indices of the path from node `from` to `to`
  // (empty for from == to); made by compute_routes (engine/arch/topology.hpp).
  std::vector<std::vector<int>> routes;

  bool multi_core() const { return !memories.empty() || !links.empty() || cores.size() > 1; }
  int node_count() const { return static_cast<int>(cores.size() + memories.size()); }
  const std::string& node_name(int node) const;
  int node_index(std::string_view name) const;  // -1 if absent
  const std::vector<int>& path(int from, int to) const {
    return routes.at(static_cast<size_t>(from) * static_cast<size_t>(node_count()) + static_cast<size_t>(to));
  }
};

// Recomputes derived fields (instances, fitted energies) and checks invariants; throws
// InputError naming `where` and the offending level.
void finalize(Core& core, const std::string& where);

}  // namespace mapfuse
