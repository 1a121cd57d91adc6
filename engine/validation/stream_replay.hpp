#pragma once
// Stream classic's own schedules, dumped CN by CN (shared/data/stream/derived/coala/README.md), as
// COALA problems: the inputs (cns.csv, edges.csv, cost_lut.csv, totals.json) become a
// coala::Problem; the outputs (per-CN start/end, transfers.csv, totals) are what a schedule under
// Stream semantics must reproduce.
#include <string>
#include <vector>

#include "engine/cost/coala.hpp"

namespace mapfuse {

struct StreamReplay {
  std::string folder;
  coala::Problem problem;
  struct Cn {
    int layer = 0, sub = 0, pick = 0;
    double start = 0, end = 0;
    // Stream's timing chain (cns.csv trace columns), to localise a difference; NaN when absent.
    double preds_end = 0, ready = 0, after_inputs = 0;
  };
  std::vector<Cn> expected;  // indexed like problem.tiles
  struct Event {  // one row of transfers.csv
    bool block = false;
    double start = 0, end = 0;
    bool new_event = true;
  };
  std::vector<Event> expected_transfers;
  double expected_latency_cc = 0, expected_energy_pj = 0;
  std::vector<std::pair<std::string, double>> expected_breakdown;
};

// Throws InputError naming the file, row and column for a malformed folder.
StreamReplay load_stream_replay(const std::string& folder);

struct ReplayComparison {
  size_t cns = 0, cn_mismatches = 0, pick_mismatches = 0;
  size_t transfers = 0, expected_transfers = 0, transfer_mismatches = 0;
  double latency_cc = 0, energy_pj = 0;
  bool latency_match = false, energy_match = false;
  struct CnDiff {
    int tile, layer, sub;
    double start, end, expected_start, expected_end;
    double preds_end, ready, after_inputs;                    // COALA's timing chain
    double expected_preds_end, expected_ready, expected_after_inputs;  // Stream's
  };
  std::vector<CnDiff> diffs;  // every mismatching CN, in pick order of the oracle
  long first_transfer_mismatch = -1;  // row of transfers.csv
  coala::Transfer first_transfer_got{};
  StreamReplay::Event first_transfer_expected{};
  bool ok() const { return cn_mismatches == 0 && latency_match && energy_match; }
};

// Per CN (start, end) to the cycle (1e-6 cc), latency and energy to a relative 1e-9.
ReplayComparison compare_replay(const StreamReplay& replay, const coala::Schedule& schedule);

}  // namespace mapfuse
