#include "results/report.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <algorithm>
#include <map>
#include <regex>
#include <set>
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

std::string column_text(const UnitResult& r, const char* name) {
  const UnitColumn* c = find_column(r.columns, name);
  return c && c->type == UnitColumn::Type::Text ? c->text : std::string();
}

// Methods in the headline: the layer mapper first, then the others from layer-wise to fused; a
// method's "_unfused" row just before it.
int method_rank(const std::string& m) {
  static const char* const order[] = {"exhaustive", "random", "dosa", "bo", "ga", "fadiff", "ffm_random", "ffm_sa", "ffm_ga", "ffm"};
  const bool unfused = m.ends_with("_unfused");
  const std::string base = unfused ? m.substr(0, m.size() - 8) : m;
  for (int i = 0; i < static_cast<int>(std::size(order)); ++i)
    if (base == order[i]) return 2 * i + (unfused ? 0 : 1);
  return 2 * static_cast<int>(std::size(order));
}

double column_real(const UnitResult& r, const char* name) {
  const UnitColumn* c = find_column(r.columns, name);
  return c && c->type == UnitColumn::Type::Real ? c->real : 0;
}

// The headline stays short: a long list of groups (FADiff on MobileNetV2: 13 chains, 1,200
// characters) becomes its count, the Einsums in them and the first group; the CSV has them all.
std::string groups_summary(const std::string& groups) {
  if (groups.size() <= 120) return groups;
  size_t n = 1, einsums = 1;
  for (char c : groups) n += c == ';', einsums += c == ';' || c == '+';
  const std::string first = groups.substr(0, groups.find(';'));
  return fmt::format("{} groups of {} Einsums: {}; ... (all: --csv, fused_groups)", n, einsums, first);
}

}  // namespace

