#pragma once
// DOSA's Timeloop dataset for Gemmini (ucb-bar/dosa data/timeloop_dataset, 72,700 rows): each row
// is a (conv layer, Gemmini hardware point, mapping) with Timeloop's cycles and energy. Rows are
// evaluated with mapfuse's model on the same hardware and DOSA's energy-per-access fits.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/arch/architecture.hpp"
#include "engine/workload/einsum.hpp"

namespace mapfuse {

struct DosaDataset {
  struct Row {
    int layer = 0;  // index into layers
    int core = 0;   // index into cores
    std::string mapping;
    double energy_pj = 0;  // Timeloop's (target.energy is in uJ)
    double cycles = 0;
    size_t csv_row = 0;  // 0-based data row in the CSV
  };
  std::string source;
  std::vector<Einsum> layers;
  std::vector<Core> cores;
  std::vector<Row> rows;
};

DosaDataset load_dosa_dataset(const std::string& path);

// DOSA's Gemmini as Timeloop models it (levels Registers, Accumulator, Scratchpad, DRAM).
// Capacities are per instance in words; sp_kb and acc_kb are the totals DOSA's fits take;
// sp_block is the scratchpad's words per vector access (its width / 8 bits).
Core dosa_gemmini_core(int64_t pe_dim, int64_t acc_entries, int64_t sp_entries, double acc_kb,
                       double sp_kb, double acc_bandwidth, double sp_bandwidth, int sp_block);

struct ErrorStats {
  double median = 0, p99 = 0, max = 0;  // percent
  size_t n = 0;
};
ErrorStats error_stats(std::vector<double> rel_errors_percent);

struct DosaValidation {
  ErrorStats energy, cycles;
  size_t failed = 0;  // rows whose mapping did not parse or evaluate as valid
  std::vector<size_t> worst_energy_rows;  // up to 10 row indices, worst first
  std::vector<double> energy_error, cycle_error;  // per evaluated row, percent (signed)
};

// Evaluates the given rows (indices into dataset.rows); all rows when `rows` is empty.
DosaValidation validate_dosa(const DosaDataset& d, std::span<const size_t> rows = {});

// `n` distinct row indices drawn with a fixed seed (the same on every platform), sorted.
std::vector<size_t> sample_rows(size_t total, size_t n, uint64_t seed);

}  // namespace mapfuse
