#pragma once
// An external per-tile cost table (CSV) in place of the mapper's tile costs, so that schedulers can
// be compared on identical tile costs (measured figures, another tool's, Stream's own cost LUT).
// docs/stream.md, "Tile-cost tables" defines the format:
//
//   layer,core,<rank>...,latency_cc,onchip_energy_pj,offchip_energy_pj[,offchip]
//
// one row per (CT, core): `layer` an Einsum name, `core` an architecture core name, one column per
// rank name (the union over the layers) whose cell says which CTs the row is for: `lo:hi` (the CT's
// half-open range), a size `n`, `*` (any range) or empty (the whole rank; also when the column is
// absent); `offchip` lists the operands that stream from or to DRAM while the CT runs with their
// DRAM bandwidth in bits per cycle, `O=2;I0=1;I1=0` (O = the output, I<k> = the k-th input or
// weight in the Einsum's tensor order, or a tensor name). The first matching row wins.
#include <span>
#include <string>
#include <vector>

#include "engine/arch/architecture.hpp"
#include "engine/common/csv.hpp"
#include "engine/cost/tile_cost.hpp"
#include "engine/workload/tiles.hpp"

namespace mapfuse {

// The cost of every CT of `tiles` on its core (core_of_tile: a core index of `arch` per tile).
// Throws InputError with file:line:column for a malformed cell (an unknown layer, core, rank or
// operand, with a suggestion; a number that is not one) and naming the CT and core when no row
// matches it.
std::vector<TileCost> read_tile_costs(const std::string& path, const Workload& w, const TileSet& tiles,
                                      const Architecture& arch, std::span<const int> core_of_tile);
// The same from an already parsed table (`table.source` names it in errors).
std::vector<TileCost> tile_costs_from_table(const CsvTable& table, const Workload& w, const TileSet& tiles,
                                            const Architecture& arch, std::span<const int> core_of_tile);

// One row per distinct (layer, rank ranges, core), ranges written `lo:hi` (empty for a whole
// rank), numbers in shortest round-trip form: read_tile_costs gives `costs` back.
void write_tile_costs(const std::string& path, const Workload& w, const TileSet& tiles, const Architecture& arch,
                      std::span<const int> core_of_tile, std::span<const TileCost> costs);

// Stream's dumped cost LUT (shared/data/stream/derived/coala/<run>/: cost_lut.csv, with cns.csv
// giving each CN's loop ranges and LUT row) as a tile-cost table of `w`: one row per CN with its
// ranges in mapfuse's rank names (Stream's conv B,K,G,OX,OY,C,FX,FY -> N,K,G,Q,P,C,S,R; relu/add
// B,H,D,K -> N,C,H,W; pool B,K,OX,OY,FX,FY -> N,C,Q,P,S,R; gemm D,C,K -> M,K,N), Stream core id i
// -> arch.cores[i], latency_total2, on-chip and off-chip energy, and the too-large operands with
// their block bandwidths (rd_out_to_low for inputs, wr_in_by_low for the output). Stream's 8-bit
// ReLU constant and 0-bit pooling constant have no mapfuse tensor; they are dropped when their
// bandwidth is 0 (always, in the shipped runs) and refused otherwise.
CsvTable stream_cost_lut_table(const std::string& folder, const Workload& w, const Architecture& arch);

}  // namespace mapfuse
