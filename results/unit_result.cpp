#include "results/unit_result.hpp"

#include <nlohmann/json.hpp>
#include <cmath>
#include <algorithm>
#include <iterator>
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

// The fields of /units that are not parameter columns.
bool is_fixed_unit_field(const std::string& name) {
  static const char* const fixed[] = {"id",           "kind",         "label",        "status",      "message",
                                      "rank",         "wall_seconds", "energy_pj",    "cycles",      "edp",
                                      "best_mapping", "level_offset", "level_count",  "trace_offset", "trace_count",
                                      "pareto_offset", "pareto_count"};
  return std::find(std::begin(fixed), std::end(fixed), name) != std::end(fixed);
}

std::vector<UnitColumn> table_columns(const std::vector<UnitResult>& results) {
  using T = UnitColumn::Type;
  auto spec = [](const char* name, T type) { return UnitColumn{name, type, {}, -1, std::numeric_limits<double>::quiet_NaN()}; };
  std::vector<UnitColumn> out = {spec("workload", T::Text), spec("einsum", T::Text), spec("arch", T::Text),
                                 spec("method", T::Text),   spec("seed", T::Integer), spec("objective", T::Text)};
  for (const UnitResult& r : results)
    for (const UnitColumn& c : r.columns) {
      if (is_fixed_unit_field(c.name))
        throw std::invalid_argument("unit " + r.unit_id + ": parameter column '" + c.name + "' has the name of a fixed field");
      auto it = std::find_if(out.begin(), out.end(), [&](const UnitColumn& s) { return s.name == c.name; });
      if (it == out.end()) out.push_back(spec(c.name.c_str(), c.type));
      else if (it->type != c.type)
        throw std::invalid_argument("unit " + r.unit_id + ": parameter column '" + c.name + "' has another type than in other units");
    }
  return out;
}

bool is_missing_cell(const UnitColumn& c) {
  return c.type == UnitColumn::Type::Text ? c.text.empty() : c.type == UnitColumn::Type::Integer ? c.integer == -1 : std::isnan(c.real);
}

std::string to_json(const UnitResult& r) {
  nlohmann::json j;
  j["unit_id"] = r.unit_id;
  j["kind"] = r.kind;
  j["label"] = r.label;
  if (!r.columns.empty()) {
    // [name, value] pairs in order; the value's JSON type is the column's type.
    auto& cols = j["columns"] = nlohmann::json::array();
    for (const UnitColumn& c : r.columns)
      cols.push_back(c.type == UnitColumn::Type::Text      ? nlohmann::json{c.name, c.text}
                     : c.type == UnitColumn::Type::Integer ? nlohmann::json{c.name, c.integer}
                                                           : nlohmann::json{c.name, c.real});  // finite (null if not)
  }
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
  if (!r.metrics.empty()) {  // only when present: other kinds' lines stay as they were
    auto& metrics = j["metrics"] = nlohmann::json::array();
    for (const auto& m : r.metrics) metrics.push_back({m.name, num(m.value)});
  }
  if (!r.data.empty()) j["data"] = r.data;
  if (!r.side_data.empty()) j["side_data"] = r.side_data;
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
    if (j.contains("columns"))
      for (const auto& c : j.at("columns")) {
        std::string name = c.at(0).get<std::string>();
        const auto& v = c.at(1);
        if (v.is_number_integer()) r.columns.push_back(UnitColumn::of_integer(std::move(name), v.get<int64_t>()));
        else if (v.is_number()) r.columns.push_back(UnitColumn::of_real(std::move(name), v.get<double>()));
        else if (v.is_null()) r.columns.push_back(UnitColumn::of_real(std::move(name), std::numeric_limits<double>::quiet_NaN()));
        else r.columns.push_back(UnitColumn::of_text(std::move(name), v.get<std::string>()));
      }
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
    if (j.contains("metrics"))
      for (const auto& m : j.at("metrics")) r.metrics.push_back({m.at(0).get<std::string>(), get_num(m.at(1))});
    if (j.contains("data")) r.data = j.at("data").get<std::string>();
    if (j.contains("side_data")) r.side_data = j.at("side_data").get<std::string>();
    return r;
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(std::string("malformed unit result: ") + e.what());
  }
}

}  // namespace mapfuse
