#pragma once
// COALA (Stream, Symons et al.): a communication- and memory-aware list scheduler for computation
// tiles (CTs) allocated to the cores of a multi-core accelerator. The problem is a plain value:
// cores with one top memory each, links with a path per ordered core pair, CTs with their costs
// and the tensors they fetch, and the dependency edges. `schedule` places every CT and every
// transfer on the links' bandwidth calendars and on the cores' memory timelines (docs/stream.md,
// "COALA scheduler").
#include <cstdint>
#include <string>
#include <vector>

namespace mapfuse::coala {

struct CoreSpec {
  std::string name;
  double capacity_bits = 0;  // top memory
  // Stream prices a transfer per port access: cost * (bw_min / bw_max) * ceil(bits / bw_min).
  double read_energy_pj = 0, write_energy_pj = 0;
  double port_bw_min_bits = 1, port_bw_max_bits = 1;
  bool offchip = false;  // the DRAM "core": exactly one per problem
};

struct LinkSpec {
  std::string name;
  double bandwidth_bits_per_cc = 0;
  double energy_pj_per_cc = 0;  // Stream's unit energy, charged per busy cycle times the bandwidth share
};

struct TensorSpec {
  double bits = 0;
  int owner = -1;              // CT that produced (or first used) it; its core decides sender drops
  bool is_output = false;      // the owner's output (removed once its consumers have finished)
  bool starts_offchip = false; // constant operands (weights, the network input): in DRAM at t = 0
  std::vector<int> consumers;  // CTs that use it (decides its remaining-use priority per core)
};

// A CT whose operands do not fit on its core streams them from DRAM while it runs: it reserves
// this bandwidth on the DRAM path for its whole runtime.
struct BlockSpec {
  int tensor = -1;
  double bandwidth_bits_per_cc = 0;
  bool to_offchip = false;  // output written to DRAM (else an input read from DRAM)
};

struct TileSpec {
  int layer = 0, sub = 0;
  int core = 0;
  int64_t priority = 0;  // scheduling order: among ready CTs the smallest is picked; unique
  double runtime_cc = 0;
  double onchip_energy_pj = 0, offchip_energy_pj = 0;
  double bw_fraction = 1;  // share of link bandwidth its transfers request (Stream: 1 / inter-core splits)
  int output = -1;                // tensor id
  std::vector<int> inputs;        // tensors fetched to the core before it starts, in this order
  std::vector<BlockSpec> blocks;  // non-empty: too-large operands (the core's memory is cleared first)
  bool output_offchip = false;    // its output goes to DRAM (too large for the core)
  bool sink = false;              // its output is written back to DRAM when it ends
};

struct Problem {
  std::vector<CoreSpec> cores;
  std::vector<LinkSpec> links;
  // paths[from * cores.size() + to]: the links a transfer from `from` to `to` occupies (all of
  // them, for its whole duration). Empty for from == to.
  std::vector<std::vector<int>> paths;
  std::vector<TensorSpec> tensors;
  std::vector<TileSpec> tiles;
  std::vector<std::pair<int, int>> edges;  // (predecessor, successor) CT ids; data and ordering

  const std::vector<int>& path(int from, int to) const { return paths[size_t(from) * cores.size() + size_t(to)]; }
};

enum class Semantics { Stream, Mapfuse };

// Each switch is one of Stream classic's (cb9dfc52) behaviours; `for_semantics` sets them all.
struct Options {
  // A second transfer of the same tensor on a link costs no bandwidth only when it starts at the
  // very same cycle as an earlier one (Stream). Off: a later transfer of a tensor reuses any earlier
  // window of that tensor on the same path that starts at or after its own search start (multicast).
  bool dedup_only_equal_start = true;
  // At the first CT of a layer whose predecessor layers all come earlier in the order, every core
  // in use waits for the latest one (Stream). Off: cores are never synchronised.
  bool sync_cores_at_layer_start = true;
  // A constant tensor's remaining-use count is set to its total consumer count on every core that
  // uses it (Stream), so a tensor shared by several cores is never freed. Off: per-core counts.
  bool constant_priority_overcount = true;
  // Input transfers may start up to the sum of their DRAM-port durations before the core is idle
  // (Stream's head start). Off: no transfer for a CT starts before its core is idle.
  bool input_headstart = true;

  static Options for_semantics(Semantics s);
};

enum class TransferCause : uint8_t { OffChip, CoreToCore, Eviction, SinkWriteBack, Block };
const char* to_string(TransferCause c);

struct ScheduledTile {
  double start = -1, end = -1;
  int pick = -1;  // position in which the scheduler placed it
  double preds_end = 0, ready = 0, after_inputs = 0;  // the timing chain, for diagnostics
};

struct Transfer {
  int tensor = -1, sender = -1, receiver = -1;
  int tile = -1;  // the CT being scheduled when it was placed
  TransferCause cause = TransferCause::OffChip;
  double start = 0, end = 0, bits = 0;
  double bandwidth = 0;   // per link of the path
  double search_from = 0; // earliest start it was allowed
  bool occupies_links = true;  // false: a broadcast duplicate (or zero-length), free on the links
  double link_energy_pj = 0, memory_energy_pj = 0;
};

struct Energy {
  double cn_onchip = 0;
  double cn_offchip = 0;  // DRAM energy of too-large operands, priced inside the tile cost
  double link[4] = {0, 0, 0, 0};    // by cause: OffChip, CoreToCore, Eviction, SinkWriteBack
  double memory[4] = {0, 0, 0, 0};  // top-memory reads and writes of transfers, by cause
  double total() const;
  // Stream's nine `energy_breakdown_pJ` terms, in its order and with its names.
  std::vector<std::pair<std::string, double>> stream_breakdown() const;
};

// One step of a core's top-memory occupancy: from `t` on (until the next step) `bits` are in use.
struct MemoryStep {
  double t = 0, bits = 0;
  friend bool operator==(const MemoryStep&, const MemoryStep&) = default;
};

struct Schedule {
  std::vector<ScheduledTile> tiles;  // indexed like Problem::tiles
  std::vector<Transfer> transfers;   // in placement order; blocks included
  double latency_cc = 0;
  Energy energy;
  std::vector<double> peak_memory_bits;  // per core
  // Per core (the off-chip one included): the occupancy its memory manager ended with, after every
  // addition, free and eviction (all of them are final once scheduling ends, as a later transfer
  // can be placed in the past). The first step is at t = 0; times strictly increase; consecutive steps
  // differ in bits. Its maximum is peak_memory_bits.
  std::vector<std::vector<MemoryStep>> memory_trace;
};

// Throws InputError for an inconsistent problem (unknown core or tensor, missing path, cycles, a
// tensor that does not fit in a memory, more than one or no off-chip core).
Schedule schedule(const Problem& problem, const Options& options);

}  // namespace mapfuse::coala
