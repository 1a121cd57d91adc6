#include "results/report.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <algorithm>
#include <map>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <tuple>

#include "engine/common/embedded.hpp"
#include "results/get_report.hpp"

namespace mapfuse {

std::span<const EmbeddedFile> embedded_report_scripts();

bool parse_layer_label(const std::string& label, LayerLabel& out) {
  static const std::regex re(R"(^([^/]+)/(.+) @ (\S+)(?: seed (\d+))?$)");
  std::smatch m;
  if (!std::regex_match(label, m, re)) return false;
  out.workload = m[1].str();
  out.arch = m[3].str();
  out.seed = m[4].str();
  out.layers.clear();
  const std::string layer = m[2].str();
  if (layer.size() > 2 && layer.front() == '{' && layer.back() == '}' && layer.find(',') != std::string::npos) {
    std::stringstream names(layer.substr(1, layer.size() - 2));
    for (std::string n; std::getline(names, n, ',');) out.layers.push_back(n);
  } else {
    out.layers.push_back(layer);
  }
  return true;
}

bool parse_network_label(const std::string& label, NetworkLabel& out) {
  static const std::regex re(R"(^([^/ ]+) @ (\S+) (\S+) seed (\d+)$)");
  std::smatch m;
  if (!std::regex_match(label, m, re)) return false;
  out = {m[1].str(), m[2].str(), m[3].str(), m[4].str()};
  return true;
}

std::vector<OptimizerCell> optimizer_table(const StudyFile& s) {
  // (workload, arch) -> method -> log-EDP sum and count
  std::map<std::pair<std::string, std::string>, std::map<std::string, std::pair<double, int>>> acc;
  for (const UnitResult& r : s.results) {
    NetworkLabel l;
    if (r.kind != "optimize_network" || r.status != UnitResult::Status::Done || !(r.edp > 0) || !parse_network_label(r.label, l))
      continue;
    auto& cell = acc[{l.workload, l.arch}][l.method];
    cell.first += std::log(r.edp);
    cell.second += 1;
  }
  std::vector<OptimizerCell> out;
  for (const auto& [key, methods] : acc) {
    const auto fadiff = methods.find("fadiff");
    const double ref = fadiff == methods.end() ? 0 : std::exp(fadiff->second.first / fadiff->second.second);
    for (const std::string m : {"dosa", "bo", "ga", "fadiff"}) {  // the paper's column order
      const auto it = methods.find(m);
      if (it == methods.end()) continue;
      const double g = std::exp(it->second.first / it->second.second);
      out.push_back({key.first, key.second, m, it->second.second, g, ref > 0 ? g / ref : 0});
    }
  }
  return out;
}

std::vector<FusedMapperRow> fused_mapper_table(const StudyFile& s) {
  static const std::regex join_label(R"(^(\S+) @ (\S+) ffm$)");
  static const std::regex header(
      R"(^ffm: generation (\S+) s over \d+ units, join (\S+) s, \d+ pmappings kept, front of \d+ points, objective (\w+))");
  std::map<std::pair<std::string, std::string>, FusedMapperRow> optimum;
  for (const UnitResult& r : s.results) {
    std::smatch m, h;
    if (r.kind != "ffm_join" || r.status != UnitResult::Status::Done || !std::regex_match(r.label, m, join_label)) continue;
    FusedMapperRow row{m[1].str(), m[2].str(), "ffm", 1, r.energy_pj, r.cycles, r.edp, r.pareto.size()};
    if (std::regex_search(r.best_mapping, h, header)) {
      row.generation_s = std::stod(h[1].str());
      row.join_s = std::stod(h[2].str());
      row.objective = h[3].str();
    }
    optimum[{row.workload, row.arch}] = row;
  }
  auto value = [](const std::string& objective, double e, double c) {
    return objective == "energy" ? e : objective == "cycles" ? c : e * c;
  };
  std::map<std::tuple<std::string, std::string, std::string>, std::vector<double>> gaps;
  for (const UnitResult& r : s.results) {
    NetworkLabel l;
    if (r.kind != "ffm_baseline" || r.status != UnitResult::Status::Done || !parse_network_label(r.label, l)) continue;
    const auto it = optimum.find({l.workload, l.arch});
    if (it == optimum.end()) continue;
    const FusedMapperRow& o = it->second;
    const double best = value(o.objective, o.energy_pj, o.cycles);
    gaps[{l.workload, l.arch, l.method}].push_back(100 * (value(o.objective, r.energy_pj, r.cycles) / best - 1));
  }
  std::vector<FusedMapperRow> out;
  for (const auto& [key, o] : optimum) {
    out.push_back(o);
    for (const std::string m : {"ffm_sa", "ffm_ga", "ffm_random"}) {
      const auto it = gaps.find({key.first, key.second, m});
      if (it == gaps.end()) continue;
      FusedMapperRow b{key.first, key.second, m, static_cast<int>(it->second.size())};
      b.objective = o.objective;
      double sum = 0;
      b.gap_min = *std::min_element(it->second.begin(), it->second.end());
      b.gap_max = *std::max_element(it->second.begin(), it->second.end());
      for (double g : it->second) sum += g;
      b.gap_mean = sum / static_cast<double>(it->second.size());
      out.push_back(b);
    }
  }
  return out;
}

std::vector<NetworkTotal> network_totals(const StudyFile& s) {
  std::map<std::tuple<std::string, std::string, std::string>, NetworkTotal> t;
  for (const UnitResult& r : s.results) {
    LayerLabel l;
    if (r.kind != "map_layer" || r.status != UnitResult::Status::Done || !parse_layer_label(r.label, l)) continue;
    NetworkTotal& x = t[{l.workload, l.arch, l.seed}];
    x.workload = l.workload;
    x.arch = l.arch;
    x.seed = l.seed;
    const double n = static_cast<double>(l.layers.size());
    x.energy_pj += n * r.energy_pj;
    x.cycles += n * r.cycles;
    x.layers += static_cast<int>(l.layers.size());
  }
  std::vector<NetworkTotal> out;
  for (auto& [k, v] : t) out.push_back(v);
  return out;
}

namespace {

std::string csv_field(const std::string& v) {
  if (v.find_first_of(",\"\n") == std::string::npos) return v;
  std::string out = "\"";
  for (char c : v) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

struct SweepRow {
  const SweepPointInfo* point;
  NetworkTotal total;
  bool complete = false, best = false;
};

// Network totals of the sweep points, grouped by (sweep, workload, seed) in the points' order.
std::vector<std::vector<SweepRow>> sweep_rows(const StudyFile& s, const std::vector<SweepPointInfo>& sweep) {
  const std::vector<NetworkTotal> totals = network_totals(s);
  std::map<std::tuple<std::string, std::string, std::string>, std::vector<SweepRow>> groups;
  std::vector<std::tuple<std::string, std::string, std::string>> order;
  for (const SweepPointInfo& p : sweep)
    for (const NetworkTotal& t : totals)
      if (t.arch == p.arch) {
        const auto key = std::make_tuple(p.family, t.workload, t.seed);
        if (!groups.count(key)) order.push_back(key);
        groups[key].push_back({&p, t});
      }
  std::vector<std::vector<SweepRow>> out;
  for (const auto& key : order) {
    std::vector<SweepRow>& rows = groups[key];
    int most = 0;
    for (const SweepRow& r : rows) most = std::max(most, r.total.layers);
    SweepRow* best = nullptr;
    for (SweepRow& r : rows) {
      r.complete = r.total.layers == most;
      if (r.complete && (!best || r.total.edp() < best->total.edp())) best = &r;
    }
    if (best) best->best = true;
    out.push_back(std::move(rows));
  }
  return out;
}

std::string params_text(const SweepPointInfo& p, const char* sep) {
  std::string out;
  for (const auto& [k, v] : p.params) out += fmt::format("{}{}={}", out.empty() ? "" : sep, k, v);
  return out;
}

}  // namespace

std::string sweep_csv(const StudyFile& s, const std::vector<SweepPointInfo>& sweep) {
  std::string out = "family,workload,seed,arch,params,layers,complete,best,energy_pj,cycles,edp\n";
  for (const auto& rows : sweep_rows(s, sweep))
    for (const SweepRow& r : rows)
      out += fmt::format("{},{},{},{},{},{},{},{},{},{},{}\n", csv_field(r.point->family), csv_field(r.total.workload), r.total.seed,
                         csv_field(r.point->arch), csv_field(params_text(*r.point, ";")), r.total.layers, r.complete ? 1 : 0,
                         r.best ? 1 : 0, r.total.energy_pj, r.total.cycles, r.total.edp());
  return out;
}

std::string report_markdown(const StudyFile& s, const std::vector<SweepPointInfo>& sweep) {
  std::string out = fmt::format("# Study {}\n\n{} units; mapfuse {}; {} rank(s); {} to {}\n\n", s.meta.name, s.results.size(),
                                s.meta.mapfuse_version, s.meta.ranks, s.meta.start_time, s.meta.end_time);
  const auto groups = sweep_rows(s, sweep);
  if (!groups.empty()) {
    out += "## Best architecture point per network (lowest network EDP)\n\n"
           "| sweep | workload | seed | best point | parameters | layers | energy_pj | cycles | EDP | points |\n"
           "|---|---|---|---|---|---|---|---|---|---|\n";
    for (const auto& rows : groups) {
      int complete = 0;
      for (const SweepRow& r : rows) complete += r.complete;
      for (const SweepRow& r : rows)
        if (r.best)
          out += fmt::format("| {} | {} | {} | {} | {} | {} | {:.6g} | {:.6g} | {:.6g} | {} |\n", r.point->family, r.total.workload,
                             r.total.seed.empty() ? "-" : r.total.seed, r.point->arch, params_text(*r.point, ", "), r.total.layers,
                             r.total.energy_pj, r.total.cycles, r.total.edp(), complete);
    }
    out += "\n";
  }
  const auto cells = optimizer_table(s);
  if (!cells.empty()) {
    out += "## Network optimizers (exact EDP, geometric mean over seeds; ratio = method / FADiff)\n\n"
           "| workload | architecture | method | seeds | EDP | ratio to FADiff |\n|---|---|---|---|---|---|\n";
    for (const OptimizerCell& c : cells)
      out += fmt::format("| {} | {} | {} | {} | {:.4g} | {} |\n", c.workload, c.arch, c.method, c.seeds, c.edp_geomean,
                         c.ratio_to_fadiff > 0 ? fmt::format("{:.2f}x", c.ratio_to_fadiff) : std::string("-"));
    out += "\n";
  }
  const auto fused = fused_mapper_table(s);
  if (!fused.empty()) {
    out += "## Fused mappers (FFM's optimum; baselines: percent above it on the objective, over seeds)\n\n"
           "| workload | architecture | method | seeds | energy_pj | cycles | EDP | front | generation s | join s | "
           "above optimum: mean | min | max |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
    for (const FusedMapperRow& r : fused)
      out += r.method == "ffm"
                 ? fmt::format("| {} | {} | ffm ({}) | - | {:.6g} | {:.6g} | {:.6g} | {} | {:.3f} | {:.3f} | 0 % | | |\n",
                               r.workload, r.arch, r.objective, r.energy_pj, r.cycles, r.edp, r.front, r.generation_s, r.join_s)
                 : fmt::format("| {} | {} | {} | {} | | | | | | | {:.1f} % | {:.1f} % | {:.1f} % |\n", r.workload, r.arch,
                               r.method, r.seeds, r.gap_mean, r.gap_min, r.gap_max);
    out += "\n";
  }
  const auto totals = network_totals(s);
  if (!totals.empty()) {
    out += "## Networks (sums over layers)\n\n| workload | architecture | seed | layers | energy_pj | cycles | EDP |\n|---|---|---|---|---|---|---|\n";
    for (const NetworkTotal& t : totals)
      out += fmt::format("| {} | {} | {} | {} | {:.6g} | {:.6g} | {:.6g} |\n", t.workload, t.arch, t.seed.empty() ? "-" : t.seed,
                         t.layers, t.energy_pj, t.cycles, t.edp());
    out += "\n";
  }
  // A GET-fusion study holds get_partition units only: its own tables and unit list.
  if (const std::string get = get_report_markdown(s); !get.empty()) return out + get;
  out += "## Units\n\n| unit | status | energy_pj | cycles | EDP | rank | seconds |\n|---|---|---|---|---|---|---|\n";
  std::vector<const UnitResult*> rows;
  for (const auto& r : s.results) rows.push_back(&r);
  std::sort(rows.begin(), rows.end(), [](auto* a, auto* b) { return a->label < b->label; });
  for (const UnitResult* r : rows)
    out += r->status == UnitResult::Status::Done
               ? fmt::format("| {} | done | {:.6g} | {:.6g} | {:.6g} | {} | {:.3f} |\n", r->label, r->energy_pj, r->cycles, r->edp,
                             r->rank, r->wall_seconds)
               : fmt::format("| {} | failed: {} | | | | {} | {:.3f} |\n", r->label, r->message, r->rank, r->wall_seconds);
  return out;
}

std::string report_csv(const StudyFile& s) {
  std::string out = "id,kind,label,status,message,rank,wall_seconds,energy_pj,cycles,edp,best_mapping\n";
  for (const UnitResult& r : s.results)
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},{}\n", r.unit_id, r.kind, csv_field(r.label),
                       r.status == UnitResult::Status::Done ? "done" : "failed", csv_field(r.message), r.rank, r.wall_seconds,
                       r.energy_pj, r.cycles, r.edp, csv_field(r.best_mapping));
  return out;
}

