#pragma once
// A study as written in experiments/*.toml, and its partition into work units (docs/studies.md).
//
//   name = "quickstart"
//   [[workload]]      spec = "resnet18", layers = ["conv1"] (default: every MAC Einsum), batch = 1, tokens = 8192
//   [[architecture]]  spec = "gemmini_default" (preset or file) | inline: name, [architecture.compute],
//                     [[architecture.level]] as in an architecture file;
//                     name = "gemmini" (prefix of point names), constraints = "presets/constraints/gemmini_dosa.toml"
//   [architecture.sweep]  pe = [8, 16], scratchpad_kib = [64, 256], Scratchpad.block_size = [1, 8], ...
//   [method]          name = "random" | "exhaustive", objective = "edp", budget = 20000, seeds = [1],
//                     max_mappings = 200000000, group_identical = true, pareto = true, gap = 0
//                   | name = "fadiff" | ["dosa", "bo", "ga", "fadiff"], time_budget_s = 10,
//                     max_evaluations = 0, seeds = [1, 2]
//                   | name = "ffm" | ["ffm", "ffm_unfused", "ffm_sa", "ffm_ga", "ffm_random"], objective = "edp",
//                     context_slices = 1, fusion = true, must_fuse = [...] | "others",
//                     must_not_fuse = [...], max_memory_mib = 0, epsilon = 0, time_budget_s, max_evaluations, seeds
//
// method.name may list one layer mapper with network optimizers and fused mappers (docs/studies.md,
// "Mixing method families"); each family's units are as in a study of that family alone.
//
// Every [[architecture]] gives one or more architecture points: the product of its sweep axes
// (engine/arch/arch_sweep.hpp), named "<name>_<tag><value>..." (gemmini_pe16_sp256_acc64), or the
// architecture itself when it has no sweep.
//
// Units ("map_layer"): one per (point, workload layer, seed). For the exhaustive method, layers of
// one workload with identical Einsum shapes share one unit (group_identical, default true): its
// payload lists them all ("layers") and its label reads "<workload>/{a,b,c} @ <point>"; the
// unit's metrics are those of each one of them. Payload = the unit's parameters as JSON including
// the point's architecture TOML; id = stable hash of kind and payload.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/common/error.hpp"
#include "partitioners/work_unit.hpp"

