#include "results/unit_result.hpp"

#include <nlohmann/json.hpp>
#include <stdexcept>

namespace mapfuse {

std::string to_json(const UnitResult& r) {
  nlohmann::json j;
  j["unit_id"] = r.unit_id;
  j["kind"] = r.kind;
  j["label"] = r.label;
  j["status"] = r.status == UnitResult::Status::Done ? "done" : "failed";
  j["message"] = r.message;
  j["rank"] = r.rank;
  j["wall_seconds"] = r.wall_seconds;
  j["energy_pj"] = r.energy_pj;
  j["cycles"] = r.cycles;
  j["edp"] = r.edp;
  j["level_names"] = r.level_names;
  j["level_energy_pj"] = r.level_energy_pj;
  j["level_cycles"] = r.level_cycles;
  j["best_mapping"] = r.best_mapping;
  auto& trace = j["trace"] = nlohmann::json::array();
  for (const auto& p : r.trace) trace.push_back({p.seconds, p.evaluations, p.best});
  auto& pareto = j["pareto"] = nlohmann::json::array();
  for (const auto& p : r.pareto) pareto.push_back({p.energy_pj, p.cycles, p.mapping});
  return j.dump();
}

UnitResult unit_result_from_json(const std::string& text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
    UnitResult r;
    r.unit_id = j.at("unit_id").get<std::string>();
    r.kind = j.at("kind").get<std::string>();
    r.label = j.at("label").get<std::string>();
    const std::string status = j.at("status").get<std::string>();
    if (status != "done" && status != "failed") throw std::runtime_error("status '" + status + "' is not done or failed");
    r.status = status == "done" ? UnitResult::Status::Done : UnitResult::Status::Failed;
    r.message = j.at("message").get<std::string>();
    r.rank = j.at("rank").get<int>();
    r.wall_seconds = j.at("wall_seconds").get<double>();
    r.energy_pj = j.at("energy_pj").get<double>();
    r.cycles = j.at("cycles").get<double>();
    r.edp = j.at("edp").get<double>();
    r.level_names = j.at("level_names").get<std::vector<std::string>>();
    r.level_energy_pj = j.at("level_energy_pj").get<std::vector<double>>();
    r.level_cycles = j.at("level_cycles").get<std::vector<double>>();
    r.best_mapping = j.at("best_mapping").get<std::string>();
    for (const auto& p : j.at("trace")) r.trace.push_back({p.at(0).get<double>(), p.at(1).get<int64_t>(), p.at(2).get<double>()});
    for (const auto& p : j.at("pareto")) r.pareto.push_back({p.at(0).get<double>(), p.at(1).get<double>(), p.at(2).get<std::string>()});
    return r;
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(std::string("malformed unit result: ") + e.what());
  }
}

}  // namespace mapfuse
