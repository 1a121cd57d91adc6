// `mapfuse eval`: the cost of one given mapping of one Einsum on one core, with its breakdown.
#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/commands.hpp"
#include "engine/arch/arch_toml.hpp"
#include "engine/common/error.hpp"
#include "engine/cost/model.hpp"
#include "engine/mapping/mapping.hpp"
#include "engine/workload/load.hpp"

namespace mapfuse::cli {
namespace {

struct EvalOptions {
  std::string arch = "gemmini_default";
  std::string workload;
  std::string layer;
  std::string mapping, dosa_mapping, mapping_file;
  ZooParams zoo;
  bool json = false;
};

const Einsum& pick_layer(const Workload& w, const std::string& layer) {
  if (layer.empty()) {
    if (w.einsums.size() == 1) return w.einsums[0];
    std::vector<std::string> names;
    for (const auto& e : w.einsums) names.push_back(e.name);
    throw InputError({}, "--layer",
                     fmt::format("workload '{}' has {} Einsums; choose one with --layer (name or "
                                 "index), e.g. {}",
                                 w.name, w.einsums.size(), names.front()));
  }
  if (int i = w.einsum_index(layer); i >= 0) return w.einsums[i];
  if (!layer.empty() && std::all_of(layer.begin(), layer.end(), ::isdigit)) {
    const size_t i = std::stoul(layer);
    if (i < w.einsums.size()) return w.einsums[i];
  }
  std::vector<std::string> names;
  for (const auto& e : w.einsums) names.push_back(e.name);
  throw InputError({}, "--layer",
                   "no Einsum '" + layer + "' in workload '" + w.name + "'" + did_you_mean(layer, names));
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError({path, 0, 0}, {}, "cannot open file for reading");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string human(double v) { return fmt::format("{:.6g}", v); }

nlohmann::json to_json(const Einsum& e, const Core& c, const Mapping& m, const CostResult& r) {
  nlohmann::json j;
  j["einsum"] = e.name;
  j["core"] = c.name;
  j["mapping"] = to_text(m, e, c);
  j["valid"] = r.valid();
  if (!r.valid()) {
    j["invalid_reason"] = std::string(to_string(r.invalid));
    if (r.invalid_level >= 0) j["invalid_level"] = c.levels[r.invalid_level].name;
  }
  j["energy_pj"] = r.energy_pj;
  j["cycles"] = r.cycles;
  j["edp_pj_cycles"] = r.edp();
  j["operations"] = r.operations;
  j["utilization"] = r.utilization;
  j["compute"] = {{"energy_pj", r.compute_energy_pj}, {"cycles", r.compute_cycles}};
  nlohmann::json levels = nlohmann::json::array();
  for (int l = static_cast<int>(c.levels.size()) - 1; l >= 0; --l) {
    nlohmann::json lv;
    lv["name"] = c.levels[l].name;
    lv["index"] = l;
    lv["instances_used"] = r.level_instances[l];
    lv["occupancy_words"] = r.level_occupancy[l];
    lv["capacity_words"] = c.levels[l].entries;
    lv["energy_pj"] = r.level_energy_pj[l];
    lv["cycles"] = r.level_cycles[l];
    int64_t reads = 0, fills = 0, updates = 0;
    nlohmann::json tensors = nlohmann::json::object();
    for (size_t t = 0; t < e.tensors.size(); ++t) {
      const TensorAccesses& a = r.access[l][t];
      if (!(m.levels[l].keep & (1u << t))) continue;
      tensors[e.tensors[t].name] = {{"tile_words", a.tile}, {"reads", a.reads}, {"fills", a.fills},
                                    {"updates", a.updates}};
      reads += a.reads;
      fills += a.fills;
      updates += a.updates;
    }
    lv["accesses"] = {{"reads", reads}, {"fills", fills}, {"updates", updates},
                      {"total", reads + fills + updates}};
    lv["tensors"] = tensors;
    levels.push_back(lv);
  }
  j["levels"] = levels;
  return j;
}

void print_human(const Einsum& e, const Core& c, const Mapping& m, const CostResult& r) {
  fmt::print("Einsum {} ({:.6g} operations) on core {}\n", e.name, static_cast<double>(r.operations), c.name);
  fmt::print("mapping  {}\n", to_text(m, e, c));
  if (!r.valid())
    fmt::print("INVALID  {}{}\n", to_string(r.invalid),
               r.invalid_level >= 0
                   ? fmt::format(" at {} ({} words held, {} available)", c.levels[r.invalid_level].name,
                                 r.level_occupancy[r.invalid_level], c.levels[r.invalid_level].entries)
                   : "");
  int bound = -1;
  for (size_t l = 0; l < c.levels.size(); ++l)
    if (r.level_cycles[l] >= r.cycles && r.level_cycles[l] > r.compute_cycles) bound = static_cast<int>(l);
  fmt::print("energy   {} pJ   cycles {} ({})   EDP {} pJ*cycles   utilization {:.1f}%\n", human(r.energy_pj),
             human(r.cycles), bound < 0 ? "compute-bound" : c.levels[bound].name + "-bound",
             human(r.edp()), 100 * r.utilization);
  fmt::print("compute  {} pJ  {} cycles\n\n", human(r.compute_energy_pj), human(r.compute_cycles));
  fmt::print("{:<14} {:<10} {:>12} {:>14} {:>14} {:>14} {:>14} {:>12}\n", "level", "tensor", "tile",
             "reads", "fills", "updates", "energy_pj", "cycles");
  for (int l = static_cast<int>(c.levels.size()) - 1; l >= 0; --l) {
    bool first = true;
    for (size_t t = 0; t < e.tensors.size(); ++t) {
      if (!(m.levels[l].keep & (1u << t))) continue;
      const TensorAccesses& a = r.access[l][t];
      fmt::print("{:<14} {:<10} {:>12} {:>14} {:>14} {:>14} {:>14} {:>12}\n", first ? c.levels[l].name : "",
                 e.tensors[t].name, a.tile, a.reads, a.fills, a.updates,
                 first ? human(r.level_energy_pj[l]) : "", first ? human(r.level_cycles[l]) : "");
      first = false;
    }
    if (first)
      fmt::print("{:<14} {:<10} {:>12} {:>14} {:>14} {:>14} {:>14} {:>12}\n", c.levels[l].name, "-", "",
                 "", "", "", human(r.level_energy_pj[l]), human(r.level_cycles[l]));
  }
}

}  // namespace

Command add_eval_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("eval", "Cost of one mapping of one Einsum on one architecture");
  auto o = std::make_shared<EvalOptions>();
  cmd->add_option("--arch", o->arch, "architecture preset or TOML file")->capture_default_str();
  cmd->add_option("--workload", o->workload, "zoo name or workload file")->required();
  cmd->add_option("--layer", o->layer, "Einsum name or index (needed when the workload has several)");
  auto* mt = cmd->add_option("--mapping", o->mapping,
                             "mapping text, outermost level first: 'DRAM[A,B,Z] M=4 | Buffer[B,Z] K=2@x'");
  auto* md = cmd->add_option("--dosa-mapping", o->dosa_mapping,
                             "DOSA mapping string: 'L3[WIO] P28 ... - L2[WI] K4X - ...'");
  auto* mf = cmd->add_option("--mapping-file", o->mapping_file, "file holding a mapping text");
  mt->excludes(md)->excludes(mf);
  md->excludes(mf);
  cmd->add_option("--batch", o->zoo.batch, "batch size for zoo networks")->check(CLI::PositiveNumber);
  cmd->add_option("--tokens", o->zoo.tokens, "sequence length for gpt3_6.7b")->check(CLI::PositiveNumber);
  cmd->add_flag("--json", o->json, "print a JSON object instead of tables");
  return {cmd, [o]() {
            const Architecture arch = load_architecture(o->arch);
            const Core& core = arch.cores.at(0);
            const Workload w = load_workload(o->workload, o->zoo);
            const Einsum& e = pick_layer(w, o->layer);
            Mapping m;
            if (!o->dosa_mapping.empty()) m = parse_dosa_mapping(o->dosa_mapping, e, core);
            else if (!o->mapping.empty()) m = parse_mapping(o->mapping, e, core);
            else if (!o->mapping_file.empty()) m = parse_mapping(read_text(o->mapping_file), e, core);
            else
              throw InputError({}, "--mapping",
                               "no mapping given; pass --mapping, --dosa-mapping or --mapping-file");
            if (auto err = check_structure(m, e, core))
              throw InputError({}, "mapping", err->message);
            const CostResult r = evaluate(compile_plan(e, core), flatten(m));
            if (o->json) std::cout << to_json(e, core, m, r).dump(2) << '\n';
            else print_human(e, core, m, r);
            return r.valid() ? 0 : 1;
          }};
}

}  // namespace mapfuse::cli
