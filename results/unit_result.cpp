#include "results/unit_result.hpp"

#include <nlohmann/json.hpp>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace mapfuse {

namespace {

// JSON has no inf/NaN (nlohmann writes null): non-finite doubles travel as the strings "inf",
// "-inf" and "nan"; finite ones as plain numbers (printed to round-trip exactly).
nlohmann::json num(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

nlohmann::json nums(const std::vector<double>& v) {
  auto a = nlohmann::json::array();
  for (double x : v) a.push_back(num(x));
  return a;
}

double get_num(const nlohmann::json& j) {
  if (j.is_string()) {
    const std::string s = j.get<std::string>();
    if (s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-inf") return -std::numeric_limits<double>::infinity();
    if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
    throw std::runtime_error("'" + s + "' is not a number");
  }
  return j.get<double>();
}

std::vector<double> get_nums(const nlohmann::json& j) {
  std::vector<double> v;
  for (const auto& x : j) v.push_back(get_num(x));
  return v;
}

}  // namespace

std::string to_json(const UnitResult& r) {
  nlohmann::json j;
  j["unit_id"] = r.unit_id;
  j["kind"] = r.kind;
  j["label"] = r.label;
  j["status"] = r.status == UnitResult::Status::Done ? "done" : "failed";
  j["message"] = r.message;
  j["rank"] = r.rank;
  j["wall_seconds"] = num(r.wall_seconds);
  if (!r.producer.empty()) j["producer"] = r.producer;
  j["energy_pj"] = num(r.energy_pj);
  j["cycles"] = num(r.cycles);
  j["edp"] = num(r.edp);
  j["level_names"] = r.level_names;
  j["level_energy_pj"] = nums(r.level_energy_pj);
  j["level_cycles"] = nums(r.level_cycles);
  j["best_mapping"] = r.best_mapping;
  auto& trace = j["trace"] = nlohmann::json::array();
  for (const auto& p : r.trace) trace.push_back({num(p.seconds), p.evaluations, num(p.best)});
  auto& pareto = j["pareto"] = nlohmann::json::array();
  for (const auto& p : r.pareto) pareto.push_back({num(p.energy_pj), num(p.cycles), p.mapping});
  if (!r.data.empty()) j["data"] = r.data;
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
    r.wall_seconds = get_num(j.at("wall_seconds"));
    if (j.contains("producer")) r.producer = j.at("producer").get<std::string>();
    r.energy_pj = get_num(j.at("energy_pj"));
    r.cycles = get_num(j.at("cycles"));
    r.edp = get_num(j.at("edp"));
    r.level_names = j.at("level_names").get<std::vector<std::string>>();
    r.level_energy_pj = get_nums(j.at("level_energy_pj"));
    r.level_cycles = get_nums(j.at("level_cycles"));
    r.best_mapping = j.at("best_mapping").get<std::string>();
    for (const auto& p : j.at("trace")) r.trace.push_back({get_num(p.at(0)), p.at(1).get<int64_t>(), get_num(p.at(2))});
    for (const auto& p : j.at("pareto")) r.pareto.push_back({get_num(p.at(0)), get_num(p.at(1)), p.at(2).get<std::string>()});
    if (j.contains("data")) r.data = j.at("data").get<std::string>();
    return r;
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(std::string("malformed unit result: ") + e.what());
  }
}

}  // namespace mapfuse
