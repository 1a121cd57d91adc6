#include "engine/arch/arch_toml.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <stdexcept>

#include "engine/common/embedded.hpp"
#include "engine/common/toml_reader.hpp"
#include "engine/arch/topology.hpp"
#include "engine/arch/stream_yaml.hpp"
#include <algorithm>

namespace mapfuse {
namespace {

RoleMask parse_roles(TomlReader& r, std::string_view key) {
  if (!r.has(key)) return (void)r.str_list(key), kAllRoles;
  RoleMask m = 0;
  for (const auto& s : r.str_list(key)) {
    if (s == "input") m |= role_bit(TensorRole::Input);
    else if (s == "weight") m |= role_bit(TensorRole::Weight);
    else if (s == "output") m |= role_bit(TensorRole::Output);
    else r.fail(key, "unknown tensor role '" + s + "'; expected input, weight or output" +
                         did_you_mean(s, {"input", "weight", "output"}));
  }
  return m;
}

double non_negative(TomlReader& r, std::string_view key, double v) {
  if (v < 0) r.fail(key, fmt::format("value {} is negative; expected >= 0", v));
  return v;
}

Level parse_level(TomlReader& r, const std::vector<std::string>& also_valid = {}) {
  Level lv;
  lv.name = r.str("name");
  if (lv.name.empty()) r.fail("name", "level name is empty");
  lv.word_bits = static_cast<int>(r.opt_integer("word_bits").value_or(8));
  if (lv.word_bits <= 0) r.fail("word_bits", "must be positive");
  int capacity_keys = 0;
  if (auto e = r.opt_integer("entries")) {
    ++capacity_keys;
    if (*e <= 0) r.fail("entries", fmt::format("capacity {} is not positive; expected >= 1", *e));
    lv.entries = *e;
  }
  if (auto b = r.opt_number("size_bytes")) {
    ++capacity_keys;
    if (*b <= 0) r.fail("size_bytes", fmt::format("capacity {} is not positive", *b));
    lv.entries = static_cast<int64_t>(*b * 8 / lv.word_bits);
  }
  if (auto kb = r.opt_number("size_kb")) {
    ++capacity_keys;
    if (*kb <= 0) r.fail("size_kb", fmt::format("capacity {} is not positive", *kb));
    lv.entries = static_cast<int64_t>(*kb * 1024 * 8 / lv.word_bits);
  }
  if (capacity_keys > 1) r.fail("entries", "give only one of entries, size_bytes, size_kb");
  lv.block_size = static_cast<int>(r.opt_integer("block_size").value_or(1));
  if (lv.block_size <= 0) r.fail("block_size", "must be positive");
  lv.multiple_buffering = static_cast<int>(r.opt_integer("multiple_buffering").value_or(1));
  if (lv.multiple_buffering <= 0) r.fail("multiple_buffering", "must be positive");
  lv.read_bandwidth = non_negative(r, "read_bandwidth", r.opt_number("read_bandwidth").value_or(0));
  lv.write_bandwidth = non_negative(r, "write_bandwidth", r.opt_number("write_bandwidth").value_or(0));
  lv.shared_bandwidth = non_negative(r, "shared_bandwidth", r.opt_number("shared_bandwidth").value_or(0));
  const double all = non_negative(r, "energy_pj", r.opt_number("energy_pj").value_or(0));
  lv.read_pj = non_negative(r, "read_pj", r.opt_number("read_pj").value_or(all));
  lv.write_pj = non_negative(r, "write_pj", r.opt_number("write_pj").value_or(all));
  lv.update_pj = non_negative(r, "update_pj", r.opt_number("update_pj").value_or(lv.write_pj));
  if (auto fit = r.opt_table("energy_fit")) {
    lv.fit = CapacityEnergyFit{fit->number("base_pj"), fit->number("per_kb_pj")};
    fit->finish();
    if (lv.entries == 0) r.fail("energy_fit", "needs a finite capacity (entries, size_bytes or size_kb)");
  }
  if (auto mlp = r.opt_table("energy_mlp")) {
    if (lv.fit) r.fail("energy_mlp", "give either energy_fit or energy_mlp, not both");
    if (r.has("energy_pj") || r.has("read_pj") || r.has("write_pj") || r.has("update_pj"))
      r.fail("energy_mlp", "energies come from the MLP; remove energy_pj / read_pj / write_pj / update_pj");
    std::vector<double> kb = mlp->number_list("capacity_kb"), pj = mlp->number_list("energy_pj");
    std::vector<int> hidden;
    for (double h : mlp->has("hidden") ? mlp->number_list("hidden") : std::vector<double>{8}) {
      if (h != std::floor(h)) mlp->fail("hidden", "layer sizes must be integers");
      hidden.push_back(static_cast<int>(h));
    }
    mlp->finish();
    try {
      lv.mlp = fit_energy_mlp(std::move(kb), std::move(pj), std::move(hidden));
    } catch (const std::invalid_argument& e) {
      r.fail("energy_mlp", e.what());
    }
    if (lv.entries == 0) r.fail("energy_mlp", "needs a finite capacity (entries, size_bytes or size_kb)");
  }
  lv.may_keep = parse_roles(r, "keeps");
  if (r.has("must_keep")) {
    lv.must_keep = parse_roles(r, "must_keep");
    if (lv.must_keep & ~lv.may_keep) r.fail("must_keep", "names a role that `keeps` does not allow at this level");
  }
  lv.backs_intermediates = r.opt_bool("backs_intermediates").value_or(false);
  if (auto f = r.opt_table("fanout")) {
    lv.fanout.x = f->opt_integer("x").value_or(1);
    lv.fanout.y = f->opt_integer("y").value_or(1);
    if (lv.fanout.x <= 0) f->fail("x", "fan-out must be >= 1");
    if (lv.fanout.y <= 0) f->fail("y", "fan-out must be >= 1");
    lv.fanout.x_ranks = f->str_list("x_ranks");
    lv.fanout.y_ranks = f->str_list("y_ranks");
    lv.fanout.x_reuse = f->has("x_reuse") ? parse_roles(*f, "x_reuse") : (f->str_list("x_reuse"), RoleMask{0});
    lv.fanout.y_reuse = f->has("y_reuse") ? parse_roles(*f, "y_reuse") : (f->str_list("y_reuse"), RoleMask{0});
    lv.fanout.x_multicast = parse_roles(*f, "x_multicast");
    lv.fanout.y_multicast = parse_roles(*f, "y_multicast");
    for (const char* key : {"x_min_usage", "y_min_usage"}) {
      const double u = f->opt_number(key).value_or(0);
      if (u < 0 || u > 1) f->fail(key, fmt::format("value {} is outside [0, 1]; expected a fraction of the axis", u));
      (key[0] == 'x' ? lv.fanout.x_min_usage : lv.fanout.y_min_usage) = u;
    }
    f->finish();
  }
  r.finish(also_valid);
  return lv;
}

}  // namespace

Architecture parse_architecture(std::string_view text, const std::string& file) {
  toml::table doc = parse_toml(text, file);
  return architecture_from_table(doc, file);
}

namespace {

ComputeUnit parse_compute(TomlReader c) {
  ComputeUnit u;
  u.name = c.opt_str("name").value_or("MAC");
  u.energy_pj = c.number("energy_pj");
  if (u.energy_pj < 0) c.fail("energy_pj", "must be >= 0");
  const double mhz = c.opt_number("frequency_mhz").value_or(1000);
  if (mhz <= 0) c.fail("frequency_mhz", "must be positive");
  u.frequency_hz = mhz * 1e6;
  c.finish();
  return u;
}

// Levels outermost first in the file, innermost first in the core.
std::vector<Level> parse_levels(TomlReader& r, bool required) {
  auto tables = r.tables("level");
  if (tables.empty() && required) r.fail("level", "missing: an architecture needs at least one [[level]]");
  std::vector<Level> levels;
  for (auto it = tables.rbegin(); it != tables.rend(); ++it) levels.push_back(parse_level(*it));
  for (size_t i = 0; i < levels.size(); ++i)
    for (size_t j = i + 1; j < levels.size(); ++j)
      if (levels[i].name == levels[j].name)
        throw InputError(r.where("level"), r.key_path("level"), "level name '" + levels[i].name + "' repeats");
  return levels;
}

void parse_vector(TomlReader& r, Core& core, bool outermost_allowed) {
  if (!r.has("vector")) return;
  TomlReader v = r.table("vector");
  VectorUnit vu;
  vu.name = v.opt_str("name").value_or("Vector");
  const std::string level = v.str("level");
  vu.level = core.level_index(level);
  if (vu.level < 0)
    v.fail("level", "no level '" + level + "'; expected the level the vector unit reads and writes" +
                        did_you_mean(level, [&] {
                          std::vector<std::string> names;
                          for (const Level& lv : core.levels) names.push_back(lv.name);
                          return names;
                        }()));
  if (!outermost_allowed && vu.level == static_cast<int>(core.levels.size()) - 1)
    v.fail("level", "the outermost level; expected an on-chip level");
  vu.lanes = v.integer("lanes");
  if (vu.lanes < 1) v.fail("lanes", "must be >= 1 (operations per cycle per instance of the level)");
  vu.energy_pj = v.number("energy_pj");
  if (vu.energy_pj < 0) v.fail("energy_pj", "must be >= 0");
  v.finish();
  core.vector = vu;
}

constexpr const char* kOpNames[] = {"mac", "elementwise", "pool", "softmax", "copy"};

OpMask parse_runs(TomlReader& r) {
  if (!r.has("runs")) return kAllOps;
  OpMask m = 0;
  for (const auto& s : r.str_list("runs")) {
    int k = 0;
    while (k < 5 && s != kOpNames[k]) ++k;
    if (k == 5)
      r.fail("runs", "unknown operator kind '" + s + "'; expected mac, elementwise, pool, softmax or copy" +
                         did_you_mean(s, {"mac", "elementwise", "pool", "softmax", "copy"}));
    m |= op_bit(static_cast<OpKind>(k));
  }
  if (m == 0) r.fail("runs", "the core can run nothing; expected at least one of mac, elementwise, pool, softmax, copy");
  return m;
}

double link_number(TomlReader& r, std::string_view key, bool required) {
  const double v = required ? r.number(key) : r.opt_number(key).value_or(0);
  if (v < 0 || (required && v == 0)) r.fail(key, fmt::format("value {} is not {}", v, required ? "positive" : ">= 0"));
  return v;
}

int node_ref(TomlReader& r, const Architecture& a, std::string_view key, const std::string& name) {
  const int n = a.node_index(name);
  if (n >= 0) return n;
  std::vector<std::string> names;
  for (int i = 0; i < a.node_count(); ++i) names.push_back(a.node_name(i));
  r.fail(key, "no core or memory named '" + name + "'; expected one of " + fmt::format("{}", fmt::join(names, ", ")) +
                  did_you_mean(name, names));
}

// The multi-core form: [offchip], [[memory]], [[core]] (with `count`), [[link]], [[bus]],
// [topology]. Every core's levels get the off-chip memory appended as their outermost level, so
// that each core can be mapped on as a single core is.
Architecture multi_core_from_table(TomlReader& r, Architecture a, const std::string& file,
                                   const std::vector<std::string>& also_valid) {
  const std::string where = r.key_path("").empty() ? file : file + ":" + r.key_path("");
  TomlReader o = r.table("offchip");
  auto ports = o.tables("port");
  MemoryNode dram{"", parse_level(o), true};
  dram.name = dram.level.name;
  for (auto& m : r.tables("memory")) {
    MemoryNode mem{"", parse_level(m), false};
    mem.name = mem.level.name;
    a.memories.push_back(std::move(mem));
  }
  for (auto& c : r.tables("core")) {
    Core core;
    const std::string name = c.str("name");
    if (name.empty()) c.fail("name", "core name is empty");
    const int64_t count = c.opt_integer("count").value_or(1);
    if (count < 1) c.fail("count", fmt::format("{} is not >= 1 (number of identical cores)", count));
    core.runs = parse_runs(c);
    core.legacy_output_fills = c.opt_bool("legacy_output_fills").value_or(false);
    core.compute = parse_compute(c.table("compute"));
    core.levels = parse_levels(c, false);
    for (const Level& lv : core.levels)
      if (lv.name == dram.name)
        c.fail("level", "level '" + lv.name + "' has the off-chip memory's name; a core lists its on-chip levels only");
    core.levels.push_back(dram.level);
    parse_vector(c, core, false);
    c.finish();
    for (int64_t i = 0; i < count; ++i) {
      Core ci = core;
      ci.name = c.has("count") ? name + std::to_string(i) : name;
      finalize(ci, file + ":core." + ci.name);
      a.cores.push_back(std::move(ci));
    }
  }
  a.offchip = static_cast<int>(a.cores.size());
  a.memories.insert(a.memories.begin(), std::move(dram));
  for (auto& p : ports) {
    Link l;
    l.name = a.memories[0].name + ".port" + std::to_string(&p - ports.data());
    l.bus = l.port = true;
    l.bits_per_cycle = link_number(p, "bits_per_cycle", true);
    l.pj_per_bit = link_number(p, "pj_per_bit", false);
    l.pj_per_cycle = link_number(p, "pj_per_cycle", false);
    l.nodes = {a.offchip};
    if (p.has("cores"))
      for (const auto& n : p.str_list("cores")) l.nodes.push_back(node_ref(p, a, "cores", n));
    else
      for (int i = 0; i < static_cast<int>(a.cores.size()); ++i) l.nodes.push_back(i);
    p.finish();
    a.links.push_back(std::move(l));
  }
  for (auto& k : r.tables("link")) {
    Link l;
    const int from = node_ref(k, a, "from", k.str("from")), to = node_ref(k, a, "to", k.str("to"));
    if (from == to) k.fail("to", "the link starts and ends at the same node");
    l.name = k.opt_str("name").value_or(a.node_name(from) + "->" + a.node_name(to));
    l.nodes = {from, to};
    l.bits_per_cycle = link_number(k, "bits_per_cycle", true);
    l.pj_per_bit = link_number(k, "pj_per_bit", false);
    l.pj_per_cycle = link_number(k, "pj_per_cycle", false);
    const bool both = k.opt_bool("bidirectional").value_or(false);
    k.finish();
    a.links.push_back(l);
    if (both) {
      l.name = k.has("name") ? l.name + ".back" : a.node_name(to) + "->" + a.node_name(from);
      l.nodes = {to, from};
      a.links.push_back(std::move(l));
    }
  }
  auto buses = r.tables("bus");
  for (auto& b : buses) {
    Link l;
    l.name = b.opt_str("name").value_or("bus" + std::to_string(&b - buses.data()));
    l.bus = true;
    for (const auto& n : b.str_list("nodes")) l.nodes.push_back(node_ref(b, a, "nodes", n));
    if (l.nodes.size() < 2) b.fail("nodes", "a bus needs at least two nodes");
    l.bits_per_cycle = link_number(b, "bits_per_cycle", true);
    l.pj_per_bit = link_number(b, "pj_per_bit", false);
    l.pj_per_cycle = link_number(b, "pj_per_cycle", false);
    b.finish();
    a.links.push_back(std::move(l));
  }
  if (auto t = r.opt_table("topology")) {
    TopologySpec spec;
    const std::string kind = t->str("kind");
    const std::vector<std::string> kinds{"bus", "mesh", "torus", "pairs"};
    const auto it = std::find(kinds.begin(), kinds.end(), kind);
    if (it == kinds.end())
      t->fail("kind", "unknown topology '" + kind + "'; expected bus, mesh, torus or pairs" + did_you_mean(kind, kinds));
    spec.kind = static_cast<TopologyKind>(it - kinds.begin());
    spec.name = kind;
    if (spec.kind == TopologyKind::Mesh || spec.kind == TopologyKind::Torus) {
      spec.rows = static_cast<int>(t->integer("rows"));
      spec.cols = static_cast<int>(t->integer("cols"));
    }
    spec.bits_per_cycle = link_number(*t, "link_bits_per_cycle", true);
    spec.pj_per_bit = link_number(*t, "link_pj_per_bit", false);
    spec.pj_per_cycle = link_number(*t, "link_pj_per_cycle", false);
    if (t->has("nodes"))
      for (const auto& n : t->str_list("nodes")) spec.nodes.push_back(node_ref(*t, a, "nodes", n));
    else
      for (int i = 0; i < static_cast<int>(a.cores.size()); ++i) spec.nodes.push_back(i);
    std::string tw = t->key_path("");  // "topology." (or "<study key>.topology.")
    if (!tw.empty() && tw.back() == '.') tw.pop_back();
    if (tw.empty()) tw = "topology";
    try {
      add_topology(a, spec, tw);
    } catch (const InputError& e) {
      throw InputError(t->where(""), e.key(), e.message());
    }
    t->finish();
  }
  r.finish(also_valid);
  try {
    finalize_system(a, "");
  } catch (const InputError& e) {
    throw InputError({file, 0, 0}, e.key().empty() ? e.key() : e.key().substr(1), e.message());
  }
  (void)where;
  return a;
}

}  // namespace

Architecture architecture_from_table(const toml::table& doc, const std::string& file, const std::string& key_path,
                                     const std::vector<std::string>& also_valid) {
  TomlReader r(doc, file, key_path);
  Architecture a;
  a.name = r.str("name");
  a.description = r.opt_str("description").value_or("");
  if (r.has("core")) return multi_core_from_table(r, std::move(a), file, also_valid);
  Core core;
  core.name = a.name;
  core.legacy_output_fills = r.opt_bool("legacy_output_fills").value_or(false);
  core.compute = parse_compute(r.table("compute"));
  core.levels = parse_levels(r, true);
  parse_vector(r, core, false);
  r.finish(also_valid);
  finalize(core, file);
  a.cores.push_back(std::move(core));
  return a;
}

std::vector<std::string> arch_preset_names() {
  std::vector<std::string> v;
  for (const auto& f : embedded_arch_presets()) v.emplace_back(f.name);
  return v;
}

Architecture load_architecture(const std::string& name_or_path) {
  for (const auto& f : embedded_arch_presets())
    if (f.name == name_or_path) return parse_architecture(f.text, "preset:" + name_or_path);
  if ((name_or_path.ends_with(".yaml") || name_or_path.ends_with(".yml")) && std::filesystem::exists(name_or_path))
    return load_stream_hardware(name_or_path);
  if (std::filesystem::exists(name_or_path)) {
    std::ifstream in(name_or_path);
    if (!in) throw InputError({name_or_path, 0, 0}, {}, "cannot open file for reading");
    std::stringstream ss;
    ss << in.rdbuf();
    return parse_architecture(ss.str(), name_or_path);
  }
  throw InputError({}, "arch",
                   "'" + name_or_path + "' is neither a preset nor a readable file; presets: " +
                       fmt::format("{}", fmt::join(arch_preset_names(), ", ")) +
                       did_you_mean(name_or_path, arch_preset_names()));
}

namespace {

std::string toml_string(std::string_view v) {
  std::string out = "\"";
  for (char c : v) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string roles_list(RoleMask m) {
  std::vector<std::string> r;
  for (TensorRole role : {TensorRole::Weight, TensorRole::Input, TensorRole::Output})
    if (m & role_bit(role)) r.push_back(toml_string(to_string(role)));
  return fmt::format("[{}]", fmt::join(r, ", "));
}

std::string names_list(const std::vector<std::string>& v) {
  std::vector<std::string> q;
  for (const auto& s : v) q.push_back(toml_string(s));
  return fmt::format("[{}]", fmt::join(q, ", "));
}

}  // namespace

namespace {

// One [[level]]-style table (header given), fields as parse_level reads them.
std::string level_toml(const Level& lv, std::string_view header) {
  std::string s = fmt::format("\n{}\nname = {}\n", header, toml_string(lv.name));
  if (lv.entries > 0) s += fmt::format("entries = {}\n", lv.entries);
  s += fmt::format("word_bits = {}\n", lv.word_bits);
  if (lv.block_size != 1) s += fmt::format("block_size = {}\n", lv.block_size);
  if (lv.multiple_buffering != 1) s += fmt::format("multiple_buffering = {}\n", lv.multiple_buffering);
  if (lv.read_bandwidth > 0) s += fmt::format("read_bandwidth = {}\n", lv.read_bandwidth);
  if (lv.write_bandwidth > 0) s += fmt::format("write_bandwidth = {}\n", lv.write_bandwidth);
  if (lv.shared_bandwidth > 0) s += fmt::format("shared_bandwidth = {}\n", lv.shared_bandwidth);
  if (lv.fit)
    s += fmt::format("energy_fit = {{ base_pj = {}, per_kb_pj = {} }}\n", lv.fit->base_pj, lv.fit->per_kb_pj);
  else if (lv.mlp)
    s += fmt::format("energy_mlp = {{ capacity_kb = [{}], energy_pj = [{}], hidden = [{}] }}  # {} pJ here\n",
                     fmt::join(lv.mlp->capacity_kb, ", "), fmt::join(lv.mlp->energy_pj, ", "),
                     fmt::join(lv.mlp->hidden, ", "), lv.read_pj);
  else
    s += fmt::format("read_pj = {}\nwrite_pj = {}\nupdate_pj = {}\n", lv.read_pj, lv.write_pj, lv.update_pj);
  s += fmt::format("keeps = {}\n", roles_list(lv.may_keep));
  if (lv.must_keep) s += fmt::format("must_keep = {}\n", roles_list(lv.must_keep));
  if (lv.backs_intermediates) s += "backs_intermediates = true\n";
  if (lv.fanout.total() > 1) {
    std::vector<std::string> parts;
    if (lv.fanout.x > 1) parts.push_back(fmt::format("x = {}", lv.fanout.x));
    if (lv.fanout.y > 1) parts.push_back(fmt::format("y = {}", lv.fanout.y));
    if (!lv.fanout.x_ranks.empty()) parts.push_back("x_ranks = " + names_list(lv.fanout.x_ranks));
    if (!lv.fanout.y_ranks.empty()) parts.push_back("y_ranks = " + names_list(lv.fanout.y_ranks));
    if (lv.fanout.x_reuse) parts.push_back("x_reuse = " + roles_list(lv.fanout.x_reuse));
    if (lv.fanout.y_reuse) parts.push_back("y_reuse = " + roles_list(lv.fanout.y_reuse));
    if (lv.fanout.x_multicast != kAllRoles) parts.push_back("x_multicast = " + roles_list(lv.fanout.x_multicast));
    if (lv.fanout.y_multicast != kAllRoles) parts.push_back("y_multicast = " + roles_list(lv.fanout.y_multicast));
    if (lv.fanout.x_min_usage > 0) parts.push_back(fmt::format("x_min_usage = {}", lv.fanout.x_min_usage));
    if (lv.fanout.y_min_usage > 0) parts.push_back(fmt::format("y_min_usage = {}", lv.fanout.y_min_usage));
    s += fmt::format("fanout = {{ {} }}\n", fmt::join(parts, ", "));
  }
  return s;
}

std::string compute_toml(const ComputeUnit& c, std::string_view header) {
  return fmt::format("\n{}\nname = {}\nenergy_pj = {}\nfrequency_mhz = {}\n", header, toml_string(c.name),
                     c.energy_pj, c.frequency_hz / 1e6);
}

std::string vector_toml(const Core& c, std::string_view header) {
  if (!c.vector) return {};
  return fmt::format("\n{}\nname = {}\nlevel = {}\nlanes = {}\nenergy_pj = {}\n", header, toml_string(c.vector->name),
                     toml_string(c.levels[c.vector->level].name), c.vector->lanes, c.vector->energy_pj);
}

std::string runs_list(OpMask m) {
  std::vector<std::string> r;
  for (int k = 0; k < 5; ++k)
    if (m & op_bit(static_cast<OpKind>(k))) r.push_back(toml_string(kOpNames[k]));
  return fmt::format("[{}]", fmt::join(r, ", "));
}

std::string link_energy(const Link& l) {
  std::string s;
  if (l.pj_per_bit > 0) s += fmt::format("pj_per_bit = {}\n", l.pj_per_bit);
  if (l.pj_per_cycle > 0) s += fmt::format("pj_per_cycle = {}\n", l.pj_per_cycle);
  return s;
}

std::string multi_core_toml(const Architecture& a) {
  std::string s = fmt::format("name = {}\n", toml_string(a.name));
  if (!a.description.empty()) s += fmt::format("description = {}\n", toml_string(a.description));
  s += level_toml(a.memories.at(static_cast<size_t>(a.offchip) - a.cores.size()).level, "[offchip]");
  for (const Link& l : a.links) {
    if (!l.port) continue;
    if (l.nodes[0] != a.offchip) throw InputError({}, "link." + l.name, "a port of a memory other than the off-chip one has no TOML form");
    std::vector<std::string> nodes;
    for (size_t i = 1; i < l.nodes.size(); ++i) nodes.push_back(a.node_name(l.nodes[i]));
    s += fmt::format("\n[[offchip.port]]\nbits_per_cycle = {}\ncores = {}\n", l.bits_per_cycle, names_list(nodes));
    s += link_energy(l);
  }
  for (size_t m = 0; m < a.memories.size(); ++m)
    if (!a.memories[m].offchip) s += level_toml(a.memories[m].level, "[[memory]]");
  for (const Core& c : a.cores) {
    s += fmt::format("\n[[core]]\nname = {}\nruns = {}\n", toml_string(c.name), runs_list(c.runs));
    if (c.legacy_output_fills) s += "legacy_output_fills = true\n";
    s += compute_toml(c.compute, "[core.compute]");
    for (int l = static_cast<int>(c.levels.size()) - 2; l >= 0; --l) s += level_toml(c.levels[l], "[[core.level]]");
    s += vector_toml(c, "[core.vector]");
  }
  for (const Link& l : a.links) {
    if (l.port) continue;
    if (l.bus) {
      std::vector<std::string> nodes;
      for (int n : l.nodes) nodes.push_back(a.node_name(n));
      s += fmt::format("\n[[bus]]\nname = {}\nnodes = {}\nbits_per_cycle = {}\n", toml_string(l.name), names_list(nodes),
                       l.bits_per_cycle);
    } else {
      s += fmt::format("\n[[link]]\nname = {}\nfrom = {}\nto = {}\nbits_per_cycle = {}\n", toml_string(l.name),
                       toml_string(a.node_name(l.nodes[0])), toml_string(a.node_name(l.nodes[1])), l.bits_per_cycle);
    }
    s += link_energy(l);
  }
  return s;
}

}  // namespace

std::string to_toml(const Architecture& a) {
  if (a.multi_core()) return multi_core_toml(a);
  if (a.cores.size() != 1) throw InputError({}, "architecture", "expected one core or a multi-core system");
  const Core& c = a.cores[0];
  std::string s = fmt::format("name = {}\n", toml_string(a.name));
  if (!a.description.empty()) s += fmt::format("description = {}\n", toml_string(a.description));
  if (c.legacy_output_fills) s += "legacy_output_fills = true\n";
  s += compute_toml(c.compute, "[compute]");
  for (int l = static_cast<int>(c.levels.size()) - 1; l >= 0; --l) s += level_toml(c.levels[l], "[[level]]");
  s += vector_toml(c, "[vector]");
  return s;
}

std::string describe(const Architecture& a) {
  std::string s = fmt::format("architecture {}", a.name);
  if (!a.description.empty()) s += " — " + a.description;
  s += '\n';
  for (const Core& c : a.cores) {
    s += fmt::format("core {}: {} x {} at {:.0f} MHz, {:.4g} pJ/op, {} compute instances\n", c.name,
                     c.compute.name, c.compute.instances, c.compute.frequency_hz / 1e6,
                     c.compute.energy_pj, c.compute.instances);
    if (c.runs != kAllOps) s += "  runs " + runs_list(c.runs) + "\n";
    if (c.vector)
      s += fmt::format("  vector {}: {} lanes under each {} ({} instances), {:.4g} pJ/op, for every Einsum that "
                       "is not a MAC\n",
                       c.vector->name, c.vector->lanes, c.levels[c.vector->level].name,
                       c.vector_core->compute.instances, c.vector->energy_pj);
    for (int l = static_cast<int>(c.levels.size()) - 1; l >= 0; --l) {
      const Level& lv = c.levels[l];
      std::string keeps;
      for (TensorRole r : {TensorRole::Weight, TensorRole::Input, TensorRole::Output})
        if (lv.may_keep & role_bit(r)) keeps += (keeps.empty() ? "" : ",") + std::string(to_string(r));
      s += fmt::format("  L{} {:<14} x{:<5} ", l, lv.name, lv.instances);
      s += lv.unbounded() ? fmt::format("{:>14}", "unbounded")
                          : fmt::format("{:>8} words ({:.4g} KiB)", lv.entries, lv.capacity_kb());
      s += fmt::format("  {}b  rd/wr/upd {:.4g}/{:.4g}/{:.4g} pJ", lv.word_bits, lv.read_pj,
                       lv.write_pj, lv.update_pj);
      if (lv.shared_bandwidth > 0) s += fmt::format("  bw {:.4g} w/cyc", lv.shared_bandwidth);
      if (lv.read_bandwidth > 0) s += fmt::format("  rd-bw {:.4g}", lv.read_bandwidth);
      if (lv.write_bandwidth > 0) s += fmt::format("  wr-bw {:.4g}", lv.write_bandwidth);
      s += "  keeps " + keeps;
      if (lv.fanout.total() > 1) {
        s += fmt::format("  fan-out {}x{}", lv.fanout.x, lv.fanout.y);
        if (!lv.fanout.x_ranks.empty()) s += fmt::format(" X:{}", fmt::join(lv.fanout.x_ranks, ","));
        if (!lv.fanout.y_ranks.empty()) s += fmt::format(" Y:{}", fmt::join(lv.fanout.y_ranks, ","));
      }
      s += '\n';
    }
  }
  if (!a.multi_core()) return s;
  for (const MemoryNode& m : a.memories)
    s += fmt::format("memory {}{}: {}, {} bits/word, rd/wr {:.4g}/{:.4g} pJ per word, {:.4g} words/cycle\n", m.name,
                     m.offchip ? " (off-chip)" : "",
                     m.level.unbounded() ? "unbounded" : fmt::format("{:.4g} KiB", m.level.capacity_kb()),
                     m.level.word_bits, m.level.read_pj, m.level.write_pj,
                     std::max({m.level.shared_bandwidth, m.level.read_bandwidth, m.level.write_bandwidth}));
  for (const Link& l : a.links) {
    std::vector<std::string> nodes;
    for (int n : l.nodes) nodes.push_back(a.node_name(n));
    s += fmt::format("{} {}: {} {}, {:.4g} bits/cycle, {:.4g} pJ/bit, {:.4g} pJ/cycle\n",
                     l.port ? "port" : l.bus ? "bus" : "link", l.name,
                     l.bus ? "between" : "from", fmt::join(nodes, l.bus ? ", " : " to "), l.bits_per_cycle,
                     l.pj_per_bit, l.pj_per_cycle);
  }
  size_t longest = 0;
  for (const auto& r : a.routes) longest = std::max(longest, r.size());
  s += fmt::format("{} nodes, {} links, longest path {} links\n", a.node_count(), a.links.size(), longest);
  return s;
}

}  // namespace mapfuse
