// GET-fusion's study unit ("get_partition") and the network lookup `mapfuse partition` shares
// with it. Apart from study_units.cpp: the fusion-group model's FusionGroup and the LoopTree's
// are different types of one name.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>

#include "cli/study_units.hpp"
#include "engine/common/error.hpp"
#include "engine/cost/fusion_group.hpp"
#include "engine/search/get/gnn/dataset.hpp"
#include "engine/search/get/partition.hpp"
#include "engine/workload/op_graph.hpp"
#include "engine/workload/zoo.hpp"
#include "results/get_dataset_h5.hpp"

namespace mapfuse::cli {

std::string resolve_get_network(const std::string& w, const std::string& key) {
  namespace fs = std::filesystem;
  if (fs::is_regular_file(w)) return w;
  std::vector<std::string> names;
  if (const char* shared = std::getenv("MAPFUSE_SHARED_DATA")) {
    const fs::path dir = fs::path(shared) / "get" / "onnx";
    if (fs::is_regular_file(dir / (w + ".onnx"))) return (dir / (w + ".onnx")).string();
    if (fs::is_directory(dir))
      for (const auto& e : fs::directory_iterator(dir))
        if (e.path().extension() == ".onnx") names.push_back(e.path().stem().string());
  }
  throw InputError({}, key,
                   "'" + w + "' is neither an ONNX file nor a network of $MAPFUSE_SHARED_DATA/get/onnx" +
                       did_you_mean(w, names));
}

std::string get_network_spec(const std::string& w, const std::string& key) {
  const auto zoo = zoo_names();
  if (std::find(zoo.begin(), zoo.end(), w) != zoo.end()) {
    const char* shared = std::getenv("MAPFUSE_SHARED_DATA");
    namespace fs = std::filesystem;
    if (!fs::is_regular_file(w) && !(shared && fs::is_regular_file(fs::path(shared) / "get" / "onnx" / (w + ".onnx"))))
      return w;
  }
  return resolve_get_network(w, key);
}

OpGraph load_get_network(const std::string& w, const std::string& key) {
  const std::string spec = get_network_spec(w, key);
  return std::filesystem::is_regular_file(spec) ? load_op_graph(spec) : op_graph_from_workload(zoo_workload(spec));
}

std::vector<OpGraph> load_training_graphs(const std::vector<std::string>& networks, const std::string& onnx_dir,
                                          const std::string& key) {
  namespace fs = std::filesystem;
  std::vector<OpGraph> graphs;
  for (const std::string& n : networks) {
    const std::string path = onnx_dir.empty() ? resolve_get_network(n, key) : (fs::path(onnx_dir) / (n + ".onnx")).string();
    if (!fs::is_regular_file(path)) throw InputError({path, 0, 0}, key, "no such ONNX file");
    graphs.push_back(load_op_graph(path));
    graphs.back().name = n;
  }
  return graphs;
}

UnitResult run_get_dataset(const WorkUnit& unit) {
  const nlohmann::json p = nlohmann::json::parse(unit.payload);
  get::gnn::DatasetSpec spec;
  spec.scheme = fusion_scheme_from_string(p.at("scheme").get<std::string>());
  spec.groups_per_network = p.at("groups").get<int64_t>();
  spec.max_group_nodes = p.at("max_group_nodes").get<int32_t>();
  spec.seed = p.at("seed").get<uint64_t>();
  const int shard = p.at("shard").get<int>(), shards = p.at("shards").get<int>();
  const std::vector<OpGraph> graphs = load_training_graphs(p.at("networks").get<std::vector<std::string>>(), "", "networks");
  std::vector<const OpGraph*> gp;
  for (const OpGraph& g : graphs) gp.push_back(&g);
  // The draws of every network up to this one (one random stream), then this one's shard labelled.
  const std::vector<get::gnn::DrawnGroups> drawn = get::gnn::draw_groups(gp, spec);
  const auto k = static_cast<int32_t>(graphs.size() - 1);
  const size_t n = drawn.back().groups.size();
  const size_t first = n * static_cast<size_t>(shard) / static_cast<size_t>(shards);
  const size_t last = n * static_cast<size_t>(shard + 1) / static_cast<size_t>(shards);
  const std::vector<get::gnn::LabelledGroup> samples = get::gnn::label_groups(graphs.back(), k, drawn.back(), first, last, spec);
  std::vector<GetDatasetRow> rows;
  int64_t valid = 0;
  for (const get::gnn::LabelledGroup& s : samples) {
    GetDatasetRow r;
    r.scheme = std::string(to_string(spec.scheme));
    r.network = graphs.back().name;
    r.network_index = k;
    r.shard = shard;
    r.split = s.split;
    r.buffer_kb = s.buffer_kb;
    r.buffer_need_bytes = s.buffer_need;
    r.supported = s.supported;
    r.valid = s.valid;
    for (size_t i = 0; i < s.nodes.size(); ++i) r.group += (i ? ";" : "") + graphs.back().nodes[s.nodes[i]].name;
    valid += s.valid;
    rows.push_back(std::move(r));
  }
  UnitResult r;
  r.metrics = {{"groups", static_cast<double>(last - first)},
               {"samples", static_cast<double>(rows.size())},
               {"valid_samples", static_cast<double>(valid)}};
  r.data = get_dataset_rows_to_json(rows);
  return r;
}

UnitResult run_get_partition(const WorkUnit& unit) {
  const nlohmann::json p = nlohmann::json::parse(unit.payload);
  get::PartitionSpec s;
  s.scheme = fusion_scheme_from_string(p.at("scheme").get<std::string>());
  s.buffer_kb = p.at("buffer_kb").get<double>();
  s.mode = get::partition_mode_from_string(p.at("search").get<std::string>());
  const bool exact = s.mode == get::PartitionMode::Exact, sample = s.mode == get::PartitionMode::Sample;
  if (!exact && !sample) s.split = get::split_kind_from_string(p.at("split").get<std::string>());
  s.budget = exact ? 1 : p.at("budget").get<int64_t>();
  s.seed = p.at("seed").get<uint64_t>();
  s.model.bytes_per_element = p.at("bytes_per_element").get<int>();
  s.model.kb = p.value("kb_bytes", int64_t{1024});
  s.model.line_buffer = line_buffer_form_from_string(p.at("line_buffer").get<std::string>());
  s.population = p.value("population", s.population);
  s.max_depth = p.value("max_depth", s.max_depth);
  s.max_category3 = p.value("max_category3", s.max_category3);
  s.occlusion_fraction = p.value("occlusion_fraction", s.occlusion_fraction);
  s.max_states = p.value("max_states", s.max_states);
  s.time_limit_s = p.value("time_limit_s", s.time_limit_s);
  s.assume_monotone = p.value("assume_monotone", s.assume_monotone);
  const OpGraph g = load_get_network(p.at("network").get<std::string>(), "networks");
  const get::PartitionOutcome o = get::partition_network(g, s);
  const double mb = static_cast<double>(s.model.kb * s.model.kb), kb = static_cast<double>(s.model.kb);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  UnitResult r;
  auto metric = [&](const char* name, double v) { r.metrics.push_back({name, v}); };
  metric("nodes", o.nodes);
  metric("fuseable_nodes", o.fuseable);
  metric("plans", static_cast<double>(o.plans));
  metric("seconds", o.seconds);
  if (sample) {
    metric("sampled_groups", static_cast<double>(o.sample.groups));
    metric("valid_groups", static_cast<double>(o.sample.valid));
    metric("valid_share", o.sample.share());
    return r;
  }
  metric("dram_mb", o.best.dram / mb);
  metric("mbu_kb", o.best.mbu / kb);
  metric("groups", static_cast<double>(o.best.groups.size()));
  if (exact) {
    metric("optimal", o.exact.optimal ? 1 : 0);
    metric("lower_bound_mb", o.exact.lower_bound / mb);
    metric("gap", o.exact.gap);
    metric("interval_dp_mb", o.exact.interval_dram >= 0 ? o.exact.interval_dram / mb : nan);
  } else {
    metric("rectify_rate", o.rectify_rated() ? o.rectify.rate() : nan);
    metric("rectify_rate_calls", o.rectify_rated() ? o.rectify.call_rate() : nan);
    metric("invalid_groups", static_cast<double>(o.rectify.distinct));
    metric("fallbacks", static_cast<double>(o.rectify.fallbacks));
    metric("model_calls", static_cast<double>(o.model_calls));
    for (const get::TracePoint& t : o.trace) r.trace.push_back({0.0, t.plan, t.dram / mb});
  }
  r.best_mapping = get::groups_text(g, o.best.groups);
  return r;
}

}  // namespace mapfuse::cli
