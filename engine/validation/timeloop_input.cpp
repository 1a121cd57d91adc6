#include "engine/validation/timeloop_input.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>

#include "engine/common/error.hpp"
#include "engine/common/yaml_file.hpp"
#include "engine/cost/model.hpp"
#include "engine/workload/timeloop_problem.hpp"

namespace mapfuse {
namespace {

namespace fs = std::filesystem;

SourceLocation loc(const std::string& file, const YAML::Node& n) { return yaml_location(file, n); }

YAML::Node load_yaml(const std::string& path) { return load_yaml_file(path); }

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::string trim(std::string_view s) {
  size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
  return std::string(s.substr(a, b - a));
}

// "GlobalBuffer[1..16]" -> ("GlobalBuffer", 16); "System.PE[0..167]" -> ("PE", 168).
std::pair<std::string, int64_t> split_name(const std::string& file, const YAML::Node& node,
                                           const std::string& key, std::string name) {
  if (const size_t dot = name.rfind('.', name.find('[')); dot != std::string::npos && name.find('[') != std::string::npos)
    name = name.substr(dot + 1);
  else if (name.find('[') == std::string::npos && name.rfind('.') != std::string::npos)
    name = name.substr(name.rfind('.') + 1);
  const size_t open = name.find('[');
  if (open == std::string::npos) return {name, 1};
  const size_t dots = name.find("..", open), close = name.find(']', open);
  if (dots == std::string::npos || close == std::string::npos || close < dots)
    throw InputError(loc(file, node), key, "malformed instance range in '" + name + "'; expected Name[lo..hi]");
  try {
    const int64_t lo = std::stoll(name.substr(open + 1, dots - open - 1));
    const int64_t hi = std::stoll(name.substr(dots + 2, close - dots - 2));
    if (hi < lo) throw std::invalid_argument("range");
    return {name.substr(0, open), hi - lo + 1};
  } catch (const std::exception&) {
    throw InputError(loc(file, node), key, "malformed instance range in '" + name + "'; expected Name[lo..hi]");
  }
}

// A numeric attribute; nullopt when absent or null. Timeloop writes "-" or -1 for "unset" in places.
std::optional<double> num_attr(const std::string& file, const YAML::Node& attrs, const std::string& key,
                               const std::string& where) {
  if (!attrs || !attrs.IsMap()) return std::nullopt;
  const YAML::Node n = attrs[key];
  if (!n || n.IsNull()) return std::nullopt;
  if (!n.IsScalar()) throw InputError(loc(file, n), where + ".attributes." + key, "expected a number");
  try {
    size_t used = 0;
    const double v = std::stod(n.Scalar(), &used);
    if (used != n.Scalar().size()) throw std::invalid_argument("trailing");
    return v;
  } catch (const std::exception&) {
    throw InputError(loc(file, n), where + ".attributes." + key, "'" + n.Scalar() + "' is not a number");
  }
}

struct Component {
  std::string name, cls;
  YAML::Node node, attrs;
  int64_t instances = 1;
  bool arithmetic = false;
};

bool is_arithmetic_class(const std::string& cls) {
  const std::string c = lower(cls);
  for (const char* k : {"mac", "compute", "adder", "mult", "alu"})
    if (c.find(k) != std::string::npos) return true;
  return false;
}

void walk_tree(const std::string& file, const YAML::Node& node, const std::string& key, int64_t mult,
               std::vector<Component>& out) {
  if (const YAML::Node local = node["local"]) {
    if (!local.IsSequence()) throw InputError(loc(file, local), key + ".local", "expected a list of components");
    for (const YAML::Node& c : local) {
      if (!c["name"]) throw InputError(loc(file, c), key + ".local", "component without a name");
      if (c["enabled"] && !c["enabled"].as<bool>(true)) continue;
      Component comp;
      auto [name, n] = split_name(file, c["name"], key + ".local.name", c["name"].Scalar());
      comp.name = name;
      comp.instances = mult * n;
      comp.cls = c["class"] ? c["class"].Scalar() : "";
      comp.node = c;
      comp.attrs = c["attributes"];
      comp.arithmetic = is_arithmetic_class(comp.cls);
      const std::string cl = lower(comp.cls);
      if (cl.find("noc") != std::string::npos || cl.find("network") != std::string::npos)
        throw InputError(loc(file, c), key + ".local." + name,
                         "network components are not supported; expected storage and arithmetic only");
      out.push_back(std::move(comp));
    }
  }
  if (const YAML::Node sub = node["subtree"]) {
    if (!sub.IsSequence()) throw InputError(loc(file, sub), key + ".subtree", "expected a list of subtrees");
    for (const auto& s : sub) {
      int64_t n = 1;
      std::string sname = s["name"] ? s["name"].Scalar() : "";
      if (s["name"]) n = split_name(file, s["name"], key + ".subtree.name", sname).second;
      walk_tree(file, s, key + ".subtree." + sname, mult * n, out);
    }
  }
}

// ERT: bare component name -> action -> energy of one vector access (max over argument lists).
using Ert = std::map<std::string, std::map<std::string, double>>;

Ert load_ert(const std::string& path) {
  const YAML::Node root = load_yaml(path);
  const YAML::Node ert = root["ERT"] ? root["ERT"] : root;
  const YAML::Node tables = ert["tables"];
  if (!tables || !tables.IsSequence()) throw InputError(loc(path, ert), "ERT.tables", "missing or not a list");
  Ert out;
  for (const auto& t : tables) {
    if (!t["name"] || !t["actions"]) throw InputError(loc(path, t), "ERT.tables", "table without name or actions");
    const std::string name = split_name(path, t["name"], "ERT.tables.name", t["name"].Scalar()).first;
    auto& acts = out[name];
    for (const auto& a : t["actions"]) {
      if (!a["name"] || !a["energy"]) throw InputError(loc(path, a), "ERT.tables." + name + ".actions", "action without name or energy");
      double e = 0;
      try {
        e = a["energy"].as<double>();
      } catch (const YAML::Exception&) {
        throw InputError(loc(path, a["energy"]), "ERT.tables." + name + ".actions.energy", "expected a number");
      }
      const std::string an = a["name"].Scalar();
      acts[an] = acts.count(an) ? std::max(acts[an], e) : e;
    }
  }
  return out;
}

// A storage level as Timeloop sees it, with its part of the mapping.
struct TlLevel {
  Component comp;
  Level level;
  int64_t mesh_x = 1, mesh_y = 1, cluster_size = 1;
  double e_read = 0, e_fill = 0, e_update = 0;  // vector-access energies
  std::vector<Loop> temporal;  // outer -> inner
  std::vector<Loop> spatial;   // outer -> inner
  std::set<std::string> bypass;
  bool has_keep_directive = false;
};

// Mapping factors: "C1 M8 R1" or "R=1,P=1,K=1,C=1".
std::map<std::string, int64_t> parse_factors(const std::string& file, const YAML::Node& n, const std::string& key,
                                             const std::vector<std::string>& dims) {
  std::map<std::string, int64_t> f;
  std::string s = n.Scalar();
  for (char& c : s)
    if (c == ',') c = ' ';
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && s[i] == ' ') ++i;
    if (i == s.size()) break;
    size_t j = i;
    while (j < s.size() && s[j] != ' ') ++j;
    const std::string tok = s.substr(i, j - i);
    i = j;
    size_t k = 0;
    while (k < tok.size() && !std::isdigit(static_cast<unsigned char>(tok[k])) && tok[k] != '=') ++k;
    const std::string dim = tok.substr(0, k);
    std::string val = tok.substr(k);
    if (!val.empty() && val[0] == '=') val = val.substr(1);
    if (std::find(dims.begin(), dims.end(), dim) == dims.end())
      throw InputError(loc(file, n), key, "unknown dimension '" + dim + "'" + did_you_mean(dim, dims));
    try {
      size_t used = 0;
      const long long v = std::stoll(val, &used);
      if (used != val.size() || v <= 0) throw std::invalid_argument("factor");
      f[dim] = v;
    } catch (const std::exception&) {
      throw InputError(loc(file, n), key, "'" + tok + "' is not a factor; expected <dim><positive integer>");
    }
  }
  return f;
}

