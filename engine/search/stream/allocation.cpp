#include "engine/search/stream/allocation.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "engine/common/error.hpp"
#include "engine/common/toml_reader.hpp"

namespace mapfuse {
namespace {

const std::vector<std::string> kOpKeys = {"mac", "elementwise", "pool", "softmax", "copy", "default"};

// Entry `key` of table `section` as a list of core names, with its line for errors.
std::vector<std::string> cores_of(const toml::node& n, const std::string& file, const std::string& key) {
  const int line = int(n.source().begin.line);
  std::vector<std::string> out;
  if (auto s = n.value<std::string>()) {
    out.push_back(*s);
  } else if (auto arr = n.as_array()) {
    for (const auto& x : *arr) {
      auto s2 = x.value<std::string>();
      if (!s2) throw InputError({file, line, 0}, key, "expected a core name or a list of core names");
      out.push_back(*s2);
    }
  } else {
    throw InputError({file, line, 0}, key, "expected a core name or a list of core names");
  }
  if (out.empty()) throw InputError({file, line, 0}, key, "empty list of cores");
  return out;
}

int core_index(const Architecture& arch, const std::string& name) {
  for (size_t c = 0; c < arch.cores.size(); ++c)
    if (arch.cores[c].name == name) return int(c);
  return -1;
}

}  // namespace

Allocation load_allocation(const std::string& path) {
  const toml::table t = parse_toml_file(path);
  Allocation a;
  a.source = path;
  for (const auto& [k, v] : t) {
    const std::string key(k.str());
    if (key != "layers" && key != "ops")
      throw InputError({path, int(v.source().begin.line), 0}, key,
                       "unknown key; expected [layers] or [ops]" + did_you_mean(key, {"layers", "ops"}));
    const toml::table* sec = v.as_table();
    if (!sec) throw InputError({path, int(v.source().begin.line), 0}, key, "expected a table");
    for (const auto& [k2, v2] : *sec) {
      const std::string name(k2.str());
      const std::string full = key + "." + name;
      if (key == "ops" && std::find(kOpKeys.begin(), kOpKeys.end(), name) == kOpKeys.end())
        throw InputError({path, int(v2.source().begin.line), 0}, full,
                         "unknown operator kind; expected mac, elementwise, pool, softmax, copy or default" +
                             did_you_mean(name, kOpKeys));
      (key == "layers" ? a.layers : a.ops)[name] = cores_of(v2, path, full);
      a.lines[full] = int(v2.source().begin.line);
    }
  }
  return a;
}

std::vector<int> allocate_tiles(const Allocation& a, const Workload& w, const TileSet& ts, const Architecture& arch) {
  std::vector<std::string> layer_names, core_names;
  for (const auto& e : w.einsums) layer_names.push_back(e.name);
  for (const auto& c : arch.cores) core_names.push_back(c.name);
  auto at = [&](const std::string& key) {
    auto it = a.lines.find(key);
    return SourceLocation{a.source, it == a.lines.end() ? 0 : it->second, 0};
  };
  for (const auto& [name, cores] : a.layers)
    if (w.einsum_index(name) < 0)
      throw InputError(at("layers." + name), "layers." + name, "no layer of '" + w.name + "' has this name" + did_you_mean(name, layer_names));
  // Per layer: its key and its cores, checked.
  std::vector<std::vector<int>> per_layer(w.einsums.size());
  for (size_t l = 0; l < w.einsums.size(); ++l) {
    const Einsum& e = w.einsums[l];
    std::string key;
    const std::vector<std::string>* names = nullptr;
    if (auto it = a.layers.find(e.name); it != a.layers.end()) {
      key = "layers." + e.name;
      names = &it->second;
    } else if (auto it2 = a.ops.find(std::string(to_string(e.op))); it2 != a.ops.end()) {
      key = "ops." + it2->first;
      names = &it2->second;
    } else if (auto it3 = a.ops.find("default"); it3 != a.ops.end()) {
      key = "ops.default";
      names = &it3->second;
    } else {
      throw InputError(at(""), "layers." + e.name,
                       fmt::format("layer '{}' ({}) has no core: list it under [layers] or give ops.{} or ops.default",
                                   e.name, to_string(e.op), to_string(e.op)));
    }
    const int groups = ts.layer_groups[l];
    if (names->size() != 1 && int(names->size()) != groups)
      throw InputError(at(key), key,
                       fmt::format("{} cores for layer '{}', which has {} inter-core groups; expected 1 or {}",
                                   names->size(), e.name, groups, groups));
    for (const auto& n : *names) {
      const int c = core_index(arch, n);
      if (c < 0)
        throw InputError(at(key), key, "unknown core '" + n + "' of '" + arch.name + "'" + did_you_mean(n, core_names));
      if (!arch.cores[size_t(c)].can_run(e.op))
        throw InputError(at(key), key,
                         fmt::format("core '{}' cannot run layer '{}' ({} operator)", n, e.name, to_string(e.op)));
      per_layer[l].push_back(c);
    }
  }
  std::vector<int> out(ts.tiles.size());
  for (size_t t = 0; t < ts.tiles.size(); ++t) {
    const auto& cores = per_layer[size_t(ts.tiles[t].layer)];
    out[t] = cores[size_t(ts.tiles[t].group) % cores.size()];
  }
  return out;
}

std::vector<std::vector<int>> capable_cores(const Workload& w, const Architecture& arch) {
  std::vector<std::vector<int>> out(w.einsums.size());
  for (size_t l = 0; l < w.einsums.size(); ++l) {
    for (size_t c = 0; c < arch.cores.size(); ++c)
      if (arch.cores[c].can_run(w.einsums[l].op)) out[l].push_back(int(c));
    if (out[l].empty())
      throw InputError({}, "allocation",
                       fmt::format("no core of '{}' can run layer '{}' ({} operator)", arch.name, w.einsums[l].name,
                                   to_string(w.einsums[l].op)));
  }
  return out;
}

std::vector<int> allocate_greedy(const Workload& w, const TileSet& ts, const Architecture& arch) {
  const std::vector<std::vector<int>> capable = capable_cores(w, arch);
  std::vector<int> out(ts.tiles.size());
  for (size_t t = 0; t < ts.tiles.size(); ++t) {
    const auto& c = capable[size_t(ts.tiles[t].layer)];
    out[t] = c[size_t(ts.tiles[t].group) % c.size()];
  }
  return out;
}

std::vector<std::vector<int>> layer_cores(const Workload& w, const TileSet& ts, std::span<const int> core_of_tile) {
  std::vector<std::vector<int>> out(w.einsums.size());
  for (size_t l = 0; l < w.einsums.size(); ++l) out[l].assign(size_t(ts.layer_groups[l]), -1);
  for (size_t t = 0; t < ts.tiles.size(); ++t) out[size_t(ts.tiles[t].layer)][size_t(ts.tiles[t].group)] = core_of_tile[t];
  return out;
}

}  // namespace mapfuse