std::vector<std::string> write_plots(const std::string& h5_path, const std::string& dir, const std::string& sweep_csv_text) {
  const auto scripts = embedded_report_scripts();
  if (scripts.empty()) throw std::runtime_error("the plotting script is not compiled in");
  std::filesystem::create_directories(dir);
  const std::string script = (std::filesystem::path(dir) / ".mapfuse_plots.py").string();
  { std::ofstream(script) << scripts[0].text; }
  std::string sweep_file;
  if (sweep_csv_text.find('\n') + 1 < sweep_csv_text.size()) {  // a header and at least one row
    sweep_file = (std::filesystem::path(dir) / "sweep_networks.csv").string();
    std::ofstream(sweep_file) << sweep_csv_text;
  }
  auto quote = [](const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
  };
  const std::string cmd = "/usr/bin/python3 " + quote(script) + " " + quote(h5_path) + " " + quote(dir) +
                          (sweep_file.empty() ? "" : " " + quote(sweep_file)) + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) throw std::runtime_error("cannot run /usr/bin/python3");
  std::string output;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) output.append(buf, n);
  const int rc = pclose(p);
  std::filesystem::remove(script);
  if (rc != 0) throw std::runtime_error("plotting failed (/usr/bin/python3 with h5py and matplotlib):\n" + output);
  std::vector<std::string> files;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);)
    if (line.size() > 4 && line.ends_with(".png")) files.push_back(line);
  return files;
}

}  // namespace mapfuse
