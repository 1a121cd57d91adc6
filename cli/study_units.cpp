#include "cli/study_units.hpp"

#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "engine/arch/arch_toml.hpp"
#include "engine/search/exhaustive.hpp"
#include "engine/search/mapspace_toml.hpp"
#include "engine/search/random_search.hpp"
#include "engine/workload/load.hpp"

namespace mapfuse::cli {

std::vector<std::string> mac_layers(const StudyWorkload& w) {
  const Workload wl = load_workload(w.spec, {w.batch, w.tokens});
  std::vector<std::string> names;
  for (const Einsum& e : wl.einsums)
    if (e.op == OpKind::Mac) names.push_back(e.name);
  return names;
}

UnitResult run_map_layer(const WorkUnit& unit) {
  if (unit.kind != "map_layer") throw std::runtime_error("unknown unit kind '" + unit.kind + "'");
  const nlohmann::json p = nlohmann::json::parse(unit.payload);
  const Architecture arch = load_architecture(p.at("arch").get<std::string>());
  const Core& core = arch.cores.at(0);
  const Workload w = load_workload(p.at("workload").get<std::string>(),
                                   {p.at("batch").get<int64_t>(), p.at("tokens").get<int64_t>()});
  const int index = w.einsum_index(p.at("layer").get<std::string>());
  if (index < 0) throw std::runtime_error("no Einsum '" + p.at("layer").get<std::string>() + "' in " + w.name);
  const Einsum& e = w.einsums[index];
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
    if (!space.levels.empty()) {
      bool any = false;
      for (const auto& lc : space.levels) any = any || lc.order || lc.keep || lc.spatial_x || lc.spatial_y;
      if (any) throw std::runtime_error("the random method does not take mapspace constraints yet");
    }
    SearchResult s = random_search(e, core, p.at("budget").get<int64_t>(), p.at("seed").get<uint64_t>(), objective);
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

}  // namespace mapfuse::cli
