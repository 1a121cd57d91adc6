#pragma once
// Reports of a study file: summary tables (Markdown or CSV) and PNG plots.
#include <string>
#include <utility>
#include <vector>

#include "results/hdf5_writer.hpp"
#include "results/schedule_h5.hpp"

namespace mapfuse {

// One architecture point of a study's sweep (from the study TOML; the caller parses it, results/
// does not know studies): its name, the sweep it belongs to (the [[architecture]]'s name) and
// its parameter values, axes in the order written.
struct SweepPointInfo {
  std::string arch;
  std::string family;
  std::vector<std::pair<std::string, double>> params;
};

// A map_layer unit's label "<workload>/<layer> @ <arch>[ seed <s>]" read back; a unit that stands
// for several identical layers is labelled "<workload>/{a,b,c} @ ...". False for other labels.
struct LayerLabel {
  std::string workload, arch, seed;
  std::vector<std::string> layers;
};
bool parse_layer_label(const std::string& label, LayerLabel& out);

// Network totals per (workload, architecture, seed): sums over the network's layers (a unit that
// stands for n identical layers counts n times) of energy and cycles; EDP = energy x cycles.
struct NetworkTotal {
  std::string workload, arch, seed;
  int layers = 0;
  double energy_pj = 0, cycles = 0;
  double edp() const { return energy_pj * cycles; }
};
std::vector<NetworkTotal> network_totals(const StudyFile& s);

// The sweep points' network totals, one CSV row per (sweep, workload, seed, point):
// family,workload,seed,arch,params,layers,complete,best,energy_pj,cycles,edp; params as
// "pe=16;scratchpad_kib=256". complete = the point has as many layers as the most complete point
// of its sweep (points with failed units are left out of the best); best = 1 for the lowest EDP.
std::string sweep_csv(const StudyFile& s, const std::vector<SweepPointInfo>& sweep);

// An optimize_network unit's label "<workload> @ <arch> <method> seed <s>" read back.
struct NetworkLabel {
  std::string workload, arch, method, seed;
};
bool parse_network_label(const std::string& label, NetworkLabel& out);

// Network optimizers compared (FADiff's Table 1 layout): per (workload, architecture) and method,
// the geometric mean of the exact EDP over seeds and its ratio to FADiff's (when FADiff ran).
struct OptimizerCell {
  std::string workload, arch, method;
  int seeds = 0;
  double edp_geomean = 0;
  double ratio_to_fadiff = 0;  // 0 when there is no FADiff cell to compare with
};
std::vector<OptimizerCell> optimizer_table(const StudyFile& s);

// Fused mappers (FFM and its baselines, docs/ffm.md): per (workload, architecture) FFM's joined
// optimum and, per baseline, how far above it the seeds ended on the study's objective.
struct FusedMapperRow {
  std::string workload, arch, method;  // method "ffm" for the optimum itself
  int seeds = 0;
  double energy_pj = 0, cycles = 0, edp = 0;  // ffm: the optimum
  size_t front = 0;                           // ffm: energy-latency front size
  double generation_s = 0, join_s = 0;        // ffm: summed generation unit time, join time
  std::string objective;                      // ffm: the objective of the optimum
  double gap_mean = 0, gap_min = 0, gap_max = 0;  // baselines: percent above FFM's optimum
};
std::vector<FusedMapperRow> fused_mapper_table(const StudyFile& s);

// The headline: per (workload, architecture) and method, the run with the lowest network EDP
// (over seeds): its energy, latency and EDP, how many Einsums and which cost model that price
// covers, its EDP relative to the layer-by-layer baseline that prices the same Einsums with the
// same model, and the fusion groups it chose. Methods: the layer mapper (map_layer units: the MAC
// layers, each mapped alone on the single-Einsum model, totals summed), network optimizers
// (optimize_network: the MAC layers on FADiff's exact network model, which without fusion is that
// sum), FFM (ffm_join: every Einsum on the fused model), FFM with fusion off (ffm_unfused) and
// FFM's baselines (ffm_baseline); for a network optimizer's best run that fused something also a
// row "<method>_unfused": the same mappings with every edge unfused (the unit's unfused_* columns). Baselines: ffm_unfused
// for FFM's family, <method>_unfused for the network optimizers (the layer mapper in files without
// those columns), the layer mapper for itself; a row whose baseline is missing or prices another
// number of Einsums gets no ratio. Failed or incomplete runs are left out.
struct HeadlineRow {
  std::string workload, arch, method;
  int runs = 0;  // seeds that finished
  double energy_pj = 0, cycles = 0, edp = 0;
  int einsums = 0;              // Einsums the price covers; 0 when the unit did not say
  std::string model;            // "per-layer", "fadiff-exact" or "ffm-fused"
  std::string baseline;         // the method edp_vs_layerwise is relative to; "" when none
  double edp_vs_layerwise = 0;  // edp / the baseline's; 0 when there is none
  std::string fused_groups;     // "none" when nothing is fused; "" when the unit did not say
  double unfused_energy_pj = 0, unfused_cycles = 0;  // network optimizers: the run's mappings, nothing fused
};
std::vector<HeadlineRow> headline_table(const StudyFile& s);

// The positions of layers in their networks (workload -> layer names in network order), for
// tables and plots; a layer not listed goes after the listed ones.
using LayerOrder = std::vector<std::pair<std::string, std::vector<std::string>>>;

struct ReportOptions {
  bool units = false;     // also the table of every unit
  LayerOrder layer_order;  // orders the unit table's layers
  std::string csv_hint;   // how to get the full CSV (printed after the headline)
};

// The headline table, the method tables of the study's kinds, network totals of layer mappers,
// the best point per network for sweeps (lowest network EDP), and with options.units every unit.
std::string report_markdown(const StudyFile& s, const std::vector<SweepPointInfo>& sweep = {}, const ReportOptions& options = {});
// One row per unit: id, kind, label, the parameter columns, the fixed fields, then one column per
// named metric (GET-fusion units), empty where a unit has none (docs/results.md).
std::string report_csv(const StudyFile& s);

// Writes the plots (results/plots.py under /usr/bin/python3) into `dir`; returns the files. Given
// a sweep_csv text with rows, it is written to <dir>/sweep_networks.csv and the script also draws
// one network-EDP heat map per sweep and network. Throws std::runtime_error with the script's
// output when plotting fails.
// With a layer order, it is written to <dir>/layer_order.csv (workload,layer per row, in network
// order) and the per-layer plots follow it.
std::vector<std::string> write_plots(const std::string& h5_path, const std::string& dir, const std::string& sweep_csv_text = {},
                                     const LayerOrder& layer_order = {});

// The table of a study's "schedule" units (one row each: totals, CTs, transfers, peak memory,
// timings; failed units with their reason); "" when it has none.
std::string schedule_units_markdown(const StudyFile& s);
// Schedule units grouped by (workload, architecture, mode), one row per allocation method (the
// unit's `method` column): best and geometric-mean EDP over seeds, the best run's latency and
// energy, mean search and tile-cost seconds, best EDP over the group's best; "" when no group
// compares methods and no method has several runs.
std::string schedule_methods_markdown(const StudyFile& s);
// With two architectures or more: per (workload, mode, method) the best EDP on each architecture
// (the heat map of Stream's Fig. 15 as text) and the least one; then per workload the best
// architecture over modes and methods. "" otherwise.
std::string schedule_arch_markdown(const StudyFile& s);

// A schedule file's totals (docs/results.md, "Schedule files"): per schedule its latency and
// energy, the energy breakdown, transfers by cause, and per core the CTs, busy cycles and peak
// memory against its capacity.
std::string schedule_report_markdown(const std::vector<ScheduleRecord>& schedules);

}  // namespace mapfuse
