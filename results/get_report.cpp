#include "results/get_report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

namespace mapfuse {

bool parse_get_label(const std::string& label, GetLabel& out) {
  std::istringstream in(label);
  std::vector<std::string> w;
  for (std::string t; in >> t;) w.push_back(t);
  if (w.size() < 5 || w[0] != "get" || w[3].size() < 3 || !w[3].ends_with("KB")) return false;
  GetLabel l;
  l.network = w[1];
  l.scheme = w[2];
  try {
    l.buffer_kb = std::stod(w[3].substr(0, w[3].size() - 2));
    if (w.size() == 5 && w[4] == "exact") {
      l.search = "exact";
      l.split = "none";
    } else if (w.size() == 8 && w[5].size() > 1 && w[5][0] == 'b' && w[6] == "seed") {
      const auto plus = w[4].find('+');
      l.search = w[4].substr(0, plus);
      l.split = plus == std::string::npos ? "none" : w[4].substr(plus + 1);
      l.budget = std::stoll(w[5].substr(1));
      l.seed = std::stoull(w[7]);
    } else {
      return false;
    }
  } catch (const std::exception&) {
    return false;
  }
  out = l;
  return true;
}

const std::vector<PaperGetCell>& paper_get_cells() {
  static const std::vector<PaperGetCell> cells = [] {
    std::vector<PaperGetCell> v;
    // [P-pdf] Table II: LBDF, 256 KB, 5k plans; DRAM MB and MBU KB (note §7.2).
    const char* nets2[] = {"efficientnet_b3", "resnet152", "deeplabv3_mobilenet_v3_large"};
    struct Row2 {
      const char *search, *row;
      double v[6];  // (DRAM, MBU) per network
    };
    const Row2 t2[] = {
        {"ls", "baseline", {90.500, 248.674, 80.733, 253.750, 116.644, 252.461}},
        {"ls", "GNNE", {78.007, 254.240, 74.461, 199.875, 114.440, 252.461}},
        {"ls", "PG", {73.569, 250.361, 76.421, 213.375, 114.180, 252.461}},
        {"ls", "RG", {78.433, 254.240, 75.245, 213.375, 113.942, 252.461}},
        {"nsga2", "baseline", {77.334, 249.236, 77.205, 253.375, 114.351, 252.461}},
        {"nsga2", "GNNE", {61.265, 254.248, 68.581, 199.875, 113.602, 252.461}},
        {"nsga2", "PG", {61.792, 254.217, 67.013, 213.375, 113.840, 252.461}},
        {"nsga2", "RG", {61.535, 254.218, 66.621, 253.375, 113.602, 252.461}},
        {"rs", "baseline", {172.802, 251.674, 113.661, 207.750, 148.153, 235.156}},
        {"rs", "GNNE", {169.928, 249.236, 96.021, 188.250, 143.925, 252.461}},
        {"rs", "PG", {164.086, 249.236, 96.413, 208.750, 142.548, 252.461}},
        {"rs", "RG", {162.774, 249.236, 94.453, 213.375, 147.022, 236.141}},
    };
    for (const Row2& r : t2)
      for (int k = 0; k < 3; ++k) v.push_back({"II", r.search, "lbdf", 256, 5000, nets2[k], r.row, r.v[2 * k], r.v[2 * k + 1]});
    // Tables III (LS) and IV (RS): 128 KB, 2k plans, DRAM MB, BRR then LBDF (note §7.3, §7.4).
    const char* nets34[] = {"mobilenet_v2", "vgg16", "resnet50", "resnet18", "squeezenet1_0"};
    struct Row34 {
      const char *table, *search, *row;
      double v[10];
    };
    const Row34 t34[] = {
        {"III", "ls", "baseline", {15.101, 27.606, 83.685, 27.127, 8.202, 9.803, 5.973, 25.764, 5.974, 3.839}},
        {"III", "ls", "GNNE", {13.401, 27.415, 83.344, 27.127, 6.232, 8.823, 5.973, 24.588, 5.974, 3.585}},
        {"III", "ls", "PG", {14.609, 26.975, 83.493, 26.975, 6.790, 9.068, 5.973, 24.588, 5.974, 3.585}},
        {"III", "ls", "RG", {13.790, 27.174, 83.317, 27.127, 7.714, 8.823, 5.973, 24.196, 5.974, 3.585}},
        {"IV", "rs", "baseline", {16.195, 29.274, 91.866, 28.525, 10.249, 13.209, 6.856, 39.092, 6.856, 10.080}},
        {"IV", "rs", "GNNE", {12.593, 28.593, 91.669, 27.919, 8.258, 11.432, 6.268, 35.564, 6.464, 7.948}},
        {"IV", "rs", "PG", {13.307, 28.124, 91.763, 27.599, 7.817, 13.049, 6.562, 32.820, 6.562, 7.751}},
        {"IV", "rs", "RG", {12.838, 28.847, 92.376, 28.081, 7.601, 12.890, 6.464, 32.036, 6.464, 7.333}},
    };
    for (const Row34& r : t34)
      for (int k = 0; k < 10; ++k)
        v.push_back({r.table, r.search, k < 5 ? "brr" : "lbdf", 128, 2000, nets34[k % 5], r.row, r.v[k], 0});
    return v;
  }();
  return cells;
}

namespace {

struct Stats {
  std::vector<double> x;
  double mean() const {
    double s = 0;
    for (double v : x) s += v;
    return x.empty() ? 0 : s / static_cast<double>(x.size());
  }
  double sd() const {  // sample standard deviation; 0 for one value
    if (x.size() < 2) return 0;
    const double m = mean();
    double s = 0;
    for (double v : x) s += (v - m) * (v - m);
    return std::sqrt(s / static_cast<double>(x.size() - 1));
  }
};

struct Unit {
  GetLabel l;
  const UnitResult* r;
};

int split_rank(const std::string& s) {
  static const std::vector<std::string> order = {"random", "cut", "occlusion", "dp", "none"};
  const auto it = std::find(order.begin(), order.end(), s);
  return static_cast<int>(it - order.begin());
}

int network_rank(const std::string& n) {
  static const std::vector<std::string> order = {"efficientnet_b3", "resnet152",   "deeplabv3_mobilenet_v3_large",
                                                 "mobilenet_v2",    "vgg16",       "resnet50",
                                                 "resnet18",        "squeezenet1_0", "squeezenet1_1"};
  const auto it = std::find(order.begin(), order.end(), n);
  return static_cast<int>(it - order.begin());
}

std::vector<std::string> ordered_networks(const std::set<std::string>& nets) {
  std::vector<std::string> v(nets.begin(), nets.end());
  std::stable_sort(v.begin(), v.end(), [](const std::string& a, const std::string& b) { return network_rank(a) < network_rank(b); });
  return v;
}

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string search_title(const std::string& s) { return s == "nsga2" ? "NSGA-II" : upper(s); }

std::string header(const std::string& first, const std::vector<std::string>& cols) {
  std::string h = "| " + first + " |", sep = "|---|";
  for (const std::string& c : cols) {
    h += " " + c + " |";
    sep += "---|";
  }
  return h + "\n" + sep + "\n";
}

const PaperGetCell* paper_cell(const std::string& search, const std::string& scheme, double kb, int64_t budget,
                               const std::string& net, const std::string& row) {
  for (const PaperGetCell& c : paper_get_cells())
    if (c.search == search && c.scheme == scheme && c.buffer_kb == kb && c.budget == budget && c.network == net && c.row == row)
      return &c;
  return nullptr;
}

// Tables II-IV: one table per (search, scheme, buffer, budget).
std::string search_tables(const std::vector<Unit>& units) {
  using Setting = std::tuple<std::string, std::string, double, int64_t>;  // search, scheme, kb, budget
  std::map<Setting, std::map<std::string, std::map<std::string, std::vector<const UnitResult*>>>> runs;  // split -> net
  std::map<std::tuple<std::string, std::string, double>, const UnitResult*> exact;  // (net, scheme, kb)
  for (const Unit& u : units) {
    if (u.l.search == "exact") exact[{u.l.network, u.l.scheme, u.l.buffer_kb}] = u.r;
    else if (u.l.search != "sample") runs[{u.l.search, u.l.scheme, u.l.buffer_kb, u.l.budget}][u.l.split][u.l.network].push_back(u.r);
  }
  std::string out;
  for (const auto& [setting, splits] : runs) {
    const auto& [search, scheme, kb, budget] = setting;
    std::set<std::string> netset;
    size_t seeds = 0;
    for (const auto& [split, nets] : splits)
      for (const auto& [net, rs] : nets) {
        netset.insert(net);
        seeds = std::max(seeds, rs.size());
      }
    const std::vector<std::string> nets = ordered_networks(netset);
    const char* table = nullptr;
    for (const std::string& n : nets)
      if (const PaperGetCell* c = paper_cell(search, scheme, kb, budget, n, "baseline")) table = c->table;
    out += fmt::format("### {}, {}, {} KB, {} plans{}: DRAM MB, mean ± sd over seeds · MBU KB (mean) · rectify rate\n\n",
                       search_title(search), upper(scheme), kb, budget, table ? fmt::format(" (the paper's Table {})", table) : "");
    out += header("row", nets);
    std::vector<std::string> split_order;
    for (const auto& kv : splits) split_order.push_back(kv.first);
    std::stable_sort(split_order.begin(), split_order.end(),
                     [](const std::string& a, const std::string& b) { return split_rank(a) < split_rank(b); });
    for (const std::string& split : split_order) {
      const auto& by_net = splits.at(split);
      std::string line = fmt::format("| {} {} |", search_title(search),
                                     split == "random" ? std::string("baseline (random split)") : "Algorithm 1 + " + split);
      for (const std::string& n : nets) {
        const auto it = by_net.find(n);
        Stats dram, mbu, rate;
        size_t failed = 0;
        if (it != by_net.end())
          for (const UnitResult* r : it->second) {
            if (r->status != UnitResult::Status::Done) {
              ++failed;
              continue;
            }
            dram.x.push_back(r->metric("dram_mb", 0));
            mbu.x.push_back(r->metric("mbu_kb", 0));
            if (const double rr = r->metric("rectify_rate", NAN); !std::isnan(rr)) rate.x.push_back(rr);
          }
        std::string cell = dram.x.empty() ? std::string("-")
                                          : fmt::format("{:.3f} ± {:.3f} · {:.1f}", dram.mean(), dram.sd(), mbu.mean());
        if (!rate.x.empty()) cell += fmt::format(" · {:.1f} %", 100 * rate.mean());
        if (dram.x.size() != seeds && !dram.x.empty()) cell += fmt::format(" (n={})", dram.x.size());
        if (failed) cell += fmt::format(" ({} failed)", failed);
        line += " " + cell + " |";
      }
      out += line + "\n";
    }
    std::string opt = "| true optimum |", fuse = "| fuseable / operators |";
    bool any_exact = false;
    for (const std::string& n : nets) {
      const auto it = exact.find({n, scheme, kb});
      const UnitResult* r = it == exact.end() ? nullptr : it->second;
      if (!r || r->status != UnitResult::Status::Done) {
        opt += r ? " failed |" : " - |";
      } else {
        any_exact = true;
        opt += r->metric("optimal", 0) > 0
                   ? fmt::format(" {:.3f} · {:.1f} |", r->metric("dram_mb", 0), r->metric("mbu_kb", 0))
                   : fmt::format(" {:.3f} (bound {:.3f}, gap {:.2f} %) |", r->metric("dram_mb", 0), r->metric("lower_bound_mb", 0),
                                 100 * r->metric("gap", 0));
      }
      const UnitResult* any = r && r->status == UnitResult::Status::Done ? r : nullptr;
      for (const auto& [split, by_net] : splits)
        if (const auto jt = by_net.find(n); !any && jt != by_net.end())
          for (const UnitResult* x : jt->second)
            if (x->status == UnitResult::Status::Done) any = x;
      fuse += any ? fmt::format(" {:.0f} / {:.0f} |", any->metric("fuseable_nodes", 0), any->metric("nodes", 0)) : " - |";
    }
    if (any_exact) out += opt + "\n";
    out += fuse + "\n";
    for (const char* row : {"baseline", "GNNE", "PG", "RG"}) {
      std::string line = fmt::format("| paper {}{} |", search_title(search), std::string(row) == "baseline" ? "" : "+" + std::string(row));
      bool any = false;
      for (const std::string& n : nets) {
        const PaperGetCell* c = paper_cell(search, scheme, kb, budget, n, row);
        any |= c != nullptr;
        line += c ? (c->mbu_kb > 0 ? fmt::format(" {:.3f} · {:.1f} |", c->dram_mb, c->mbu_kb) : fmt::format(" {:.3f} |", c->dram_mb))
                  : " - |";
      }
      if (any) out += line + "\n";
    }
    out += "\n";
  }
  return out;
}

// Fig. 3: the valid share of random groups per (network, scheme), one column per buffer size.
std::string sample_table(const std::vector<Unit>& units) {
  std::map<std::pair<int, std::string>, std::map<std::string, std::map<double, Stats>>> acc;  // (rank, net) -> scheme -> kb
  std::set<double> kbs;
  for (const Unit& u : units)
    if (u.l.search == "sample" && u.r->status == UnitResult::Status::Done) {
      acc[{network_rank(u.l.network), u.l.network}][u.l.scheme][u.l.buffer_kb].x.push_back(u.r->metric("valid_share", 0));
      kbs.insert(u.l.buffer_kb);
    }
  if (acc.empty()) return {};
  std::vector<std::string> cols;
  for (double kb : kbs) cols.push_back(fmt::format("{} KB", kb));
  std::string out =
      "### Valid share of random fusion groups (the paper's Fig. 3): % of the groups of >= 2 operators in random plans, "
      "mean ± sd over seeds\n\n" + header("network, scheme", cols);
  for (const auto& [key, schemes] : acc)
    for (const auto& [scheme, by_kb] : schemes) {
      std::string line = fmt::format("| {} {} |", key.second, upper(scheme));
      for (double kb : kbs) {
        const auto it = by_kb.find(kb);
        line += it == by_kb.end() ? " - |" : fmt::format(" {:.1f} ± {:.1f} |", 100 * it->second.mean(), 100 * it->second.sd());
      }
      out += line + "\n";
    }
  out += "\nThe paper plots, but does not tabulate, these shares: rising with the buffer with diminishing returns, "
         "0-100 % under LBDF and 25-80 % under BRR depending on the network ([P] §IV-A).\n\n";
  return out;
}

// Fig. 5: best DRAM against the plan budget, for settings run at several budgets.
std::string budget_table(const std::vector<Unit>& units) {
  using Key = std::tuple<int, std::string, std::string, double, std::string, std::string>;  // net rank, net, scheme, kb, search, split
  std::map<Key, std::map<int64_t, Stats>> acc;
  for (const Unit& u : units)
    if (u.l.search != "exact" && u.l.search != "sample" && u.r->status == UnitResult::Status::Done)
      acc[{network_rank(u.l.network), u.l.network, u.l.scheme, u.l.buffer_kb, u.l.search, u.l.split}][u.l.budget].x.push_back(
          u.r->metric("dram_mb", 0));
  std::erase_if(acc, [](const auto& kv) { return kv.second.size() < 2; });
  if (acc.empty()) return {};
  std::set<int64_t> budgets;
  for (const auto& [k, by_b] : acc)
    for (const auto& [b, st] : by_b) budgets.insert(b);
  std::vector<std::string> cols;
  for (int64_t b : budgets) cols.push_back(fmt::format("{} plans", b));
  std::string out = "### Best DRAM against the plan budget (the paper's Fig. 5): MB, mean ± sd over seeds\n\n" +
                    header("network, scheme, buffer, search, repair", cols);
  for (const auto& [k, by_b] : acc) {
    const auto& [rank, net, scheme, kb, search, split] = k;
    std::string line = fmt::format("| {} {} {} KB {} + {} |", net, upper(scheme), kb, search_title(search), split);
    for (int64_t b : budgets) {
      const auto it = by_b.find(b);
      line += it == by_b.end() ? " - |" : fmt::format(" {:.3f} ± {:.3f} |", it->second.mean(), it->second.sd());
    }
    out += line + "\n";
  }
  out += "\nThe paper's Fig. 5 gives curves, not numbers: (a) SqueezeNet BRR LS on 6.0-9.0 MB, (b) MobileNetV2 LBDF LS on "
         "8.8-10.0 MB, where a GET at 1k plans beats the baseline at 4k, (c) VGG16 LBDF RS on 6.00-7.25 MB (note §7.5).\n\n";
  return out;
}

}  // namespace

std::string get_report_markdown(const StudyFile& s) {
  std::vector<Unit> units;
  for (const UnitResult& r : s.results) {
    GetLabel l;
    if (r.kind == "get_partition" && parse_get_label(r.label, l)) units.push_back({l, &r});
  }
  if (units.empty()) return {};
  std::stable_sort(units.begin(), units.end(), [](const Unit& a, const Unit& b) {
    return std::tuple(split_rank(a.l.split), a.l.seed) < std::tuple(split_rank(b.l.split), b.l.seed);
  });
  std::string out = "## GET-fusion partitions (DRAM among fuseable operators, MB = 2^20 B, KB = 1024 B)\n\n";
  out += search_tables(units) + sample_table(units) + budget_table(units);
  out += "## Units\n\n| unit | status | DRAM MB | MBU KB | rectify rate | plans | seconds |\n|---|---|---|---|---|---|---|\n";
  std::vector<const UnitResult*> rows;
  for (const Unit& u : units) rows.push_back(u.r);
  std::sort(rows.begin(), rows.end(), [](auto* a, auto* b) { return a->label < b->label; });
  for (const UnitResult* r : rows) {
    if (r->status != UnitResult::Status::Done) {
      out += fmt::format("| {} | failed: {} | | | | | {:.3f} |\n", r->label, r->message, r->wall_seconds);
      continue;
    }
    const double rr = r->metric("rectify_rate", NAN);
    const double share = r->metric("valid_share", NAN);
    out += fmt::format("| {} | done | {} | {} | {} | {:.0f} | {:.3f} |\n", r->label,
                       std::isnan(share) ? fmt::format("{:.3f}", r->metric("dram_mb", 0)) : fmt::format("valid share {:.1f} %", 100 * share),
                       std::isnan(share) ? fmt::format("{:.1f}", r->metric("mbu_kb", 0)) : std::string("-"),
                       std::isnan(rr) ? std::string("-") : fmt::format("{:.1f} %", 100 * rr), r->metric("plans", 0),
                       r->metric("seconds", 0));
  }
  return out;
}

}  // namespace mapfuse