std::vector<std::string> parse_permutation(const std::string& file, const YAML::Node& n, const std::string& key,
                                           const std::vector<std::string>& dims) {
  std::vector<std::string> p;
  if (n && n.IsSequence()) {
    for (const auto& x : n) p.push_back(x.Scalar());
  } else if (n) {
    const std::string s = n.Scalar();
    const bool single = std::all_of(dims.begin(), dims.end(), [](const std::string& d) { return d.size() == 1; });
    if (single) {
      for (char c : s)
        if (c != ' ' && c != ',') p.emplace_back(1, c);
    } else {
      std::string cur;
      for (char c : s + " ") {
        if (c == ' ' || c == ',') {
          if (!cur.empty()) p.push_back(cur);
          cur.clear();
        } else {
          cur += c;
        }
      }
    }
  }
  for (const auto& d : p)
    if (std::find(dims.begin(), dims.end(), d) == dims.end())
      throw InputError(loc(file, n), key, "unknown dimension '" + d + "'" + did_you_mean(d, dims));
  return p;
}

}  // namespace

TimeloopCase import_timeloop_input(const std::string& input_yaml, const std::string& ert_yaml,
                                   const std::string& map_yaml) {
  TimeloopCase tc;
  tc.input = input_yaml;
  tc.ert = ert_yaml;
  tc.mapping_file = map_yaml;
  const std::string& file = input_yaml;
  const YAML::Node root = load_yaml(file);
  if (!root.IsMap() || !root["architecture"])
    throw InputError(loc(file, root), "architecture", "missing; expected a Timeloop parsed-processed-input.yaml");

  // --- Problem. --------------------------------------------------------------------------------
  tc.einsum = import_timeloop_problem(file, /*lenient=*/true);
  if (const YAML::Node nm = root["problem"]["shape"]["name"]) tc.einsum.name = nm.Scalar();
  std::vector<std::string> dims, spaces;
  for (const auto& r : tc.einsum.ranks) dims.push_back(r.name);
  for (const auto& t : tc.einsum.tensors) spaces.push_back(t.name);

  // --- Architecture. ---------------------------------------------------------------------------
  std::vector<Component> comps;
  walk_tree(file, root["architecture"], "architecture", 1, comps);
  const Ert ert = load_ert(ert_yaml);
  std::vector<TlLevel> tl;  // outermost first
  std::optional<Component> arith;
  for (auto& c : comps) {
    if (c.arithmetic) {
      if (arith) throw InputError(loc(file, c.node), "architecture." + c.name, "a second arithmetic component; expected one");
      arith = c;
      continue;
    }
    if (arith)
      throw InputError(loc(file, c.node), "architecture." + c.name, "storage below the arithmetic component");
    TlLevel t;
    t.comp = c;
    const std::string key = "architecture." + c.name;
    auto attr = [&](const char* k) { return num_attr(file, c.attrs, k, key); };
    Level& lv = t.level;
    lv.name = c.name;
    double word_bits = 8;
    for (const char* k : {"word_bits", "word_width", "datawidth", "word-bits"})
      if (auto v = attr(k)) {
        word_bits = *v;
        break;
      }
    if (word_bits <= 0) throw InputError(loc(file, c.node), key + ".attributes.datawidth", "must be positive");
    lv.word_bits = static_cast<int>(word_bits);
    t.cluster_size = static_cast<int64_t>(attr("cluster_size").value_or(1));
    if (t.cluster_size <= 0) t.cluster_size = 1;
    int64_t block = 1;
    if (auto v = attr("block_size")) block = static_cast<int64_t>(*v);
    else if (auto v2 = attr("n_words")) block = static_cast<int64_t>(*v2);
    else if (auto w = attr("width")) block = static_cast<int64_t>(*w / static_cast<double>(t.cluster_size) / word_bits);
    lv.block_size = static_cast<int>(std::max<int64_t>(1, block));
    const std::string tech = c.attrs && c.attrs["technology"] ? c.attrs["technology"].Scalar() : "";
    const bool dram = lower(c.cls).find("dram") != std::string::npos || tech == "DRAM";
    if (!dram) {
      if (auto v = attr("entries")) lv.entries = static_cast<int64_t>(*v);
      else if (auto d = attr("depth")) lv.entries = static_cast<int64_t>(*d) * lv.block_size;
      else if (auto kb = attr("sizeKB")) lv.entries = static_cast<int64_t>(*kb * 8192 / word_bits);
      if (lv.entries < 0) lv.entries = 0;
    }
    lv.multiple_buffering = static_cast<int>(std::lround(attr("multiple_buffering").value_or(1)));
    if (lv.multiple_buffering < 1) lv.multiple_buffering = 1;
    auto bw = [&](const char* k) {
      const double v = attr(k).value_or(0);
      return v > 0 ? v : 0;
    };
    lv.read_bandwidth = bw("read_bandwidth");
    lv.write_bandwidth = bw("write_bandwidth");
    lv.shared_bandwidth = bw("shared_bandwidth");
    if (const double b = bw("bandwidth"); b > 0 && lv.read_bandwidth == 0 && lv.write_bandwidth == 0)
      lv.read_bandwidth = lv.write_bandwidth = b / 2;
    lv.may_keep = kAllRoles;
    // Energies of one vector access (Timeloop's op lookup order; `update` is never looked up).
    const auto eit = ert.find(c.name);
    if (eit != ert.end()) {
      const auto& a = eit->second;
      auto pick = [&](std::initializer_list<const char*> names) -> std::optional<double> {
        for (const char* n : names)
          if (a.count(n)) return a.at(n);
        return std::nullopt;
      };
      double fallback = 0;
      for (const auto& [n, e] : a) fallback = std::max(fallback, e);
      fallback /= static_cast<double>(t.cluster_size);
      t.e_read = pick({"random_read", "read"}).value_or(fallback);
      t.e_fill = pick({"random_fill", "write"}).value_or(fallback);
      t.e_update = pick({"random_update", "random_fill", "write"}).value_or(fallback);
    }
    t.mesh_y = static_cast<int64_t>(attr("meshY").value_or(1));
    t.mesh_x = static_cast<int64_t>(attr("meshX").value_or(static_cast<double>(c.instances / std::max<int64_t>(1, t.mesh_y))));
    tl.push_back(std::move(t));
  }
  if (!arith) throw InputError({file, 0, 0}, "architecture", "no arithmetic component (class intmac, fpmac, mac, compute)");
  if (tl.empty()) throw InputError({file, 0, 0}, "architecture", "no storage level");
  const int NT = static_cast<int>(tl.size());
  // Fan-out of each level into its child (next storage level or the arithmetic units).
  {
    const double ay = num_attr(file, arith->attrs, "meshY", "architecture." + arith->name).value_or(1);
    const double ax = num_attr(file, arith->attrs, "meshX", "architecture." + arith->name)
                          .value_or(static_cast<double>(arith->instances) / ay);
    for (int i = 0; i < NT; ++i) {
      const int64_t cx = i + 1 < NT ? tl[i + 1].mesh_x : static_cast<int64_t>(ax);
      const int64_t cy = i + 1 < NT ? tl[i + 1].mesh_y : static_cast<int64_t>(ay);
      const int64_t ci = i + 1 < NT ? tl[i + 1].comp.instances : arith->instances;
      const std::string key = "architecture." + tl[i].comp.name;
      if (tl[i].mesh_x <= 0 || tl[i].mesh_y <= 0 || cx % tl[i].mesh_x || cy % tl[i].mesh_y)
        throw InputError(loc(file, tl[i].comp.node), key + ".attributes.meshX",
                         "mesh " + std::to_string(tl[i].mesh_x) + "x" + std::to_string(tl[i].mesh_y) +
                             " does not divide the mesh of the level below (" + std::to_string(cx) + "x" +
                             std::to_string(cy) + ")");
      tl[i].level.fanout.x = cx / tl[i].mesh_x;
      tl[i].level.fanout.y = cy / tl[i].mesh_y;
      if (tl[i].level.fanout.x * tl[i].level.fanout.y * tl[i].comp.instances != ci)
        throw InputError(loc(file, tl[i].comp.node), key,
                         "instances (" + std::to_string(tl[i].comp.instances) + ") times fan-out do not give the " +
                             std::to_string(ci) + " instances of the level below");
    }
  }

  // --- Mapping. --------------------------------------------------------------------------------
  std::string mfile = file;
  YAML::Node mapping = root["mapping"];
  if (!map_yaml.empty()) {
    mfile = map_yaml;
    const YAML::Node mroot = load_yaml(map_yaml);
    mapping = mroot["mapping"];
    if (!mapping) throw InputError(loc(map_yaml, mroot), "mapping", "missing; expected a list of directives");
  }
  if (!mapping || !mapping.IsSequence() || mapping.size() == 0)
    throw InputError(loc(mfile, mapping ? mapping : root), "mapping",
                     "missing or empty; a mapper run needs its *.map.yaml as the mapping");
  std::vector<std::string> level_names;
  for (const auto& t : tl) level_names.push_back(t.comp.name);
  for (const auto& d : mapping) {
    if (!d["target"] || !d["type"]) throw InputError(loc(mfile, d), "mapping", "directive without target or type");
    const std::string target = d["target"].Scalar(), type = d["type"].Scalar();
    const std::string key = "mapping." + target + "." + type;
    const auto it = std::find(level_names.begin(), level_names.end(), target);
    if (it == level_names.end())
      throw InputError(loc(mfile, d["target"]), "mapping.target",
                       "unknown level '" + target + "'" + did_you_mean(target, level_names));
    TlLevel& lv = tl[it - level_names.begin()];
    if (type == "temporal" || type == "spatial") {
      std::map<std::string, int64_t> f;
      if (d["factors"]) f = parse_factors(mfile, d["factors"], key + ".factors", dims);
      std::vector<std::string> perm = parse_permutation(mfile, d["permutation"], key + ".permutation", dims);
      // Dimensions missing from the permutation go outside the listed ones.
      for (const auto& dn : dims)
        if (std::find(perm.begin(), perm.end(), dn) == perm.end()) perm.push_back(dn);
      const int64_t split = d["split"] ? d["split"].as<int64_t>() : static_cast<int64_t>(perm.size());
      std::vector<Loop> loops;  // innermost first
      for (size_t k = 0; k < perm.size(); ++k) {
        const auto fi = f.find(perm[k]);
        const int64_t factor = fi == f.end() ? 1 : fi->second;
        const LoopKind kind = type == "temporal"                    ? LoopKind::Temporal
                              : static_cast<int64_t>(k) < split ? LoopKind::SpatialX
                                                                    : LoopKind::SpatialY;
        loops.push_back({tc.einsum.rank_index(perm[k]), factor, kind});
      }
      std::reverse(loops.begin(), loops.end());
      (type == "temporal" ? lv.temporal : lv.spatial) = std::move(loops);
    } else if (type == "bypass" || type == "datatype") {
      lv.has_keep_directive = true;
      auto names = [&](const char* k) {
        std::vector<std::string> v;
        if (const YAML::Node n = d[k]) {
          if (!n.IsSequence()) throw InputError(loc(mfile, n), key + "." + k, "expected a list of dataspaces");
          for (const auto& x : n) {
            const std::string s = x.Scalar();
            if (std::find(spaces.begin(), spaces.end(), s) == spaces.end())
              throw InputError(loc(mfile, x), key + "." + k, "unknown dataspace '" + s + "'" + did_you_mean(s, spaces));
            v.push_back(s);
          }
        }
        return v;
      };
      for (const auto& s : names("bypass")) lv.bypass.insert(s);
      for (const auto& s : names("keep")) lv.bypass.erase(s);
    } else {
      throw InputError(loc(mfile, d["type"]), "mapping.type",
                       "unknown directive type '" + type + "'" +
                           did_you_mean(type, {"temporal", "spatial", "bypass", "datatype"}));
    }
  }

  // Timeloop's cluster utilisation scales the per-instance energy of clustered levels:
  // utilised instances / min(utilised instances, instances / cluster size).
  {
    int64_t above = 1;  // utilised instances of level i: spatial factors of the levels above
    for (int i = 0; i < NT; ++i) {
      TlLevel& t = tl[i];
      double cu = 1;
      if (t.cluster_size > 1) {
        const double clusters = static_cast<double>(t.comp.instances) / static_cast<double>(t.cluster_size);
        cu = static_cast<double>(above) / std::min(static_cast<double>(above), clusters);
      }
      const double b = static_cast<double>(t.level.block_size) * cu;
      t.level.read_pj = t.e_read / b;
      t.level.write_pj = t.e_fill / b;
      t.level.update_pj = t.e_update / b;
      for (const Loop& lp : t.spatial) above *= lp.factor;
    }
  }

  // Fold pass-through levels (keep nothing, trivial temporal loops) into their parent. Those
  // without spatial loops are folded always: they change nothing. Those with spatial loops are
  // folded only while the hierarchy exceeds kMaxLevels, innermost first: Timeloop counts multicast
  // groups per spatial level, so merging two levels' spatial loops is exact only while the cost
  // model counts groups over all spatial loops between two kept levels (see docs/validation.md).
  auto pass_through = [&](const TlLevel& t) {
    return t.bypass.size() == spaces.size() &&
           std::all_of(t.temporal.begin(), t.temporal.end(), [](const Loop& l) { return l.factor == 1; });
  };
  auto has_spatial = [](const TlLevel& t) {
    return std::any_of(t.spatial.begin(), t.spatial.end(), [](const Loop& l) { return l.factor > 1; });
  };
  std::vector<bool> fold(NT, false);
  int remaining = NT;
  for (int i = 1; i < NT; ++i)
    if (pass_through(tl[i]) && !has_spatial(tl[i])) fold[i] = true, --remaining;
  for (int i = NT - 1; i >= 1 && remaining > kMaxLevels; --i)
    if (!fold[i] && pass_through(tl[i])) fold[i] = true, --remaining;
  std::vector<TlLevel> kept;
  for (int i = 0; i < NT; ++i) {
    TlLevel& t = tl[i];
    if (fold[i]) {
      TlLevel& parent = kept.back();
      parent.spatial.insert(parent.spatial.end(), t.spatial.begin(), t.spatial.end());
      parent.level.fanout.x *= t.level.fanout.x;
      parent.level.fanout.y *= t.level.fanout.y;
      tc.folded_levels.push_back(t.comp.name);
      continue;
    }
    kept.push_back(std::move(t));
  }
  if (kept.size() > static_cast<size_t>(kMaxLevels))
    throw InputError({file, 0, 0}, "architecture",
                     std::to_string(kept.size()) + " storage levels after folding pass-through levels; at most " +
                         std::to_string(kMaxLevels) + " are supported");

  // --- mapfuse types (innermost level first). --------------------------------------------------
  tc.core.name = fs::path(file).parent_path().filename().string();
  tc.mapping.levels.clear();
  for (auto it = kept.rbegin(); it != kept.rend(); ++it) {
    tc.core.levels.push_back(it->level);
    LevelMapping lm;
    lm.loops = it->temporal;
    lm.loops.insert(lm.loops.end(), it->spatial.begin(), it->spatial.end());
    lm.loops.erase(std::remove_if(lm.loops.begin(), lm.loops.end(), [](const Loop& l) { return l.factor == 1; }),
                   lm.loops.end());
    for (size_t t = 0; t < spaces.size(); ++t)
      if (!it->bypass.count(spaces[t])) lm.keep |= static_cast<TensorMask>(1u << t);
    tc.mapping.levels.push_back(std::move(lm));
  }
  tc.core.compute.name = arith->name;
  {
    const auto eit = ert.find(arith->name);
    if (eit == ert.end())
      throw InputError({ert_yaml, 0, 0}, "ERT.tables", "no table for the arithmetic component '" + arith->name + "'");
    double e = -1;
    for (const char* n : {"mac_random", "mult_random", "mac", "mult", "compute"})
      if (eit->second.count(n)) {
        e = eit->second.at(n);
        break;
      }
    if (e < 0)
      throw InputError({ert_yaml, 0, 0}, "ERT.tables." + arith->name,
                       "no compute action; expected one of mac_random, mult_random, mac, mult, compute");
    tc.core.compute.energy_pj = e;
  }
  finalize(tc.core, file);
  if (auto err = check_structure(tc.mapping, tc.einsum, tc.core))
    throw InputError({mfile, 0, 0}, "mapping", err->message);
  return tc;
}