std::vector<HeadlineRow> headline_table(const StudyFile& s) {
  // (workload, arch, method) -> best run
  std::map<std::tuple<std::string, std::string, std::string>, HeadlineRow> best;
  auto offer = [&](HeadlineRow row) {
    HeadlineRow& b = best[{row.workload, row.arch, row.method}];
    const int runs = b.runs + 1;
    if (b.runs == 0 || row.edp < b.edp) b = std::move(row);
    b.runs = runs;
  };
  // Layer by layer: one network total per (workload, arch, seed); its method from the units.
  std::map<std::string, std::string> layer_method;  // workload|arch -> method
  for (const UnitResult& r : s.results)
    if (r.kind == "map_layer") {
      LayerLabel l;
      if (!parse_layer_label(r.label, l)) continue;
      const std::string m = column_text(r, "method");
      layer_method[l.workload + "|" + l.arch] = m.empty() ? "layer mapper" : m;
    }
  // A network total counts only when every layer mapped (the most layers of its workload).
  const std::vector<NetworkTotal> totals = network_totals(s);
  std::map<std::string, int> most;
  for (const NetworkTotal& t : totals) most[t.workload] = std::max(most[t.workload], t.layers);
  std::map<std::pair<std::string, std::string>, std::string> layer_baseline;  // (workload, arch) -> method
  for (const NetworkTotal& t : totals) {
    if (t.layers < most[t.workload]) continue;
    const std::string m = layer_method[t.workload + "|" + t.arch];
    layer_baseline[{t.workload, t.arch}] = m;
    offer({t.workload, t.arch, m, 0, t.energy_pj, t.cycles, t.edp(), t.layers, "per-layer", "", 0, "none (layer by layer)"});
  }
  static const std::regex join_label(R"(^(\S+) @ (\S+) (ffm|ffm_unfused)$)");
  for (const UnitResult& r : s.results) {
    if (r.status != UnitResult::Status::Done || !(r.edp > 0)) continue;
    HeadlineRow row;
    NetworkLabel l;
    std::smatch m;
    if ((r.kind == "optimize_network" || r.kind == "ffm_baseline") && parse_network_label(r.label, l))
      row = {l.workload, l.arch, l.method};
    else if (r.kind == "ffm_join" && std::regex_match(r.label, m, join_label))
      row = {m[1].str(), m[2].str(), m[3].str()};
    else
      continue;
    row.energy_pj = r.energy_pj;
    row.cycles = r.cycles;
    row.edp = r.edp;
    row.model = r.kind == "optimize_network" ? "fadiff-exact" : "ffm-fused";
    if (const UnitColumn* c = find_column(r.columns, "einsums_priced"); c && c->type == UnitColumn::Type::Integer)
      row.einsums = static_cast<int>(c->integer);
    row.fused_groups = column_text(r, "fused_groups");
    row.unfused_energy_pj = column_real(r, "unfused_energy_pj");
    row.unfused_cycles = column_real(r, "unfused_cycles");
    offer(std::move(row));
  }
  // A network optimizer's best run with every edge unfused (same mappings, same model): what its
  // fusion saved, in its own mapspace. Not for a run that fused nothing (DOSA-style never does).
  std::vector<HeadlineRow> unfused_rows;
  for (const auto& [key, row] : best)
    if (row.model == "fadiff-exact" && row.unfused_energy_pj > 0 && row.unfused_cycles > 0 && row.fused_groups != "none")
      unfused_rows.push_back({row.workload, row.arch, row.method + "_unfused", row.runs, row.unfused_energy_pj, row.unfused_cycles,
                              row.unfused_energy_pj * row.unfused_cycles, row.einsums, row.model, "", 0,
                              "none (" + row.method + "'s mappings)"});
  for (HeadlineRow& r : unfused_rows) best[{r.workload, r.arch, r.method}] = std::move(r);
  std::vector<HeadlineRow> out;
  for (auto& [key, row] : best) {
    // Like with like: FFM's family against FFM with fusion off, the rest against the layer mapper
    // (whose model FADiff's exact network model equals when nothing is fused), and only on the
    // same number of Einsums.
    std::string base;
    if (row.model == "ffm-fused") base = "ffm_unfused";
    else if (row.model == "fadiff-exact") base = row.method.ends_with("_unfused") ? row.method : row.method + "_unfused";
    if (!best.count({row.workload, row.arch, base}))  // e.g. a file from before the unfused columns
      if (const auto it = layer_baseline.find({row.workload, row.arch}); it != layer_baseline.end() && row.model != "ffm-fused")
        base = it->second;
    const auto b = best.find({row.workload, row.arch, base});
    if (b != best.end() && b->second.einsums == row.einsums && row.einsums > 0) {
      row.baseline = base;
      row.edp_vs_layerwise = row.edp / b->second.edp;
    }
    out.push_back(row);
  }
  std::stable_sort(out.begin(), out.end(), [](const HeadlineRow& a, const HeadlineRow& b) {
    return std::tuple(a.workload, a.arch, method_rank(a.method), a.method) < std::tuple(b.workload, b.arch, method_rank(b.method), b.method);
  });
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

std::string schedule_units_markdown(const StudyFile& s) {
  std::vector<const UnitResult*> units;
  for (const UnitResult& r : s.results)
    if (r.kind == "schedule") units.push_back(&r);
  if (units.empty()) return "";
  std::sort(units.begin(), units.end(), [](const UnitResult* a, const UnitResult* b) { return a->label < b->label; });
  std::string out = "## Schedules (COALA)\n\n| unit | status | latency (cc) | energy (pJ) | EDP | CTs | transfers | "
                    "peak core memory (bits) | tile-cost keys | tile costs (s) | schedule (s) | search (s) |\n"
                    "|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const UnitResult* r : units) {
    if (r->status != UnitResult::Status::Done) {
      out += fmt::format("| {} | failed: {} | | | | | | | | | | |\n", r->label, r->message);
      continue;
    }
    const double nan = std::numeric_limits<double>::quiet_NaN();
    auto m = [&](const char* k) { return r->metric(k, nan); };
    auto opt = [&](const char* k, const char* f) {
      const double v = m(k);
      return std::isnan(v) ? std::string("-") : fmt::format(fmt::runtime(f), v);
    };
    out += fmt::format("| {} | done | {:.10g} | {:.10g} | {:.6g} | {:.0f} | {:.0f} | {:.0f} | {} | {} | {:.3f} | {} |\n", r->label,
                       r->cycles, r->energy_pj, r->edp, m("cts"), m("transfers"), m("peak_core_memory_bits"),
                       opt("tile_cost_unique_keys", "{:.0f}"), opt("tile_cost_seconds", "{:.2f}"), m("schedule_seconds"),
                       opt("search_seconds", "{:.3f}"));
  }
  return out + "\n";
}

