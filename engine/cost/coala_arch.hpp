#pragma once
// The hardware half of a COALA problem (coala.hpp) made from a multi-core Architecture: one COALA
// core per architecture node (cores first, then memories; the off-chip memory is the DRAM core),
// one COALA link per architecture link, and the architecture's routes as the transfer paths, so
// node ids, link indices and paths mean the same in both (docs/architectures.md, "To the
// scheduler").
#include "engine/arch/architecture.hpp"
#include "engine/cost/coala.hpp"

namespace mapfuse::coala {

// Sets p.cores, p.links and p.paths from `a` (tensors, tiles and edges are left alone).
//  - A core's top memory: for each tensor role, the outermost on-chip level that may keep it; the
//    capacity is the sum of the distinct such levels (capacity x instances). Transfers read and
//    write the level that keeps outputs (activations), priced per word as the cost model prices
//    it: port_bw_min = one word, port_bw_max = the level's read bandwidth in bits (one word when
//    unlimited), energy per port access = pJ per word x words per access, so a transfer of b bits
//    costs read_pj x ceil(b / word_bits) at the sender and write_pj x ceil(b / word_bits) at the
//    receiver.
//  - A memory node: its level; unbounded (entries 0) gives the largest finite capacity.
//  - A link: bandwidth bits_per_cycle; COALA's energy per busy cycle = pj_per_cycle +
//    pj_per_bit x bits_per_cycle, which COALA scales by the bandwidth share a transfer takes, so a
//    transfer of b bits alone on a link costs pj_per_bit x b + pj_per_cycle x b / bits_per_cycle.
// Throws InputError for a single-core architecture (no off-chip memory node) or one whose routes
// were not computed.
void set_hardware(Problem& p, const Architecture& a);

}  // namespace mapfuse::coala
