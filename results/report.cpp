#include "results/report.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <tuple>

#include "engine/common/embedded.hpp"

namespace mapfuse {

std::span<const EmbeddedFile> embedded_report_scripts();

namespace {

struct Totals {
  double energy = 0, cycles = 0;
  int layers = 0;
};

// map_layer labels: "<workload>/<layer> @ <arch>[ seed <s>]" (partitioners/study.cpp).
std::map<std::tuple<std::string, std::string, std::string>, Totals> network_totals(const StudyFile& s) {
  static const std::regex label(R"(^([^/]+)/(.+) @ (\S+)(?: seed (\d+))?$)");
  std::map<std::tuple<std::string, std::string, std::string>, Totals> t;
  for (const UnitResult& r : s.results) {
    std::smatch m;
    if (r.kind != "map_layer" || r.status != UnitResult::Status::Done || !std::regex_match(r.label, m, label)) continue;
    Totals& x = t[{m[1].str(), m[3].str(), m[4].str()}];
    x.energy += r.energy_pj;
    x.cycles += r.cycles;
    ++x.layers;
  }
  return t;
}

std::string csv_field(const std::string& v) {
  if (v.find_first_of(",\"\n") == std::string::npos) return v;
  std::string out = "\"";
  for (char c : v) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

}  // namespace

std::string report_markdown(const StudyFile& s) {
  std::string out = fmt::format("# Study {}\n\n{} units; mapfuse {}; {} rank(s); {} to {}\n\n", s.meta.name, s.results.size(),
                                s.meta.mapfuse_version, s.meta.ranks, s.meta.start_time, s.meta.end_time);
  const auto totals = network_totals(s);
  if (!totals.empty()) {
    out += "## Networks (sums over layers)\n\n| workload | architecture | seed | layers | energy_pj | cycles | EDP |\n|---|---|---|---|---|---|---|\n";
    for (const auto& [k, v] : totals)
      out += fmt::format("| {} | {} | {} | {} | {:.6g} | {:.6g} | {:.6g} |\n", std::get<0>(k), std::get<1>(k),
                         std::get<2>(k).empty() ? "-" : std::get<2>(k), v.layers, v.energy, v.cycles, v.energy * v.cycles);
    out += "\n";
  }
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

std::vector<std::string> write_plots(const std::string& h5_path, const std::string& dir) {
  const auto scripts = embedded_report_scripts();
  if (scripts.empty()) throw std::runtime_error("the plotting script is not compiled in");
  std::filesystem::create_directories(dir);
  const std::string script = (std::filesystem::path(dir) / ".mapfuse_plots.py").string();
  { std::ofstream(script) << scripts[0].text; }
  auto quote = [](const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
  };
  const std::string cmd = "/usr/bin/python3 " + quote(script) + " " + quote(h5_path) + " " + quote(dir) + " 2>&1";
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