namespace {

// Schedule units of one (workload, architecture, mode, method): its seeds' runs.
struct ScheduleCell {
  std::string workload, arch, mode, method;
  std::vector<const UnitResult*> done;
  size_t runs = 0;
  const UnitResult* best() const {  // least EDP (ties: the first in unit order)
    const UnitResult* b = nullptr;
    for (const UnitResult* r : done)
      if (!b || r->edp < b->edp) b = r;
    return b;
  }
};

std::string stem_of(const std::string& x) {
  const std::filesystem::path p(x);
  return p.has_extension() ? p.stem().string() : x;
}

// Sorted by (workload, architecture, mode, method): the file holds units in id order.
std::vector<ScheduleCell> schedule_cells(const StudyFile& s) {
  std::vector<ScheduleCell> cells;
  std::map<std::tuple<std::string, std::string, std::string, std::string>, size_t> at;
  for (const UnitResult& r : s.results) {
    if (r.kind != "schedule") continue;
    // A study that sweeps cut points names them in the mode: each (stacks, mode) is a point of its own.
    std::string mode = column_text(r, "mode");
    if (const std::string stacks = column_text(r, "stacks"); !stacks.empty() && mode == "fused") mode += " " + stacks;
    const auto key = std::make_tuple(stem_of(column_text(r, "workload")), stem_of(column_text(r, "arch")), mode,
                                     column_text(r, "method"));
    auto [it, fresh] = at.emplace(key, cells.size());
    if (fresh) cells.push_back({std::get<0>(key), std::get<1>(key), std::get<2>(key), std::get<3>(key), {}, 0});
    ScheduleCell& c = cells[it->second];
    ++c.runs;
    if (r.status == UnitResult::Status::Done) c.done.push_back(&r);
  }
  std::sort(cells.begin(), cells.end(), [](const ScheduleCell& a, const ScheduleCell& b) {
    return std::tie(a.workload, a.arch, a.mode, a.method) < std::tie(b.workload, b.arch, b.mode, b.method);
  });
  return cells;
}

double mean_metric(const std::vector<const UnitResult*>& rs, const char* name) {
  double sum = 0;
  size_t n = 0;
  for (const UnitResult* r : rs)
    if (const double v = r->metric(name, std::numeric_limits<double>::quiet_NaN()); !std::isnan(v)) sum += v, ++n;
  return n ? sum / double(n) : std::numeric_limits<double>::quiet_NaN();
}

}  // namespace

std::string schedule_methods_markdown(const StudyFile& s) {
  const std::vector<ScheduleCell> cells = schedule_cells(s);
  // Only worth a table when a group compares methods or a method has several seeds.
  std::map<std::tuple<std::string, std::string, std::string>, int> methods;
  bool seeds = false;
  for (const ScheduleCell& c : cells) ++methods[{c.workload, c.arch, c.mode}], seeds |= c.runs > 1;
  if (!seeds && std::none_of(methods.begin(), methods.end(), [](const auto& kv) { return kv.second > 1; })) return "";
  std::string out =
      "## Allocation methods per workload, architecture and mode\n\n"
      "EDP: the best run's (least over seeds) and the geometric mean over the done runs; latency and energy: the best "
      "run's; search: mean seconds of the allocation search (search_seconds); vs best: best EDP over the group's best.\n\n"
      "| workload | architecture | mode | method | runs | best EDP | geomean EDP | latency (cc) | energy (pJ) | search (s) | "
      "tile costs (s) | vs best |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  std::map<std::tuple<std::string, std::string, std::string>, double> group_best;
  for (const ScheduleCell& c : cells)
    if (const UnitResult* b = c.best()) {
      auto [it, fresh] = group_best.emplace(std::make_tuple(c.workload, c.arch, c.mode), b->edp);
      if (!fresh) it->second = std::min(it->second, b->edp);
    }
  for (const ScheduleCell& c : cells) {
    const UnitResult* b = c.best();
    const std::string runs = fmt::format("{}/{}", c.done.size(), c.runs);
    if (!b) {
      out += fmt::format("| {} | {} | {} | {} | {} | failed | | | | | | |\n", c.workload, c.arch, c.mode, c.method, runs);
      continue;
    }
    double logs = 0;
    for (const UnitResult* r : c.done) logs += std::log(r->edp);
    const double gm = std::exp(logs / double(c.done.size()));
    const double best = group_best.at({c.workload, c.arch, c.mode});
    auto seconds = [&](const char* name, const char* f) {
      const double v = mean_metric(c.done, name);
      return std::isnan(v) ? std::string("-") : fmt::format(fmt::runtime(f), v);
    };
    out += fmt::format("| {} | {} | {} | {} | {} | {:.4g} | {:.4g} | {:.6g} | {:.6g} | {} | {} | {:.3f}x |\n", c.workload,
                       c.arch, c.mode, c.method, runs, b->edp, gm, b->cycles, b->energy_pj, seconds("search_seconds", "{:.3f}"),
                       seconds("tile_cost_seconds", "{:.2f}"), b->edp / best);
  }
  return out + "\n";
}

