#pragma once
// Reports of GET-fusion studies (get_partition units, docs/get_search.md): the paper's Tables II-IV
// beside ours with the true optimum, the valid share of random groups (Fig. 3) and best DRAM
// against the plan budget (Fig. 5). Mean and spread over seeds.
#include <cstdint>
#include <string>
#include <vector>

#include "results/hdf5_writer.hpp"

namespace mapfuse {

// A get_partition unit's label read back (partitioners/study.hpp get_label):
// "get <network> <scheme> <kb>KB <search>+<split> b<budget> seed <s>", "... sample b<budget> seed <s>"
// (split "none") or "get <network> <scheme> <kb>KB exact" (split "none", budget and seed 0).
struct GetLabel {
  std::string network, scheme, search, split;
  double buffer_kb = 0;
  int64_t budget = 0;
  uint64_t seed = 0;
};
bool parse_get_label(const std::string& label, GetLabel& out);

// One cell of the paper's tables ([P] Mills et al., "Applying Graph Explanation to Operator
// Fusion": Table II from the PDF, Tables III and IV as the note ../shared/notes/get_fusion.md §7.2-7.4
// transcribes them, with its correction of LS+RG BRR MBv2 to 13.790). `row` is "baseline" (the
// search with the random split) or the GET: "GNNE", "PG", "RG". mbu_kb is 0 where the paper gives
// none (Tables III, IV).
struct PaperGetCell {
  const char* table;  // "II", "III", "IV"
  const char* search;  // rs, ls, nsga2
  const char* scheme;
  double buffer_kb;
  int64_t budget;
  const char* network;  // our network name (squeezenet1_0 for the paper's SqueezeNet, note §6)
  const char* row;
  double dram_mb, mbu_kb;
};
const std::vector<PaperGetCell>& paper_get_cells();

// Markdown sections for the study's get_partition units; "" when it has none.
std::string get_report_markdown(const StudyFile& s);

}  // namespace mapfuse
