#include "partitioners/study.hpp"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/common/error.hpp"
#include "engine/common/toml_reader.hpp"

namespace mapfuse {

Study parse_study(const std::string& text, const std::string& file) {
  toml::table doc = parse_toml(text, file);
  TomlReader r(doc, file);
  Study s;
  s.file = file;
  s.toml_text = text;
  s.name = r.str("name");
  const std::filesystem::path base = std::filesystem::path(file).parent_path();
  for (TomlReader w : r.tables("workload")) {
    StudyWorkload sw;
    sw.spec = w.str("spec");
    sw.layers = w.str_list("layers");
    sw.batch = w.opt_integer("batch").value_or(1);
    sw.tokens = w.opt_integer("tokens").value_or(8192);
    if (sw.batch <= 0) w.fail("batch", "must be positive");
    if (sw.tokens <= 0) w.fail("tokens", "must be positive");
    w.finish();
    s.workloads.push_back(std::move(sw));
  }
  for (TomlReader a : r.tables("architecture")) {
    StudyArchitecture sa;
    sa.spec = a.str("spec");
    if (auto c = a.opt_str("constraints")) sa.constraints = std::filesystem::path(*c).is_absolute() ? *c : (base / *c).string();
    // A preset name stays a name; a relative path is taken relative to the study.
    if (sa.spec.find('/') != std::string::npos || sa.spec.ends_with(".toml"))
      if (!std::filesystem::path(sa.spec).is_absolute()) sa.spec = (base / sa.spec).string();
    a.finish();
    s.architectures.push_back(std::move(sa));
  }
  if (s.workloads.empty()) r.fail("workload", "the study has no [[workload]]: nothing to run");
  if (s.architectures.empty()) r.fail("architecture", "the study has no [[architecture]]: nothing to run");
  if (auto m = r.opt_table("method")) {
    s.method.name = m->opt_str("name").value_or("random");
    if (s.method.name != "random" && s.method.name != "exhaustive")
      m->fail("name", "unknown method '" + s.method.name + "'; expected random or exhaustive" +
                          did_you_mean(s.method.name, {"random", "exhaustive"}));
    s.method.objective = m->opt_str("objective").value_or("edp");
    if (s.method.objective != "edp" && s.method.objective != "energy" && s.method.objective != "cycles")
      m->fail("objective", "unknown objective '" + s.method.objective + "'; expected energy, cycles or edp" +
                               did_you_mean(s.method.objective, {"edp", "energy", "cycles"}));
    s.method.budget = m->opt_integer("budget").value_or(20000);
    if (s.method.budget <= 0) m->fail("budget", "must be positive");
    s.method.max_mappings = m->opt_integer("max_mappings").value_or(200'000'000);
    if (m->has("seeds")) {
      s.method.seeds.clear();
      const toml::array* arr = doc["method"]["seeds"].as_array();
      if (!arr) m->fail("seeds", "expected an array of non-negative integers");
      for (const auto& v : *arr) {
        if (!v.is_integer() || *v.value<int64_t>() < 0) m->fail("seeds", "expected an array of non-negative integers");
        s.method.seeds.push_back(static_cast<uint64_t>(*v.value<int64_t>()));
      }
      m->finish({"seeds"});
      if (s.method.seeds.empty()) m->fail("seeds", "empty: the study would run nothing");
    } else {
      m->finish();
    }
  }
  r.finish();
  return s;
}

Study load_study(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError({path, 0, 0}, {}, "cannot open file for reading");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_study(ss.str(), path);
}

std::vector<WorkUnit> partition_study(const Study& s, LayerLister layers_of) {
  std::vector<WorkUnit> units;
  for (const StudyArchitecture& a : s.architectures)
    for (const StudyWorkload& w : s.workloads)
      for (const std::string& layer : w.layers.empty() ? layers_of(w) : w.layers)
        for (uint64_t seed : s.method.name == "random" ? s.method.seeds : std::vector<uint64_t>{0}) {
          nlohmann::json p = {{"arch", a.spec},          {"constraints", a.constraints},
                              {"workload", w.spec},      {"batch", w.batch},
                              {"tokens", w.tokens},      {"layer", layer},
                              {"method", s.method.name}, {"objective", s.method.objective},
                              {"budget", s.method.budget}, {"seed", seed},
                              {"max_mappings", s.method.max_mappings}};
          WorkUnit u;
          u.kind = "map_layer";
          u.payload = p.dump();
          u.id = stable_id(u.kind + "\n" + u.payload);
          u.label = w.spec + "/" + layer + " @ " + std::filesystem::path(a.spec).stem().string() +
                    (s.method.name == "random" ? " seed " + std::to_string(seed) : "");
          u.cost_hint = s.method.name == "random" ? static_cast<double>(s.method.budget) : 1.0;
          units.push_back(std::move(u));
        }
  return units;
}

}  // namespace mapfuse