std::string schedule_arch_markdown(const StudyFile& s) {
  const std::vector<ScheduleCell> cells = schedule_cells(s);
  std::vector<std::string> archs;
  for (const ScheduleCell& c : cells)
    if (std::find(archs.begin(), archs.end(), c.arch) == archs.end()) archs.push_back(c.arch);
  if (archs.size() < 2) return "";
  std::sort(archs.begin(), archs.end());
  // Rows (workload, mode, method), architectures as columns: the EDP heat map as text.
  std::vector<std::tuple<std::string, std::string, std::string>> rows;
  std::map<std::tuple<std::string, std::string, std::string, std::string>, const ScheduleCell*> cell;
  for (const ScheduleCell& c : cells) {
    const auto row = std::make_tuple(c.workload, c.mode, c.method);
    if (std::find(rows.begin(), rows.end(), row) == rows.end()) rows.push_back(row);
    cell[{c.workload, c.mode, c.method, c.arch}] = &c;
  }
  std::string out = "## EDP by architecture (best run per cell; ** the row's least; - not run; x failed)\n\n| workload | mode | method |";
  std::string rule = "|---|---|---|";
  for (const std::string& a : archs) out += " " + a + " |", rule += "---|";
  out += " best architecture | best EDP |\n" + rule + "---|---|\n";
  std::string best_rows = "## Best architecture per workload (least EDP over modes, stacks and methods)\n\n"
                          "| workload | architecture | mode | method | EDP | latency (cc) | energy (pJ) |\n|---|---|---|---|---|---|---|\n";
  std::map<std::string, std::pair<const ScheduleCell*, const UnitResult*>> per_workload;
  std::vector<std::string> workload_order;
  for (const auto& row : rows) {
    const std::string& w = std::get<0>(row);
    const std::string& mode = std::get<1>(row);
    const std::string& method = std::get<2>(row);
    const ScheduleCell* bc = nullptr;
    const UnitResult* br = nullptr;
    for (const std::string& a : archs) {
      const auto it = cell.find(std::make_tuple(w, mode, method, a));
      if (it == cell.end()) continue;
      if (const UnitResult* b = it->second->best(); b && (!br || b->edp < br->edp)) br = b, bc = it->second;
    }
    out += fmt::format("| {} | {} | {} |", w, mode, method);
    for (const std::string& a : archs) {
      const auto it = cell.find(std::make_tuple(w, mode, method, a));
      const UnitResult* b = it == cell.end() ? nullptr : it->second->best();
      if (it == cell.end()) out += " - |";
      else if (!b) out += " x |";
      else out += fmt::format(fmt::runtime(b == br ? " **{:.3g}** |" : " {:.3g} |"), b->edp);
    }
    out += br ? fmt::format(" {} | {:.4g} |\n", bc->arch, br->edp) : std::string(" - | - |\n");
    if (!per_workload.count(w)) workload_order.push_back(w);
    auto& pw = per_workload[w];
    if (br && (!pw.second || br->edp < pw.second->edp)) pw = {bc, br};
  }
  for (const std::string& w : workload_order)
    if (const auto& [c, r] = per_workload.at(w); r != nullptr)
      best_rows += fmt::format("| {} | {} | {} | {} | {:.4g} | {:.6g} | {:.6g} |\n", w, c->arch, c->mode, c->method, r->edp,
                               r->cycles, r->energy_pj);
  return out + "\n" + best_rows + "\n";
}