namespace mapfuse {

struct StudyWorkload {
  std::string spec;
  std::vector<std::string> layers;  // empty = every MAC Einsum
  int64_t batch = 1, tokens = 8192;
};

struct SweepAxis {
  std::string key;  // architecture parameter (engine/arch/arch_sweep.hpp): pe, scratchpad_kib, Scratchpad.size_kb, ...
  std::vector<double> values;
  SourceLocation where;
  std::string key_path;  // architecture[0].sweep.pe
};

struct ArchitecturePoint {
  std::string name;                                    // gemmini_pe16_sp256_acc64 (the architecture's own name without a sweep)
  std::vector<std::pair<std::string, double>> params;  // (axis key, value), axes in the order written
  std::string toml;  // the point's architecture as TOML (to_toml); "" when parsed without loading
};

struct StudyArchitecture {
  std::string spec;         // preset name or file ("" when written inline)
  std::string name;         // prefix of the point names
  std::string constraints;  // constraint file, "" = none
  std::vector<SweepAxis> sweep;            // in the order written
  std::vector<ArchitecturePoint> points;   // product of the axes, the last axis varying fastest
  std::vector<std::string> constrained_layers;  // layers the constraint file names (never grouped)
};

// Layer mappers ("random", "exhaustive": one unit per layer) or network optimizers ("fadiff",
// "dosa", "ga", "bo": joint mapping and fusion of a whole network, engine/search/fadiff; one unit
// per (point, workload, method, seed), kind "optimize_network").
bool is_network_method(const std::string& name);

// Fused mappers of a whole workload on FFM's mapspace (engine/search/ffm): "ffm" (exact; its
// pmapping generation is cut into "ffm_pmappings" units, one per (point, workload, Einsum, context
// slice), joined by the runner into one "ffm_join" result per (point, workload)), "ffm_unfused"
// (the same with fusion off and no fixed fusion decisions: the exact layer-by-layer optimum of
// the same Einsums on the same mapspace and cost model, the baseline fusion is measured against)
// and its baselines "ffm_sa", "ffm_ga", "ffm_random" (one "ffm_baseline" unit per seed).
bool is_fused_method(const std::string& name);

struct StudyMethod {
  std::string name = "random";
  std::vector<std::string> names = {"random"};  // every method listed (name = the first); network optimizers only may list several
  double time_budget_s = 10;    // network optimizers: wall-time budget per unit
  int64_t max_evaluations = 0;  // network optimizers: evaluation budget (0 = none; ends a run deterministically)
  std::string objective = "edp";
  int64_t budget = 20000;
  std::vector<uint64_t> seeds = {1};
  int64_t max_mappings = 200'000'000;
  bool group_identical = true;  // exhaustive: one unit per distinct Einsum shape
  // exhaustive: also record each unit's energy/cycles Pareto front, which evaluates the whole
  // mapspace; false: branch and bound on the objective alone (full mapspaces become searchable).
  bool pareto = true;
  // exhaustive with pareto = false: branch and bound within this relative optimality gap
  // (ExhaustiveOptions::gap); 0 = exact.
  double gap = 0;
  // Fused mappers
  int context_slices = 1;       // ffm: generation units per Einsum
  bool fusion = true;           // ffm: false = every Einsum alone
  std::vector<std::string> must_fuse, must_not_fuse;  // fixed fusion decisions (tensor names)
  bool must_fuse_others = false;  // must_fuse = "others": every intermediate not in must_not_fuse
  int64_t max_memory_mib = 0;   // ffm: stop the join with a clear error beyond this (0 = none)
  double epsilon = 0;           // ffm: two-pass epsilon pruning of the join (0 = one exact join)
  bool all_orders = false;      // ffm: join in every order of the Einsums (FfmOptions::all_orders)
  int64_t nested_loops = 0;     // ffm: nested fusion, loops per Einsum of a nested run (PmappingOptions::nested_loops)
  bool resident = true;         // ffm: storage above the split, weights resident (PmappingOptions::resident)
};

// GET-fusion partition runs (docs/studies.md, "GET-fusion studies"): one "get_partition" unit per
// (network, scheme, buffer, search, split, budget, seed). "exact" units (the true optimum) depend on
// (network, scheme, buffer) only; "sample" units (Fig. 3) take no split. Names are checked when
// the study is read; a network is loaded only by its unit.
struct StudyGet {
  std::vector<std::string> networks;  // ONNX files or names under $MAPFUSE_SHARED_DATA/get/onnx
  std::vector<std::string> schemes = {"lbdf"};     // lbdf, brr
  std::vector<double> buffer_kb;                    // β in KB (1024 B)
  std::vector<std::string> searches = {"ls"};      // rs, ls, nsga2, exact, sample
  std::vector<std::string> splits = {"random"};    // random, cut, occlusion, dp
  std::vector<int64_t> budgets = {2000};
  std::vector<uint64_t> seeds = {1};
  int population = 10, max_depth = 8, max_category3 = 16, bytes_per_element = 2;
  int64_t kb_bytes = 1024;  // bytes per KB (1024 or 1000); MB = KB * KB
  double occlusion_fraction = 0.2;
  std::string line_buffer = "full-rows";
  int64_t max_states = 0;      // exact: deterministic limit (0: none)
  double time_limit_s = 60;    // exact: wall-clock limit
  bool assume_monotone = false;
};

// GET-fusion's classifier data as a study (docs/get.md, "Dataset generation as a study"): one
// "get_dataset" unit per (scheme, training network, shard) draws the network's random groups (one
// random stream runs through the networks in order, so a unit replays the draws of the networks
// before its own) and labels its shard of them at 128 … 2048 KB; the study file holds every row in
// /get_dataset in the single-process `get-train` order, and `get-train --dataset` trains from it.
struct StudyGetDataset {
  std::vector<std::string> schemes = {"lbdf"};
  std::vector<std::string> networks;  // empty: the scheme's training networks (gnn::training_networks)
  int64_t groups = 0;                 // distinct groups per network (0: the scheme's default)
  int max_group_nodes = 48;
  uint64_t seed = 1;
  int shards = 1;                     // labelling units per network
};

// Stream schedules (docs/studies.md, "Stream schedules"): one "schedule" unit per (workload,
// architecture, mode, seed); each runs `mapfuse schedule`'s pipeline (tiles, allocation, tile
// costs from the mapper or a table, COALA) and lands with its totals as metrics and its schedule
// under the study file's /schedules. The allocation is a file, greedy, or a search (ga, waco)
// with its knobs; only the searches take seeds (a file or greedy runs once). Relative paths are
// taken from the study file's directory.
struct StudySchedule {
  std::vector<std::string> workloads;       // ONNX files or workload specs
  std::vector<std::string> architectures;   // presets or TOML files
  std::vector<std::string> modes = {"fused"};  // fused, lbl
  std::string allocation = "greedy";        // greedy, ga, waco or an allocation file
  std::string method;                       // the allocation's name in labels and tables (schedule_method)
  // Fused stacks (StackSpec: auto, auto:F, first, "0-10,11-21"). An array sweeps the cut points:
  // one fused unit per value (a "stacks" column, the value in the label); lbl units run once.
  std::vector<std::string> stacks = {"auto"};
  bool stacks_swept = false;
  std::string granularity = "stream:4";
  std::string tile_costs;                   // a table or Stream dump folder; "" = mapfuse's mapper
  std::string semantics = "stream";
  bool fold_unary = false;
  double mapper_gap = 0;  // per-tile searches within this relative gap (TileCostOptions::mapper_gap)
  int64_t mapper_work = 0;  // per-tile searches stop after this much work (TileCostOptions::mapper_work)
  std::vector<uint64_t> seeds = {1};        // ga: its random seed; waco: CBC's
  int generations = 16, population = 16;    // ga (GaOptions)
  int max_parallelism = 0;                  // waco: largest K split (0 = every capable core)
  double time_limit_s = 60;                 // waco: CBC's limit per stack
  int64_t max_nodes = 0;                    // waco: CBC's node limit per stack (0 = none)
  bool searched() const { return allocation == "ga" || allocation == "waco"; }
};

// The default name of an entry's allocation method: greedy, ga, waco (waco_p<P> with
// max_parallelism P > 0), or the allocation file's stem.
std::string schedule_method(const StudySchedule& e);

struct Study {
  std::string name;
  std::string file;       // where it was read from
  std::string toml_text;  // verbatim
  std::vector<StudyWorkload> workloads;
  std::vector<StudyArchitecture> architectures;
  StudyMethod method;
  std::vector<StudyGet> get;  // a GET-fusion study has these instead of workloads, architectures, method
  std::vector<StudySchedule> schedule;  // a schedule study has these instead (and no [[get]])
  std::vector<StudyGetDataset> get_dataset;  // a dataset study has these and nothing else
};

// Parses and validates a study (InputError with file, line and key; unknown keys get the nearest
// valid one; an empty sweep axis, an unknown sweep key, a non-positive sweep value or an unknown
// method is an error). Relative architecture and constraint paths are taken relative to the study
// file's directory. With load_architectures, architectures and constraint files are read, each
// point is built and its TOML kept; without (reports of a finished study, whose files may be
// elsewhere by now), the points have names and parameters only.
Study parse_study(const std::string& toml_text, const std::string& file, bool load_architectures = true);
Study load_study(const std::string& path);

// A layer of a workload and the key of its Einsum's shape: equal keys = identical mapspaces and
// costs (every rank, size, projection and tensor role equal; names of the Einsum and of its
// tensors may differ). An empty shape key is never grouped.
struct StudyLayer {
  std::string name;
  std::string shape;
  double work = 1;  // relative size of the layer's mapspace (the exhaustive unit's cost hint)
  bool mac = true;  // layer mappers map MAC Einsums only; fused mappers map every Einsum
};

// The study's work units. `layers_of` lists a workload's layers (its `layers`, or every MAC
// Einsum) with their shape keys; the caller supplies it so that this stays free of workload
// loading.
using LayerLister = std::vector<StudyLayer> (*)(const StudyWorkload&);
std::vector<WorkUnit> partition_study(const Study& s, LayerLister layers_of);

// The label of a map_layer unit: "<workload>/<layer> @ <point>[ seed <s>]", the layer part written
// "{a,b,c}" when the unit stands for several layers (results/report.cpp reads it back).
// The label of an optimize_network or ffm_baseline unit: "<workload> @ <point> <method> seed <s>".
// The label of an ffm_pmappings unit: "<workload>/<einsum> @ <point> <method> slice <j>/<n>"; of
// the joined result: ffm_join_label = "<workload> @ <point> <method>" (method ffm or ffm_unfused).
// The parameter columns units start from (docs/results.md, "Parameter columns"): workload, einsum
// ("" for a whole network; a unit standing for identical layers lists them "a,b,c"), arch (the
// point's name), method, seed (when the method has one), objective, then the value of each sweep
// parameter of the point, named by its key (pe, Scratchpad.size_kb, ...). A kind appends its own.
std::vector<UnitColumn> parameter_columns(const std::string& workload, const std::string& einsum, const ArchitecturePoint& point,
                                          const std::string& method, std::optional<uint64_t> seed, const std::string& objective);

std::string network_label(const std::string& workload, const std::string& point, const std::string& method, uint64_t seed);

std::string ffm_join_label(const std::string& workload, const std::string& point, const std::string& method);

// The label of a get_partition unit: "get <network> <scheme> <buffer>KB <search>[+<split>] b<budget>
// seed <s>" ("exact" units: "get <network> <scheme> <buffer>KB exact"); results/report.cpp reads
// it back (parse_get_label).
std::string get_label(const std::string& network, const std::string& scheme, double buffer_kb, const std::string& search,
                      const std::string& split, int64_t budget, uint64_t seed);

// The label of a schedule unit: "schedule <workload> <mode> @ <arch>" (file stems for paths), then
// " <method> seed <s>" for a searched allocation (ga, waco).
std::string schedule_label(const std::string& workload, const std::string& mode, const std::string& arch,
                           const std::string& method = "", std::optional<uint64_t> seed = std::nullopt);

std::string map_layer_label(const std::string& workload, const std::vector<std::string>& layers, const std::string& point,
                            const std::string& seed);


}  // namespace mapfuse