// --- Stats. ----------------------------------------------------------------------------------

double TimeloopStats::dynamic_energy_pj() const {
  double e = 0;
  for (const auto& l : levels) e += l.energy_pj;
  return e;
}

double TimeloopStats::leakage_pj() const {
  double e = 0;
  for (const auto& l : levels) e += l.leakage_pj;
  return e;
}

const TimeloopStats::Level* TimeloopStats::level(std::string_view name) const {
  for (const auto& l : levels)
    if (l.name == name) return &l;
  return nullptr;
}

TimeloopStats read_timeloop_stats(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError({path, 0, 0}, {}, "cannot open file; expected a Timeloop *.stats.txt");
  TimeloopStats s;
  s.source = path;
  enum class Section { Levels, Other, Summary } section = Section::Levels;
  TimeloopStats::Level* cur = nullptr;
  TimeloopStats::Dataspace* ds = nullptr;
  bool in_stats = false;
  std::string line;
  int lineno = 0;
  auto number = [&](const std::string& key, const std::string& v) {
    try {
      return std::stod(v);
    } catch (const std::exception&) {
      throw InputError({path, lineno, 0}, key, "'" + v + "' is not a number");
    }
  };
  while (std::getline(in, line)) {
    ++lineno;
    const std::string t = trim(line);
    if (t.empty()) continue;
    if (t == "Networks" || t.rfind("Operational Intensity Stats", 0) == 0) {
      section = Section::Other;
      cur = nullptr;
      continue;
    }
    if (t == "Summary Stats") {
      section = Section::Summary;
      continue;
    }
    if (section == Section::Summary) {
      if (t.rfind("Cycles:", 0) == 0) s.cycles = static_cast<int64_t>(number("Cycles", trim(t.substr(7))));
      else if (t.rfind("Energy:", 0) == 0) s.energy_uj_printed = number("Energy", trim(t.substr(7)));
      else if (t.rfind("Computes =", 0) == 0) s.computes = static_cast<int64_t>(number("Computes", trim(t.substr(10))));
      continue;
    }
    if (section != Section::Levels) continue;
    if (t.size() > 8 && t.rfind("=== ", 0) == 0 && t.substr(t.size() - 4) == " ===") {
      s.levels.push_back({});
      cur = &s.levels.back();
      cur->name = t.substr(4, t.size() - 8);
      ds = nullptr;
      in_stats = false;
      continue;
    }
    if (!cur) continue;
    if (t == "STATS") {
      in_stats = true;
      continue;
    }
    if (t == "SPECS" || t == "MAPPING") {
      in_stats = false;
      continue;
    }
    const size_t colon = t.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = trim(t.substr(0, colon)), val = trim(t.substr(colon + 1));
    if (!in_stats) {
      if (key == "Leakage energy (total)") cur->leakage_pj = number(key, val);
      continue;
    }
    if (val.empty()) {  // "Weights:" opens a dataspace block
      ds = &cur->dataspaces[key];
      continue;
    }
    auto i64 = [&] { return static_cast<int64_t>(std::llround(number(key, val))); };
    if (ds) {
      if (key == "Scalar reads (per-instance)") ds->reads = i64();
      else if (key == "Scalar fills (per-instance)") ds->fills = i64();
      else if (key == "Scalar updates (per-instance)") ds->updates = i64();
      else if (key == "Utilized capacity") ds->utilized_capacity = i64();
      else if (key == "Utilized instances (max)") ds->utilized_instances = i64();
      else if (key == "Energy (total)" || key == "Temporal Reduction Energy (total)" ||
               key == "Address Generation Energy (total)") {
        const double e = number(key, val);
        ds->energy_pj += e;
        cur->energy_pj += e;
      }
    } else {
      if (key == "Computes (total)") cur->arithmetic = true;
      else if (key == "Cycles") cur->cycles = i64();
      else if (key == "Energy (total)") cur->energy_pj += number(key, val);
    }
  }
  if (s.levels.empty() || s.cycles == 0)
    throw InputError({path, 0, 0}, {}, "no level statistics or no summary cycles; expected a Timeloop *.stats.txt");
  return s;
}