std::string report_markdown(const StudyFile& s, const std::vector<SweepPointInfo>& sweep, const ReportOptions& options) {
  size_t failed = 0;
  for (const UnitResult& r : s.results) failed += r.status != UnitResult::Status::Done;
  std::string out = fmt::format("# Study {}\n\n{} units ({} failed); {}; {} rank(s); {} to {}\n\n", s.meta.name,
                                s.results.size(), failed, s.meta.mapfuse_version, s.meta.ranks, s.meta.start_time, s.meta.end_time);
  const auto headline = headline_table(s);
  if (!headline.empty()) {
    out += "## Headline: best run per network, architecture and method (lowest network EDP over seeds)\n\n"
           "| workload | architecture | method | runs | Einsums | cost model | energy_pj | cycles | EDP | EDP vs layer by layer | fused groups |\n"
           "|---|---|---|---|---|---|---|---|---|---|---|\n";
    for (const HeadlineRow& r : headline)
      out += fmt::format("| {} | {} | {} | {} | {} | {} | {:.4g} | {:.4g} | {:.4g} | {} | {} |\n", r.workload, r.arch, r.method, r.runs,
                         r.einsums > 0 ? std::to_string(r.einsums) : std::string("-"), r.model, r.energy_pj, r.cycles, r.edp,
                         r.edp_vs_layerwise > 0 ? fmt::format("{:.3f}x ({})", r.edp_vs_layerwise, r.baseline) : std::string("-"),
                         r.fused_groups.empty() ? "-" : groups_summary(r.fused_groups));
    const bool ratios = std::any_of(headline.begin(), headline.end(), [](const HeadlineRow& r) { return r.edp_vs_layerwise > 0; });
    if (ratios && headline.size() > 1)
      out += "\nEach ratio divides by the unfused run (in brackets) that prices the same Einsums with the same cost model. "
             "per-layer: each MAC layer's optimum on the single-Einsum model, summed. ffm-fused: FFM's fused model of every "
             "Einsum (additions and pooling too), against ffm_unfused, FFM's exact optimum with every Einsum alone (same "
             "mapspace). fadiff-exact: FADiff's exact network model of the MAC layers (with nothing fused, the single-Einsum "
             "model summed), against <method>_unfused, the same run's mappings with every edge unfused; FADiff searches its "
             "own encoding of the mapspace, without the study's constraint file. Rows on different Einsums, models or "
             "mapspaces are not ratios of each other.\n";
    out += "\n";
  }
  if (!options.csv_hint.empty()) out += options.csv_hint + "\n\n";
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
  // A schedule study holds schedule units only: their totals (each schedule's own tables follow,
  // from /schedules: schedule_report_markdown).
  if (const std::string sch = schedule_units_markdown(s); !sch.empty())
    return out + schedule_methods_markdown(s) + schedule_arch_markdown(s) + sch;
  if (!options.units) return out;
  out += "## Units\n\n| unit | status | energy_pj | cycles | EDP | rank | seconds |\n|---|---|---|---|---|---|---|\n";
  // Grouped by kind, workload and architecture, layers in network order.
  auto position = [&](const UnitResult& r) -> size_t {
    LayerLabel l;
    if (!parse_layer_label(r.label, l)) return 0;
    for (const auto& [w, names] : options.layer_order)
      if (w == l.workload) {
        const auto it = std::find(names.begin(), names.end(), l.layers.front());
        return static_cast<size_t>(it - names.begin());
      }
    return 0;
  };
  auto key = [&](const UnitResult* r) {
    LayerLabel l;
    NetworkLabel n;
    std::string workload, arch;
    if (parse_layer_label(r->label, l)) workload = l.workload, arch = l.arch;
    else if (parse_network_label(r->label, n)) workload = n.workload, arch = n.arch;
    return std::tuple(r->kind, workload, arch, position(*r), r->label);
  };
  std::vector<const UnitResult*> rows;
  for (const auto& r : s.results) rows.push_back(&r);
  std::sort(rows.begin(), rows.end(), [&](auto* a, auto* b) { return key(a) < key(b); });
  for (const UnitResult* r : rows)
    out += r->status == UnitResult::Status::Done
               ? fmt::format("| {} | done | {:.6g} | {:.6g} | {:.6g} | {} | {:.3f} |\n", r->label, r->energy_pj, r->cycles, r->edp,
                             r->rank, r->wall_seconds)
               : fmt::format("| {} | failed: {} | | | | {} | {:.3f} |\n", r->label, r->message, r->rank, r->wall_seconds);
  return out;
}

