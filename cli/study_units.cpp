#include "cli/study_units.hpp"

#include <algorithm>
#include <chrono>
#include <fmt/format.h>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "engine/arch/arch_toml.hpp"
#include "engine/common/error.hpp"
#include "engine/search/exhaustive.hpp"
#include "engine/search/ffm/baselines.hpp"
#include "engine/search/ffm/pmapping_io.hpp"
#include "engine/search/fadiff/cross.hpp"
#include "engine/search/fadiff/optimize.hpp"
#include "engine/search/mapspace.hpp"
#include "engine/search/mapspace_toml.hpp"
#include "engine/search/random_search.hpp"
#include "engine/validation/model_fingerprint.hpp"
#include "engine/workload/load.hpp"

namespace mapfuse::cli {

std::string shape_key(const Einsum& e) {
  // Everything the mapspace and the cost model see, without the Einsum's and tensors' names.
  std::string k = std::string(to_string(e.op)) + ";";
  for (const Rank& r : e.ranks) k += r.name + "=" + std::to_string(r.size) + ",";
  for (const TensorAccess& t : e.tensors) {
    k += ";" + std::string(to_string(t.role)) + ":" + std::to_string(t.bits_per_value) + ":";
    for (const Projection& d : t.dims) {
      k += "[";
      for (const ProjectionTerm& term : d) k += std::to_string(term.rank) + "*" + std::to_string(term.coeff) + "+";
      k += "]";
    }
  }
  return k;
}

namespace {

// The fusion groups of two or more Einsums, in execution order, as the "fused_groups" result
// column: "conv1+layer1.0.conv1; layer2.0.conv1+layer2.0.conv2"; "none" when nothing is fused.
std::string fused_groups_text(const std::vector<std::vector<std::string>>& groups) {
  std::string out;
  for (const auto& g : groups)
    if (g.size() > 1) out += fmt::format("{}{}", out.empty() ? "" : "; ", fmt::join(g, "+"));
  return out.empty() ? "none" : out;
}

std::string fused_groups_text(const LoopTree& t, const Workload& w) {
  std::vector<std::vector<std::string>> groups;
  for (const FusionGroup& g : t.groups) {
    groups.emplace_back();
    for (int e : g.einsums) groups.back().push_back(w.einsums[e].name);
  }
  return fused_groups_text(groups);
}
// A proxy of the size of an Einsum's mapspace: every rank's factorisations over a few slots grow
// with its number of divisors; measured exhaustive times follow this within a small factor.
double mapspace_work(const Einsum& e) {
  double w = 1;
  for (const Rank& r : e.ranks) {
    const double d = static_cast<double>(divisors(r.size).size());
    w *= d * d;
  }
  return w;
}
}  // namespace

std::vector<StudyLayer> study_layers(const StudyWorkload& w) {
  const Workload wl = load_workload(w.spec, {w.batch, w.tokens});
  std::vector<StudyLayer> out;
  if (w.layers.empty()) {
    for (const Einsum& e : wl.einsums) out.push_back({e.name, shape_key(e), mapspace_work(e), e.op == OpKind::Mac});
  } else {
    for (const std::string& name : w.layers) {
      const int i = wl.einsum_index(name);
      if (i < 0) out.push_back({name, std::string(), 1});  // unknown: its unit fails
      else out.push_back({name, shape_key(wl.einsums[i]), mapspace_work(wl.einsums[i])});
    }
  }
  return out;
}

UnitResult run_map_layer(const WorkUnit& unit) {
  if (unit.kind != "map_layer") throw std::runtime_error("unknown unit kind '" + unit.kind + "'");
  const nlohmann::json p = nlohmann::json::parse(unit.payload);
  // The point's architecture travels in the payload (sweep points exist nowhere else).
  const Architecture arch = p.contains("arch_toml") ? parse_architecture(p.at("arch_toml").get<std::string>(), p.at("arch").get<std::string>())
                                                    : load_architecture(p.at("arch").get<std::string>());
  const Core& core = arch.cores.at(0);
  const Workload w = load_workload(p.at("workload").get<std::string>(),
                                   {p.at("batch").get<int64_t>(), p.at("tokens").get<int64_t>()});
  const int index = w.einsum_index(p.at("layer").get<std::string>());
  if (index < 0) throw std::runtime_error("no Einsum '" + p.at("layer").get<std::string>() + "' in " + w.name);
  const Einsum& e = w.einsums[index];
  if (p.contains("layers"))  // a group of identical layers: the first one is mapped for all
    for (const auto& name : p.at("layers")) {
      const int j = w.einsum_index(name.get<std::string>());
      if (j < 0 || shape_key(w.einsums[j]) != shape_key(e))
        throw std::runtime_error("layer '" + name.get<std::string>() + "' is not identical to '" + e.name + "'");
    }
  const Objective objective = objective_from_string(p.at("objective").get<std::string>());
  const std::string constraints = p.at("constraints").get<std::string>();
  const Mapspace space = make_mapspace(constraints.empty() ? std::vector<ConstraintSpec>{} : load_constraints(constraints), e, core);
  UnitResult r;
  std::optional<Mapping> best;
  CostResult cost;
  if (p.at("method").get<std::string>() == "exhaustive") {
    ExhaustiveOptions opt;
    opt.objective = objective;
    opt.max_mappings = p.at("max_mappings").get<int64_t>();
    opt.front = p.value("pareto", true);
    opt.gap = p.value("gap", 0.0);
    MapperResult m = exhaustive_search(e, core, space, opt);
    best = m.best;
    cost = m.cost;
    for (const ParetoMapping& pm : m.pareto) r.pareto.push_back({pm.energy_pj, pm.cycles, to_text(pm.mapping, e, core)});
  } else {
    RandomMappingOptions ropt;
    ropt.space = &space;
    SearchResult s = random_search(e, core, p.at("budget").get<int64_t>(), p.at("seed").get<uint64_t>(), objective, ropt);
    best = s.best;
    cost = s.cost;
  }
  if (!best) {
    r.status = UnitResult::Status::Failed;
    r.message = "no valid mapping of " + e.name + " on " + core.name;
    return r;
  }
  r.energy_pj = cost.energy_pj;
  r.cycles = cost.cycles;
  r.edp = cost.edp();
  for (int l = static_cast<int>(core.levels.size()) - 1; l >= 0; --l) {
    r.level_names.push_back(core.levels[l].name);
    r.level_energy_pj.push_back(cost.level_energy_pj[l]);
    r.level_cycles.push_back(cost.level_cycles[l]);
  }
  r.best_mapping = to_text(*best, e, core);
  return r;
}

UnitResult run_optimize_network(const WorkUnit& unit) {
  if (unit.kind != "optimize_network") throw std::runtime_error("unknown unit kind '" + unit.kind + "'");
  const nlohmann::json p = nlohmann::json::parse(unit.payload);
  const Architecture arch = parse_architecture(p.at("arch_toml").get<std::string>(), p.at("arch").get<std::string>());
  const Core& core = arch.cores.at(0);
  const Workload w = load_workload(p.at("workload").get<std::string>(),
                                   {p.at("batch").get<int64_t>(), p.at("tokens").get<int64_t>()});
  OptimizeOptions o;
  o.seed = p.at("seed").get<uint64_t>();
  o.time_budget_s = p.at("time_budget_s").get<double>();
  o.max_evaluations = p.at("max_evaluations").get<int64_t>();
  const OptimizeResult res = optimize_network(w, core, parse_method(p.at("method").get<std::string>()), o);
  UnitResult r;
  if (!res.found) {
    r.status = UnitResult::Status::Failed;
    r.message = "no valid mapping of " + w.name + " on " + core.name + " within the budget";
    return r;
  }
  r.energy_pj = res.energy_pj;
  r.cycles = res.cycles;
  r.edp = res.edp;
  // The strategy as text: fusion groups, then every layer's mapping.
  std::string text = "groups:";
  for (const auto& g : res.groups) {
    text += " {";
    for (size_t i = 0; i < g.size(); ++i) text += (i ? "," : "") + res.layers[g[i]];
    text += "}";
  }
  for (size_t i = 0; i < res.layers.size(); ++i) {
    const int e = w.einsum_index(res.layers[i]);
    text += "\n" + res.layers[i] + ": " + (e >= 0 ? to_text(res.mappings[i], w.einsums[e], core) : std::string("?"));
  }
  r.best_mapping = text;
  std::vector<std::vector<std::string>> groups;
  for (const auto& g : res.groups) {
    groups.emplace_back();
    for (int i : g) groups.back().push_back(res.layers[i]);
  }
  r.columns.push_back(UnitColumn::of_text("fused_groups", fused_groups_text(groups)));
  // What fusion saved this plan: the same layer mappings, every edge unfused, on the same exact
  // model (price_fusion re-chooses each layer's DRAM order for it, as the search's decode does).
  // The report's headline measures FADiff's fusion against this, in FADiff's own mapspace.
  const FusionPrice unfused = price_fusion(SearchSpace(w, core), res.factors, std::vector<uint8_t>(res.fused.size(), 0),
                                           o.try_dram_orders);
  r.columns.push_back(UnitColumn::of_real("unfused_energy_pj", unfused.energy_pj));
  r.columns.push_back(UnitColumn::of_real("unfused_cycles", unfused.cycles));
  // The exact network model prices the MAC layers only: the report compares like with like by it.
  r.columns.push_back(UnitColumn::of_integer(
      "einsums_priced", std::count_if(w.einsums.begin(), w.einsums.end(), [](const Einsum& e) { return e.op == OpKind::Mac; })));
  for (const TracePoint& t : res.trace) r.trace.push_back({t.seconds, t.evaluations, t.best_edp});
  return r;
}

void check_ffm_input(const Workload& w, const Core& c, bool fusion) {
  bool exchanged = false;
  for (const TensorInfo& t : w.tensors) exchanged |= t.producer >= 0 && !t.consumers.empty();
  if (fusion && !exchanged)
    throw InputError({}, "workload '" + w.name + "'",
                     "has no producer/consumer pair of Einsums, so there is nothing to fuse; use --no-fusion "
                     "(fusion = false in a study) for the per-Einsum optima");
  const Level& top = c.levels.back();
  if (top.entries > 0)
    for (const TensorInfo& t : w.tensors)
      if (t.volume > top.entries)
        throw InputError({}, "tensor '" + t.name + "'",
                         fmt::format("{} words do not fit any level of core '{}': the outermost, '{}', holds {} words",
                                     t.volume, c.name, top.name, top.entries));
}

std::vector<int> ffm_tensor_indices(const Workload& w, const std::vector<std::string>& names, const std::string& key) {
  std::vector<std::string> all;
  for (const TensorInfo& t : w.tensors) all.push_back(t.name);
  std::vector<int> out;
  for (const std::string& n : names) {
    const auto it = std::find(all.begin(), all.end(), n);
    if (it == all.end())
      throw InputError({}, key, "no tensor '" + n + "' in workload '" + w.name + "'" + did_you_mean(n, all));
    out.push_back(static_cast<int>(it - all.begin()));
  }
  return out;
}

std::vector<int> other_intermediates(const Workload& w, const std::vector<int>& excluded) {
  std::vector<int> out;
  for (size_t t = 0; t < w.tensors.size(); ++t) {
    const TensorInfo& ti = w.tensors[t];
    if (ti.producer >= 0 && !ti.consumers.empty() &&
        std::find(excluded.begin(), excluded.end(), static_cast<int>(t)) == excluded.end())
      out.push_back(static_cast<int>(t));
  }
  return out;
}

namespace {

// What every fused-mapper unit of one (point, workload) shares, from its payload.
struct FfmSetup {
  Architecture arch;
  Workload w;
  ffm::FfmOptions opt;
  Objective objective = Objective::Edp;
  const Core& core() const { return arch.cores.at(0); }
};

FfmSetup ffm_setup(const nlohmann::json& p) {
  FfmSetup s{parse_architecture(p.at("arch_toml").get<std::string>(), p.at("arch").get<std::string>()),
             load_workload(p.at("workload").get<std::string>(), {p.at("batch").get<int64_t>(), p.at("tokens").get<int64_t>()}),
             {},
             objective_from_string(p.at("objective").get<std::string>())};
  const bool fusion = p.at("fusion").get<bool>();
  check_ffm_input(s.w, s.core(), fusion);
  s.opt.pmappings.allow_fusion = fusion;
  s.opt.must_not_fuse = ffm_tensor_indices(s.w, p.at("must_not_fuse").get<std::vector<std::string>>(), "must_not_fuse");
  if (p.at("must_fuse_others").get<bool>()) {
    s.opt.must_fuse = other_intermediates(s.w, s.opt.must_not_fuse);
  } else {
    s.opt.must_fuse = ffm_tensor_indices(s.w, p.at("must_fuse").get<std::vector<std::string>>(), "must_fuse");
  }
  s.opt.max_memory_mib = p.at("max_memory_mib").get<int64_t>();
  s.opt.epsilon = p.at("epsilon").get<double>();
  s.opt.all_orders = p.value("all_orders", false);
  s.opt.pmappings.nested_loops = static_cast<int>(p.value("nested_loops", int64_t{0}));
  s.opt.pmappings.resident = p.value("resident", true);
  if (const std::string c = p.value("constraints", std::string{}); !c.empty()) s.opt.pmappings.constraints = load_constraints(c);
  return s;
}

}  // namespace

// A (point, workload)'s setup and every Einsum's matchable contexts, which all its generation
// units share: computing them is a whole-network pass, which per unit cost as much as the
// generation itself on small Einsums (MobileNetV2: 64 units). Kept for the last few groups a
// process met (a rank works through one group's units at a time, in dispatch order).
struct FfmPrepared {
  FfmSetup setup;
  std::vector<std::vector<ffm::PmappingContext>> contexts;
};

std::shared_ptr<const FfmPrepared> ffm_prepared(const nlohmann::json& p) {
  nlohmann::json key = p;
  for (const char* k : {"einsum", "einsum_name", "slice", "slices"}) key.erase(k);
  const std::string k = key.dump();
  static std::mutex mutex;
  static std::vector<std::pair<std::string, std::shared_ptr<const FfmPrepared>>> recent;  // newest last
  {
    const std::lock_guard<std::mutex> lock(mutex);
    for (const auto& [rk, prepared] : recent)
      if (rk == k) return prepared;
  }
  // Contexts computed from the stored setup, in case they refer to it.
  auto built = std::make_shared<FfmPrepared>(FfmPrepared{ffm_setup(p), {}});
  built->contexts = ffm::matchable_contexts(built->setup.w, built->setup.core(), built->setup.opt);
  std::shared_ptr<const FfmPrepared> prepared = std::move(built);
  const std::lock_guard<std::mutex> lock(mutex);
  recent.emplace_back(k, prepared);
  if (recent.size() > 4) recent.erase(recent.begin());
  return prepared;
}

UnitResult run_ffm_pmappings(const WorkUnit& unit) {
  const nlohmann::json p = nlohmann::json::parse(unit.payload);
  const std::shared_ptr<const FfmPrepared> f = ffm_prepared(p);
  const FfmSetup& s = f->setup;
  UnitResult r;
  r.data = ffm::generate_pmapping_slice(s.w, s.core(), s.opt, f->contexts, p.at("einsum").get<int>(), p.at("slice").get<int>(),
                                        p.at("slices").get<int>());
  return r;
}

UnitResult run_ffm_baseline(const WorkUnit& unit) {
  const nlohmann::json p = nlohmann::json::parse(unit.payload);
  const FfmSetup s = ffm_setup(p);
  std::string method = p.at("method").get<std::string>();
  if (method.rfind("ffm_", 0) == 0) method = method.substr(4);
  ffm::BaselineOptions o;
  o.objective = s.objective;
  o.seed = p.at("seed").get<uint64_t>();
  o.time_budget_s = p.at("time_budget_s").get<double>();
  o.max_evaluations = p.at("max_evaluations").get<int64_t>();
  o.constraints = s.opt.pmappings.constraints;
  const ffm::BaselineResult b = ffm::run_baseline(s.w, s.core(), ffm::parse_baseline(method), o);
  UnitResult r;
  if (!b.found) {
    r.status = UnitResult::Status::Failed;
    r.message = fmt::format("no valid fused mapping of {} on {} in {} evaluations", s.w.name, s.core().name, b.evaluations);
    return r;
  }
  r.energy_pj = b.energy_pj;
  r.cycles = b.cycles;
  r.edp = b.energy_pj * b.cycles;
  r.best_mapping = to_text(b.tree, s.w, s.core());
  r.columns.push_back(UnitColumn::of_text("fused_groups", fused_groups_text(b.tree, s.w)));
  r.columns.push_back(UnitColumn::of_integer("einsums_priced", static_cast<int64_t>(s.w.einsums.size())));
  for (const auto& t : b.trace) r.trace.push_back({t.seconds, t.evaluations, t.best});
  return r;
}

const std::string& result_producer() {
  static const std::string p = std::string("mapfuse ") + MAPFUSE_VERSION + "/" + model_fingerprint();
  return p;
}

void complete_ffm_joins(const Study& study, std::vector<UnitResult>& results,
                        const std::function<void(const UnitResult&)>& append) {
  const auto& names = study.method.names;
  if (std::find(names.begin(), names.end(), "ffm") == names.end() && std::find(names.begin(), names.end(), "ffm_unfused") == names.end())
    return;
  // The generation units of each (point, workload), from the partition (deterministic).
  struct Group {
    nlohmann::json payload;  // of its first unit: what the join needs
    std::vector<std::string> ids;
    std::string label;
    std::vector<UnitColumn> columns;  // of its first unit, without the Einsum's
  };
  std::map<std::string, Group> groups;
  std::vector<std::string> order;
  for (const WorkUnit& u : partition_study(study, &study_layers)) {
    if (u.kind != "ffm_pmappings") continue;
    nlohmann::json p = nlohmann::json::parse(u.payload);
    nlohmann::json key = p;
    for (const char* k : {"einsum", "einsum_name", "slice", "slices"}) key.erase(k);
    const std::string k = key.dump();
    auto [it, fresh] = groups.try_emplace(k);
    if (fresh) {
      it->second.payload = p;
      it->second.label = ffm_join_label(p.at("workload_label").get<std::string>(), p.at("arch").get<std::string>(),
                                        p.value("method", std::string("ffm")));
      for (UnitColumn c : u.columns) {
        if (c.name == "einsum_index" || c.name == "slice") continue;
        if (c.name == "einsum") c.text.clear();
        it->second.columns.push_back(std::move(c));
      }
      order.push_back(k);
    }
    it->second.ids.push_back(u.id);
  }
  std::map<std::string, const UnitResult*> by_id;
  for (const UnitResult& r : results) by_id[r.unit_id] = &r;
  std::vector<UnitResult> joined;
  for (const std::string& k : order) {
    const Group& g = groups.at(k);
    UnitResult r;
    r.unit_id = stable_id("ffm_join\n" + k);
    r.kind = "ffm_join";
    r.producer = result_producer();
    r.label = g.label;
    r.columns = g.columns;
    if (by_id.count(r.unit_id)) continue;  // joined in an earlier run
    std::vector<std::string> slices;
    double generation = 0;
    std::string failed;
    size_t missing = 0;
    for (const std::string& id : g.ids) {
      const auto it = by_id.find(id);
      if (it == by_id.end()) {
        ++missing;
        continue;
      }
      if (it->second->status != UnitResult::Status::Done) {
        if (failed.empty()) failed = it->second->label + ": " + it->second->message;
        continue;
      }
      slices.push_back(it->second->data);
      generation += it->second->wall_seconds;
    }
    if (missing) continue;  // a sliced or interrupted run: joined once every slice is in
    const auto start = std::chrono::steady_clock::now();
    try {
      if (!failed.empty()) throw std::runtime_error("pmapping generation failed: " + failed);
      const FfmSetup s = ffm_setup(g.payload);
      const ffm::FfmResult f =
          ffm::ffm_join(s.w, s.core(),
                        ffm::merge_pmapping_slices(s.w, s.core(), ffm::matchable_contexts(s.w, s.core(), s.opt), slices),
                        s.opt.max_memory_mib << 20, s.opt.epsilon, s.opt.all_orders);
      const ffm::FfmSolution* best = f.best(s.objective);
      if (!best) {
        const std::string why = ffm::empty_join_reason(s.w, f);
        throw std::runtime_error("no fused mapping of " + s.w.name + " fits core " + s.core().name + (why.empty() ? "" : "; " + why));
      }
      r.energy_pj = best->energy_pj;
      r.cycles = best->cycles;
      r.edp = best->edp();
      int64_t kept = 0;
      for (const auto& e : f.pmappings) kept += e.kept;
      r.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      r.best_mapping = fmt::format("ffm: generation {:.6g} s over {} units, join {:.6g} s, {} pmappings kept, front of {} points, "
                                   "objective {}\n",
                                   generation, g.ids.size(), r.wall_seconds, kept, f.pareto.size(), to_string(s.objective)) +
                       to_text(best->tree, s.w, s.core());
      r.columns.push_back(UnitColumn::of_text("fused_groups", fused_groups_text(best->tree, s.w)));
      r.columns.push_back(UnitColumn::of_integer("einsums_priced", static_cast<int64_t>(s.w.einsums.size())));
      for (const ffm::FfmSolution& sol : f.pareto) r.pareto.push_back({sol.energy_pj, sol.cycles, to_text(sol.tree, s.w, s.core())});
    } catch (const std::exception& e) {
      r.status = UnitResult::Status::Failed;
      r.message = e.what();
      r.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    joined.push_back(std::move(r));
  }
  for (UnitResult& r : joined) {
    append(r);
    results.push_back(std::move(r));
  }
}

UnitResult run_unit(const WorkUnit& unit, TileCostCache* tile_cache) {
  if (unit.kind == "get_partition") return run_get_partition(unit);
  if (unit.kind == "get_dataset") return run_get_dataset(unit);
  if (unit.kind == "schedule") return run_schedule_unit(unit, tile_cache);
  if (unit.kind == "optimize_network") return run_optimize_network(unit);
  if (unit.kind == "ffm_pmappings") return run_ffm_pmappings(unit);
  if (unit.kind == "ffm_baseline") return run_ffm_baseline(unit);
  return run_map_layer(unit);
}

}  // namespace mapfuse::cli