// --- Cases. ----------------------------------------------------------------------------------

TimeloopCaseFiles locate_timeloop_case(const std::string& path) {
  std::error_code ec;
  TimeloopCaseFiles f;
  fs::path p(path);
  if (fs::is_directory(p, ec)) {
    f.dir = p.string();
    f.input = (p / "parsed-processed-input.yaml").string();
  } else {
    f.dir = p.parent_path().string();
    f.input = p.string();
  }
  if (!fs::is_regular_file(f.input, ec))
    throw InputError({f.input, 0, 0}, {}, "cannot open file; expected a Timeloop parsed-processed-input.yaml");
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(f.dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  auto ends = [](const std::string& s, const std::string& suf) {
    return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
  };
  for (const auto& n : names) {
    const std::string full = (fs::path(f.dir) / n).string();
    if (ends(n, ".ERT.yaml") && f.ert.empty()) f.ert = full;
    else if (ends(n, ".map.yaml") && f.map.empty()) f.map = full;
    else if (ends(n, ".stats.txt") && f.stats.empty()) f.stats = full;
  }
  if (f.ert.empty()) throw InputError({f.dir, 0, 0}, {}, "no *.ERT.yaml beside the input; expected Timeloop's energy reference table");
  return f;
}

std::vector<std::string> find_timeloop_cases(const std::string& root) {
  std::vector<std::string> out;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) throw InputError({root, 0, 0}, {}, "is not a directory");
  for (const auto& e : fs::recursive_directory_iterator(root))
    if (e.is_regular_file() && e.path().filename() == "parsed-processed-input.yaml")
      out.push_back(e.path().parent_path().string());
  std::sort(out.begin(), out.end());
  return out;
}