std::string report_csv(const StudyFile& s) {
  // The parameter columns as in the HDF5 file's /units; a cell a unit does not give is empty.
  const std::vector<UnitColumn> columns = table_columns(s.results);
  // Named metrics (GET-fusion units: dram_mb, groups, valid_share, ...) as columns after the fixed
  // fields, in the order they first appear; a name that repeats a column's gets "metric_" before it.
  std::vector<std::string> metrics;
  for (const UnitResult& r : s.results)
    for (const UnitResult::Metric& m : r.metrics)
      if (std::find(metrics.begin(), metrics.end(), m.name) == metrics.end()) metrics.push_back(m.name);
  std::set<std::string> taken = {"id", "kind", "label", "status", "message", "rank", "wall_seconds",
                                 "energy_pj", "cycles", "edp", "best_mapping"};
  for (const UnitColumn& c : columns) taken.insert(c.name);
  std::string out = "id,kind,label";
  for (const UnitColumn& c : columns) out += "," + csv_field(c.name);
  out += ",status,message,rank,wall_seconds,energy_pj,cycles,edp,best_mapping";
  for (const std::string& m : metrics) out += "," + csv_field(taken.count(m) ? "metric_" + m : m);
  out += "\n";
  for (const UnitResult& r : s.results) {
    out += fmt::format("{},{},{}", r.unit_id, r.kind, csv_field(r.label));
    for (const UnitColumn& spec : columns) {
      const UnitColumn* c = find_column(r.columns, spec.name);
      out += ",";
      if (!c || is_missing_cell(*c)) continue;
      out += c->type == UnitColumn::Type::Text      ? csv_field(c->text)
             : c->type == UnitColumn::Type::Integer ? std::to_string(c->integer)
                                                    : fmt::format("{}", c->real);
    }
    out += fmt::format(",{},{},{},{},{},{},{},{}\n", r.status == UnitResult::Status::Done ? "done" : "failed", csv_field(r.message),
                       r.rank, r.wall_seconds, r.energy_pj, r.cycles, r.edp, csv_field(r.best_mapping));
    if (!metrics.empty()) {
      out.pop_back();  // the row goes on with its metrics
      for (const std::string& m : metrics) {
        const double v = r.metric(m, std::numeric_limits<double>::quiet_NaN());
        out += std::isnan(v) ? std::string(",") : fmt::format(",{}", v);  // missing or undefined: an empty cell
      }
      out += "\n";
    }
  }
  return out;
}

std::vector<std::string> write_plots(const std::string& h5_path, const std::string& dir, const std::string& sweep_csv_text,
                                     const LayerOrder& layer_order) {
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
  const std::string order_file = (std::filesystem::path(dir) / "layer_order.csv").string();
  if (!layer_order.empty()) {
    std::ofstream o(order_file);
    o << "workload,layer\n";
    for (const auto& [w, names] : layer_order)
      for (const std::string& n : names) o << csv_field(w) << "," << csv_field(n) << "\n";
  }
  auto quote = [](const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
  };
  const std::string cmd = "/usr/bin/python3 " + quote(script) + " " + quote(h5_path) + " " + quote(dir) +
                          " " + quote(sweep_file.empty() ? "-" : sweep_file) +
                          (layer_order.empty() ? "" : " " + quote(order_file)) + " 2>&1";
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

namespace mapfuse {

std::string schedule_report_markdown(const std::vector<ScheduleRecord>& schedules) {
  std::string out;
  for (const auto& s : schedules) {
    out += fmt::format("## Schedule {}\n\n{} CTs, {} transfers and blocks, semantics {}, from {}\n\n", s.name, s.tiles.size(),
                       s.transfers.size(), s.semantics, s.source);
    out += fmt::format("| total | value |\n|---|---|\n| latency | {:.10g} cc |\n| energy | {:.12g} pJ |\n\n", s.latency_cc,
                       s.energy_pj);
    out += "| energy term | pJ |\n|---|---|\n";
    for (const auto& [term, pj] : s.energy_breakdown) out += fmt::format("| {} | {:.12g} |\n", term, pj);
    std::map<std::string, std::pair<size_t, double>> causes;  // count, bits
    for (const auto& t : s.transfers) {
      auto& c = causes[t.cause];
      ++c.first;
      c.second += t.bits;
    }
    out += "\n| transfer cause | count | bits |\n|---|---|---|\n";
    for (const auto& [cause, c] : causes) out += fmt::format("| {} | {} | {:.10g} |\n", cause, c.first, c.second);
    out += "\n| core | CTs | busy cycles | busy share | peak memory (bits) | capacity (bits) |\n|---|---|---|---|---|---|\n";
    for (size_t k = 0; k < s.cores.size(); ++k) {
      size_t n = 0;
      double busy = 0;
      for (const auto& t : s.tiles)
        if (size_t(t.core) == k) {
          ++n;
          busy += t.end - t.start;
        }
      const auto& c = s.cores[k];
      out += fmt::format("| {} {}{} | {} | {:.10g} | {:.1f} % | {:.10g} | {:.10g} |\n", k, c.name, c.offchip ? " (off-chip)" : "", n,
                         busy, s.latency_cc > 0 ? 100 * busy / s.latency_cc : 0.0, c.peak_memory_bits, c.capacity_bits);
    }
    out += "\n";
  }
  return out;
}

}  // namespace mapfuse
