#include "cli/study_units.hpp"

#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "engine/arch/arch_toml.hpp"
#include "engine/search/exhaustive.hpp"
#include "engine/search/fadiff/optimize.hpp"
#include "engine/search/mapspace.hpp"
#include "engine/search/mapspace_toml.hpp"
#include "engine/search/random_search.hpp"
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

std::vector<StudyLayer> mac_layers(const StudyWorkload& w) {
  const Workload wl = load_workload(w.spec, {w.batch, w.tokens});
  std::vector<StudyLayer> out;
  if (w.layers.empty()) {
    for (const Einsum& e : wl.einsums)
      if (e.op == OpKind::Mac) out.push_back({e.name, shape_key(e), mapspace_work(e)});
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
  for (const TracePoint& t : res.trace) r.trace.push_back({t.seconds, t.evaluations, t.best_edp});
  return r;
}

UnitResult run_unit(const WorkUnit& unit) {
  if (unit.kind == "optimize_network") return run_optimize_network(unit);
  return run_map_layer(unit);
}

}  // namespace mapfuse::cli