bool TimeloopValidation::counts_match() const {
  return std::all_of(counts.begin(), counts.end(), [](const Counts& c) { return c.match(); });
}

namespace {
std::string case_name(const std::string& dir) {
  std::string s = fs::path(dir).lexically_normal().generic_string();
  while (!s.empty() && s.back() == '/') s.pop_back();
  for (const char* anchor : {"/timeloop/", "/example_designs/"}) {
    const size_t k = s.rfind(anchor);
    if (k != std::string::npos) {
      s = s.substr(k + std::string(anchor).size());
      break;
    }
  }
  for (const char* drop : {"/ref-output", "/ref_outputs"}) {
    const size_t k = s.find(drop);
    if (k != std::string::npos) s.erase(k, std::string(drop).size());
  }
  return s;
}
}  // namespace

TimeloopValidation validate_timeloop_case(const std::string& path) {
  const TimeloopCaseFiles f = locate_timeloop_case(path);
  if (f.stats.empty()) throw InputError({f.dir, 0, 0}, {}, "no *.stats.txt beside the input; expected Timeloop's reference stats");
  const TimeloopCase tc = import_timeloop_input(f.input, f.ert, f.map);
  const TimeloopStats ref = read_timeloop_stats(f.stats);
  TimeloopValidation v;
  v.dir = f.dir;
  v.name = case_name(f.dir);
  const CostResult r = evaluate(compile_plan(tc.einsum, tc.core), flatten(tc.mapping));
  v.valid = r.valid();
  if (!v.valid)
    v.invalid_reason = std::string(to_string(r.invalid)) +
                       (r.invalid_level >= 0 ? " at " + tc.core.levels[r.invalid_level].name : "");
  v.ref_cycles = static_cast<double>(ref.cycles);
  v.model_cycles = r.cycles;
  v.ref_energy_pj = ref.dynamic_energy_pj();
  v.model_energy_pj = r.energy_pj;
  v.ref_leakage_pj = ref.leakage_pj();
  for (const auto& rl : ref.levels) {
    TimeloopValidation::LevelEnergy le{rl.name, rl.energy_pj, 0};
    if (rl.arithmetic) le.model_pj = r.compute_energy_pj;
    else if (const int l = tc.core.level_index(rl.name); l >= 0) le.model_pj = r.level_energy_pj[l];
    v.levels.push_back(le);
  }
  const int T = static_cast<int>(tc.einsum.tensors.size());
  for (int l = 0; l < static_cast<int>(tc.core.levels.size()); ++l) {
    const std::string& ln = tc.core.levels[l].name;
    const TimeloopStats::Level* rl = ref.level(ln);
    for (int t = 0; t < T; ++t) {
      const std::string& tn = tc.einsum.tensors[t].name;
      const bool model_keeps = tc.mapping.levels[l].keep >> t & 1;
      const TimeloopStats::Dataspace* rd = nullptr;
      if (rl && rl->dataspaces.count(tn)) rd = &rl->dataspaces.at(tn);
      if (!model_keeps && !rd) continue;
      TimeloopValidation::Counts c{ln, tn};
      if (rd) {
        c.ref_reads = rd->reads * rd->utilized_instances;
        c.ref_fills = rd->fills * rd->utilized_instances;
        c.ref_updates = rd->updates * rd->utilized_instances;
        c.ref_capacity = rd->utilized_capacity;
      }
      const TensorAccesses& a = r.access[l][t];
      c.model_reads = a.reads;
      c.model_fills = a.fills;
      c.model_updates = a.updates;
      c.model_capacity = a.tile;
      v.counts.push_back(c);
    }
  }
  return v;
}

}  // namespace mapfuse
