#include "partitioners/study.hpp"

#include <cmath>
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "engine/arch/arch_sweep.hpp"
#include "engine/arch/arch_toml.hpp"
#include "engine/cost/fusion_group.hpp"
#include "engine/search/get/gnn/dataset.hpp"
#include "engine/search/get/partition.hpp"
#include "engine/workload/tiles.hpp"
#include "engine/common/error.hpp"
#include "engine/common/toml_reader.hpp"

namespace mapfuse {
namespace {

SourceLocation location(const std::string& file, const toml::node& n) {
  return {file, static_cast<int>(n.source().begin.line), static_cast<int>(n.source().begin.column)};
}

// The axes of `[architecture.sweep]`, in the order written. Keys are parameter keys; a dotted key
// `Scratchpad.size_kb = [...]` (a nested table in TOML) and a quoted "Scratchpad.size_kb" are the
// same axis.
std::vector<SweepAxis> parse_sweep(const toml::table& sweep, const std::string& file, const std::string& path) {
  std::vector<SweepAxis> axes;
  auto add_axis = [&](const std::string& key, const toml::node& node, const toml::node& key_node) {
    SweepAxis ax;
    ax.key = key;
    ax.key_path = path + "." + key;
    ax.where = location(file, key_node);
    if (std::string why = check_parameter_key(key); !why.empty()) throw InputError(ax.where, ax.key_path, why);
    const toml::array* arr = node.as_array();
    if (!arr) throw InputError(ax.where, ax.key_path, "expected an array of positive numbers (the axis' values)");
    if (arr->empty()) throw InputError(ax.where, ax.key_path, "empty sweep axis: the study would run nothing");
    for (const toml::node& v : *arr) {
      const SourceLocation at = location(file, v).line > 0 ? location(file, v) : ax.where;
      if (!v.is_number()) throw InputError(at, ax.key_path, "expected an array of positive numbers");
      const double x = *v.value<double>();
      if (!(x > 0)) throw InputError(at, ax.key_path, fmt::format("value {} is not positive", x));
      if (std::find(ax.values.begin(), ax.values.end(), x) != ax.values.end())
        throw InputError(at, ax.key_path, fmt::format("value {} repeats", x));
      ax.values.push_back(x);
    }
    for (const SweepAxis& other : axes)
      if (other.key == ax.key) throw InputError(ax.where, ax.key_path, "the axis is given twice");
    axes.push_back(std::move(ax));
  };
  for (const auto& [k, v] : sweep) {
    const std::string key(k.str());
    if (const toml::table* t = v.as_table()) {  // Level.field = [...]
      for (const auto& [k2, v2] : *t) add_axis(key + "." + std::string(k2.str()), v2, v2);
    } else {
      add_axis(key, v, v);
    }
  }
  if (axes.empty()) throw InputError(location(file, sweep), path, "empty sweep: it has no axes");
  std::stable_sort(axes.begin(), axes.end(), [](const SweepAxis& a, const SweepAxis& b) {
    return std::pair(a.where.line, a.where.column) < std::pair(b.where.line, b.where.column);
  });
  return axes;
}

// The product of the axes, the last axis varying fastest.
std::vector<ArchitecturePoint> enumerate_points(const std::string& prefix, const std::vector<SweepAxis>& axes) {
  std::vector<ArchitecturePoint> points(1);
  points[0].name = prefix;
  for (const SweepAxis& ax : axes) {
    std::vector<ArchitecturePoint> next;
    for (const ArchitecturePoint& p : points)
      for (double v : ax.values) {
        ArchitecturePoint q = p;
        q.name += fmt::format("_{}{}", parameter_tag(ax.key), v);
        q.params.emplace_back(ax.key, v);
        next.push_back(std::move(q));
      }
    points = std::move(next);
  }
  return points;
}

// Layer names that the constraint file's [[constraint]] tables name with `layer = ...`.
std::vector<std::string> constrained_layers(const std::string& path) {
  const toml::table doc = parse_toml_file(path);
  std::vector<std::string> out;
  if (const toml::array* cs = doc["constraint"].as_array())
    for (const toml::node& c : *cs)
      if (const toml::table* t = c.as_table())
        if (auto layer = (*t)["layer"].value<std::string>()) out.push_back(*layer);
  return out;
}

bool groupable_name(const std::string& n) { return n.find_first_of(",{}") == std::string::npos; }

// A key that takes one value or a list: `buffer_kb = 128` or `buffer_kb = [128, 256]`.
std::vector<std::string> strings(TomlReader& r, const toml::table& raw, const char* key, std::vector<std::string> def) {
  if (!r.has(key)) return def;
  std::vector<std::string> v = raw[key].is_string() ? std::vector<std::string>{r.str(key)} : r.str_list(key);
  if (v.empty()) r.fail(key, "empty: the study would run nothing");
  std::set<std::string> seen;
  for (const std::string& x : v)
    if (!seen.insert(x).second) r.fail(key, "'" + x + "' is listed twice");
  return v;
}

std::vector<double> numbers(TomlReader& r, const toml::table& raw, const char* key) {
  std::vector<double> v = raw[key].is_number() ? std::vector<double>{r.number(key)} : r.number_list(key);
  if (v.empty()) r.fail(key, r.has(key) ? "empty: the study would run nothing" : "missing");
  return v;
}

// An engine name check (scheme, search, split, line buffer) re-thrown at the study's key.
template <class F>
void check_name(TomlReader& r, const char* key, const std::string& value, F&& parse) {
  try {
    (void)parse(value);
  } catch (const InputError& e) {
    r.fail(key, e.message());
  }
}

StudyGet parse_get(TomlReader& g, const toml::table& raw) {
  StudyGet e;
  e.networks = strings(g, raw, "networks", {});
  if (e.networks.empty()) g.fail("networks", "missing: list the networks to partition (ONNX files or names of shared/data/get/onnx)");
  for (const std::string& n : e.networks)
    if (n.empty() || n.find_first_of(" \t{},") != std::string::npos)
      g.fail("networks", "'" + n + "' cannot name a network in unit labels (no spaces, commas or braces)");
  e.schemes = strings(g, raw, "schemes", e.schemes);
  for (const std::string& x : e.schemes) check_name(g, "schemes", x, fusion_scheme_from_string);
  e.buffer_kb = numbers(g, raw, "buffer_kb");
  for (double b : e.buffer_kb)
    if (!(b > 0) || !std::isfinite(b)) g.fail("buffer_kb", fmt::format("{} is not a positive buffer size in KB", b));
  e.searches = strings(g, raw, "searches", e.searches);
  for (const std::string& x : e.searches) check_name(g, "searches", x, get::partition_mode_from_string);
  e.splits = strings(g, raw, "splits", e.splits);
  for (const std::string& x : e.splits) check_name(g, "splits", x, get::split_kind_from_string);
  if (g.has("budget")) {
    e.budgets.clear();
    for (double b : numbers(g, raw, "budget")) {
      if (b != std::floor(b) || b < 1) g.fail("budget", fmt::format("{} is not a plan budget (an integer >= 1)", b));
      e.budgets.push_back(static_cast<int64_t>(b));
    }
  }
  if (g.has("seeds")) {
    e.seeds.clear();
    for (double x : numbers(g, raw, "seeds")) {
      if (x != std::floor(x) || x < 0) g.fail("seeds", "expected an array of non-negative integers");
      e.seeds.push_back(static_cast<uint64_t>(x));
    }
  }
  auto positive = [&](const char* key, int def) {
    const int64_t v = g.opt_integer(key).value_or(def);
    if (v < 1 || v > 1'000'000) g.fail(key, "must be a positive integer");
    return static_cast<int>(v);
  };
  e.population = positive("population", e.population);
  e.max_depth = static_cast<int>(g.opt_integer("max_depth").value_or(e.max_depth));
  if (e.max_depth < 0) g.fail("max_depth", "must be >= 0");
  e.max_category3 = positive("max_category3", e.max_category3);
  e.bytes_per_element = positive("bytes_per_element", e.bytes_per_element);
  e.kb_bytes = g.opt_integer("kb_bytes").value_or(e.kb_bytes);
  if (e.kb_bytes != 1024 && e.kb_bytes != 1000) g.fail("kb_bytes", "expected 1024 (binary, the default) or 1000 (decimal)");
  e.occlusion_fraction = g.opt_number("occlusion_fraction").value_or(e.occlusion_fraction);
  if (!(e.occlusion_fraction > 0 && e.occlusion_fraction <= 1)) g.fail("occlusion_fraction", "must be in (0, 1]");
  e.line_buffer = g.opt_str("line_buffer").value_or(e.line_buffer);
  check_name(g, "line_buffer", e.line_buffer, line_buffer_form_from_string);
  e.max_states = g.opt_integer("max_states").value_or(0);
  if (e.max_states < 0) g.fail("max_states", "must be >= 0 (0 = no limit)");
  e.time_limit_s = g.opt_number("time_limit_s").value_or(e.time_limit_s);
  if (!(e.time_limit_s >= 0) || !std::isfinite(e.time_limit_s)) g.fail("time_limit_s", "must be >= 0 seconds (0 = none)");
  e.assume_monotone = g.opt_bool("assume_monotone").value_or(false);
  g.finish();
  return e;
}

StudyGetDataset parse_get_dataset(TomlReader& g, const toml::table& raw) {
  StudyGetDataset e;
  e.schemes = strings(g, raw, "schemes", e.schemes);
  if (e.schemes.empty()) g.fail("schemes", "missing: lbdf, brr or both");
  for (const std::string& x : e.schemes) check_name(g, "schemes", x, fusion_scheme_from_string);
  e.networks = strings(g, raw, "networks", {});
  for (const std::string& n : e.networks)
    if (n.empty() || n.find_first_of(" \t{},;") != std::string::npos)
      g.fail("networks", "'" + n + "' cannot name a network in unit labels (no spaces, commas, semicolons or braces)");
  e.groups = g.opt_integer("groups").value_or(0);
  if (e.groups < 0 || e.groups > 10'000'000) g.fail("groups", "must be >= 0 (0: the scheme's default, LBDF 400, BRR 700)");
  const int64_t nodes = g.opt_integer("max_group_nodes").value_or(e.max_group_nodes);
  if (nodes < 2 || nodes > 100'000) g.fail("max_group_nodes", "must be an integer >= 2");
  e.max_group_nodes = static_cast<int>(nodes);
  const int64_t seed = g.opt_integer("seed").value_or(1);
  if (seed < 0) g.fail("seed", "must be a non-negative integer");
  e.seed = static_cast<uint64_t>(seed);
  const int64_t shards = g.opt_integer("shards").value_or(1);
  if (shards < 1 || shards > 10'000) g.fail("shards", "must be an integer in [1, 10000]");
  e.shards = static_cast<int>(shards);
  g.finish();
  return e;
}

StudySchedule parse_schedule(TomlReader& g, const toml::table& raw, const std::filesystem::path& base) {
  StudySchedule e;
  auto resolve = [&](const std::string& v) {
    if (v.empty() || v == "greedy") return v;
    const std::filesystem::path p = base / v;
    return std::filesystem::exists(p) && !std::filesystem::path(v).is_absolute() ? p.string() : v;
  };
  e.workloads = strings(g, raw, "workloads", {});
  if (e.workloads.empty()) g.fail("workloads", "missing: list the workloads to schedule (ONNX files or workload specs)");
  for (std::string& w : e.workloads) w = resolve(w);
  e.architectures = strings(g, raw, "architectures", {});
  if (e.architectures.empty()) g.fail("architectures", "missing: list multi-core architectures (presets or TOML files)");
  for (std::string& a : e.architectures) a = resolve(a);
  e.modes = strings(g, raw, "modes", e.modes);
  for (const std::string& m : e.modes)
    if (m != "fused" && m != "lbl") g.fail("modes", "unknown mode '" + m + "'; expected fused or lbl" + did_you_mean(m, {"fused", "lbl"}));
  e.allocation = g.opt_str("allocation").value_or(e.allocation);
  if (e.allocation != "ga" && e.allocation != "waco") e.allocation = resolve(e.allocation);
  if (e.allocation != "greedy" && !e.searched() && !std::filesystem::is_regular_file(e.allocation))
    g.fail("allocation", "cannot read allocation file '" + e.allocation + "'; expected greedy, ga, waco or an allocation file" +
                             did_you_mean(e.allocation, {"greedy", "ga", "waco"}));
  // Each search's knobs; a knob of another method is an error rather than silently unused.
  auto only_for = [&](const char* key, const char* method) {
    if (g.has(key) && e.allocation != method)
      g.fail(key, fmt::format("a knob of allocation = \"{}\" (this entry's allocation is '{}')", method, e.allocation));
  };
  for (const char* key : {"generations", "population"}) only_for(key, "ga");
  for (const char* key : {"max_parallelism", "time_limit", "max_nodes"}) only_for(key, "waco");
  auto integer = [&](const char* key, int def, int64_t lo) {
    const int64_t v = g.opt_integer(key).value_or(def);
    if (v < lo || v > 1'000'000) g.fail(key, fmt::format("must be an integer from {} to 1000000", lo));
    return int(v);
  };
  e.generations = integer("generations", e.generations, 0);
  e.population = integer("population", e.population, 2);
  e.max_parallelism = integer("max_parallelism", e.max_parallelism, 0);
  e.time_limit_s = g.opt_number("time_limit").value_or(e.time_limit_s);
  if (!(e.time_limit_s > 0) || !std::isfinite(e.time_limit_s)) g.fail("time_limit", "must be a positive number of seconds");
  e.max_nodes = g.opt_integer("max_nodes").value_or(0);
  if (e.max_nodes < 0) g.fail("max_nodes", "must be an integer >= 0 (CBC's branch-and-bound nodes per stack; 0 = no limit)");
  if (g.has("seeds")) {
    if (!e.searched())
      g.fail("seeds", "only a searched allocation (ga, waco) takes seeds; '" + e.allocation + "' is deterministic");
    e.seeds.clear();
    for (double x : numbers(g, raw, "seeds")) {
      if (x != std::floor(x) || x < 0 || x > 2147483647) g.fail("seeds", "expected an array of non-negative integers");
      if (std::find(e.seeds.begin(), e.seeds.end(), uint64_t(x)) != e.seeds.end())
        g.fail("seeds", fmt::format("seed {} is listed twice", x));
      e.seeds.push_back(static_cast<uint64_t>(x));
    }
  }
  e.method = g.opt_str("method").value_or(schedule_method(e));
  if (e.method.empty() || e.method.find_first_of(" \t/") != std::string::npos)
    g.fail("method", "'" + e.method + "' cannot name a method in unit labels (no spaces or slashes)");
  e.stacks_swept = g.has("stacks") && raw["stacks"].is_array();
  e.stacks = strings(g, raw, "stacks", e.stacks);
  for (const std::string& v : e.stacks) check_name(g, "stacks", v, [](const std::string& x) { return parse_stack_spec(x); });
  e.granularity = g.opt_str("granularity").value_or(e.granularity);
  e.tile_costs = resolve(g.opt_str("tile_costs").value_or(""));
  if (!e.tile_costs.empty() && !std::filesystem::exists(e.tile_costs))
    g.fail("tile_costs", "cannot read '" + e.tile_costs + "' (a tile-cost table or a Stream dump folder; omit it for mapfuse's mapper)");
  e.semantics = g.opt_str("semantics").value_or(e.semantics);
  if (e.semantics != "stream" && e.semantics != "mapfuse")
    g.fail("semantics", "unknown semantics '" + e.semantics + "'; expected stream or mapfuse" +
                            did_you_mean(e.semantics, {"stream", "mapfuse"}));
  e.fold_unary = g.opt_bool("fold_unary").value_or(false);
  e.mapper_gap = g.opt_number("mapper_gap").value_or(0.0);
  if (!(e.mapper_gap >= 0) || !std::isfinite(e.mapper_gap))
    g.fail("mapper_gap", "must be a finite fraction >= 0 (0 = exact per-tile mapping)");
  e.mapper_work = g.opt_integer("mapper_work").value_or(0);
  if (e.mapper_work < 0) g.fail("mapper_work", "must be an integer >= 0 (0 = no limit: exact per-tile mapping)");
  g.finish();
  return e;
}

}  // namespace

Study parse_study(const std::string& text, const std::string& file, bool load_architectures) {
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
  std::vector<TomlReader> arch_readers = r.tables("architecture");
  std::map<std::string, std::string> point_owner;  // point name -> key path of its [[architecture]]
  for (size_t i = 0; i < arch_readers.size(); ++i) {
    TomlReader& a = arch_readers[i];
    const toml::table& raw = *doc["architecture"].as_array()->get(i)->as_table();
    const std::string path = a.key_path("");
    const std::string entry = path.substr(0, path.size() - 1);  // "architecture[i]"
    StudyArchitecture sa;
    const bool is_inline = !a.has("spec");
    if (!is_inline) {
      sa.spec = a.str("spec");
      // A preset name stays a name; a relative path is taken relative to the study.
      if (sa.spec.find('/') != std::string::npos || sa.spec.ends_with(".toml"))
        if (!std::filesystem::path(sa.spec).is_absolute()) sa.spec = (base / sa.spec).string();
      sa.name = a.opt_str("name").value_or(std::filesystem::path(sa.spec).stem().string());
    } else {
      if (!a.has("level") && !a.has("compute"))
        a.fail("spec", "missing: give a preset or file (spec = ...) or an inline architecture (name, [compute], [[level]])");
      sa.name = a.str("name");
    }
    if (sa.name.empty() || sa.name.find_first_of(" \t/{},") != std::string::npos)
      a.fail(a.has("name") ? "name" : "spec", "'" + sa.name + "' cannot name architecture points (no spaces, '/', ',' or braces)");
    if (auto c = a.opt_str("constraints")) sa.constraints = std::filesystem::path(*c).is_absolute() ? *c : (base / *c).string();
    if (a.has("sweep")) {
      (void)a.opt_table("sweep");  // marks the key read; parse_sweep reads it in source order
      sa.sweep = parse_sweep(*raw["sweep"].as_table(), file, entry + ".sweep");
    }
    a.finish(is_inline ? std::vector<std::string>{"compute", "level", "description", "legacy_output_fills"}
                       : std::vector<std::string>{});
    sa.points = enumerate_points(sa.name, sa.sweep);
    for (const ArchitecturePoint& p : sa.points) {
      auto [it, fresh] = point_owner.emplace(p.name, entry);
      if (!fresh)
        a.fail(a.has("name") ? "name" : "spec", "architecture point '" + p.name + "' is also a point of " + it->second +
                                                    "; give this [[architecture]] its own name = \"...\"");
    }
    if (load_architectures) {
      Architecture arch;
      if (is_inline) {
        // The table itself (a copy would lose the source lines); the study's keys are read above.
        arch = architecture_from_table(raw, file, entry, {"constraints", "sweep"});
      } else {
        try {
          arch = load_architecture(sa.spec);
        } catch (const InputError& e) {
          if (!e.where().file.empty()) throw;  // an error inside the architecture file names it
          a.fail("spec", e.message());
        }
      }
      for (ArchitecturePoint& p : sa.points) {
        std::vector<ArchParameter> params;
        for (size_t k = 0; k < p.params.size(); ++k)
          params.push_back({p.params[k].first, p.params[k].second, sa.sweep[k].where, sa.sweep[k].key_path});
        Architecture point = apply_parameters(arch, params);
        if (!p.params.empty()) {
          std::vector<std::string> values;
          for (const auto& [k, v] : p.params) values.push_back(fmt::format("{} = {}", k, v));
          point.description = fmt::format("sweep point of {}: {}", arch.name, fmt::join(values, ", "));
        }
        point.name = p.name;
        for (Core& c : point.cores) c.name = p.name;
        p.toml = to_toml(point);
      }
      if (!sa.constraints.empty()) {
        if (!std::filesystem::is_regular_file(sa.constraints))
          a.fail("constraints", "cannot read constraint file '" + sa.constraints + "'");
        sa.constrained_layers = constrained_layers(sa.constraints);
      }
    }
    s.architectures.push_back(std::move(sa));
  }
  {
    std::vector<TomlReader> gets = r.tables("get");
    for (size_t i = 0; i < gets.size(); ++i) s.get.push_back(parse_get(gets[i], *doc["get"].as_array()->get(i)->as_table()));
  }
  {
    std::vector<TomlReader> entries = r.tables("schedule");
    for (size_t i = 0; i < entries.size(); ++i)
      s.schedule.push_back(parse_schedule(entries[i], *doc["schedule"].as_array()->get(i)->as_table(), base));
  }
  {
    std::vector<TomlReader> entries = r.tables("get_dataset");
    for (size_t i = 0; i < entries.size(); ++i)
      s.get_dataset.push_back(parse_get_dataset(entries[i], *doc["get_dataset"].as_array()->get(i)->as_table()));
  }
  if (!s.get_dataset.empty()) {
    for (const char* key : {"workload", "architecture", "method", "get", "schedule"})
      if (r.has(key))
        r.fail(key, "a dataset study ([[get_dataset]] entries) has no [[workload]], [[architecture]], [method], "
                    "[[get]] or [[schedule]]; put those in a study of their own");
    r.finish();
    return s;
  }
  if (!s.schedule.empty()) {
    // A schedule runs its own pipeline: no layer mapper, network optimizer or GET entry beside it.
    for (const char* key : {"workload", "architecture", "method", "get"})
      if (r.has(key))
        r.fail(key, "a schedule study ([[schedule]] entries) has no [[workload]], [[architecture]], [method] or [[get]]; "
                    "put those in a study of their own");
    r.finish();
    return s;
  }
  if (!s.get.empty()) {
    // GET-fusion partitions a network on its own buffer model: no architecture, workload or method.
    for (const char* key : {"workload", "architecture", "method"})
      if (r.has(key))
        r.fail(key, "a GET-fusion study ([[get]] entries) has no [[workload]], [[architecture]] or [method]; "
                    "put those in a study of their own");
    r.finish();
    return s;
  }
  if (s.workloads.empty()) r.fail("workload", "the study has no [[workload]]: nothing to run");
  if (s.architectures.empty()) r.fail("architecture", "the study has no [[architecture]]: nothing to run");
  if (auto m = r.opt_table("method")) {
    const std::vector<std::string> known = {"random", "exhaustive", "fadiff", "dosa", "ga", "bo",
                                            "ffm", "ffm_unfused", "ffm_sa", "ffm_ga", "ffm_random"};
    if (m->has("name") && doc["method"]["name"].is_array()) {
      s.method.names = m->str_list("name");
      if (s.method.names.empty()) m->fail("name", "empty: the study would run nothing");
    } else {
      s.method.names = {m->opt_str("name").value_or("random")};
    }
    std::set<std::string> seen;
    for (const std::string& n : s.method.names) {
      if (std::find(known.begin(), known.end(), n) == known.end())
        m->fail("name", "unknown method '" + n + "'; expected random or exhaustive (layer mappers), fadiff, dosa, ga, bo "
                        "(network optimizers), or ffm, ffm_unfused, ffm_sa, ffm_ga, ffm_random (fused mappers)" + did_you_mean(n, known));
      if (!seen.insert(n).second) m->fail("name", "method '" + n + "' listed twice");
    }
    // One study may compare families (layer by layer, network optimizers, fused mappers: the
    // main job's "how much does fusion save"), but one layer mapper at most: its units do not
    // name their method in the label.
    if (std::count_if(s.method.names.begin(), s.method.names.end(),
                      [](const std::string& n) { return !is_network_method(n) && !is_fused_method(n); }) > 1)
      m->fail("name", "random and exhaustive (layer mappers) cannot be listed together; list one of them, with any "
                      "network optimizers (fadiff, dosa, ga, bo) and fused mappers (ffm, ffm_unfused, ffm_sa, ffm_ga, ffm_random)");
    s.method.name = s.method.names.front();
    if (auto t = m->opt_number("time_budget_s")) {
      if (!(*t > 0) || !std::isfinite(*t)) m->fail("time_budget_s", "must be a positive number of seconds");
      s.method.time_budget_s = *t;
    }
    s.method.max_evaluations = m->opt_integer("max_evaluations").value_or(0);
    if (s.method.max_evaluations < 0) m->fail("max_evaluations", "must be >= 0 (0 = no evaluation budget)");
    s.method.objective = m->opt_str("objective").value_or("edp");
    if (s.method.objective != "edp" && s.method.objective != "energy" && s.method.objective != "cycles")
      m->fail("objective", "unknown objective '" + s.method.objective + "'; expected energy, cycles or edp" +
                               did_you_mean(s.method.objective, {"edp", "energy", "cycles"}));
    s.method.budget = m->opt_integer("budget").value_or(20000);
    if (s.method.budget <= 0) m->fail("budget", "must be positive");
    s.method.max_mappings = m->opt_integer("max_mappings").value_or(200'000'000);
    s.method.pareto = m->opt_bool("pareto").value_or(true);
    s.method.gap = m->opt_number("gap").value_or(0.0);
    if (!(s.method.gap >= 0) || !std::isfinite(s.method.gap)) m->fail("gap", "must be a finite fraction >= 0 (0 = exact)");
    if (s.method.gap > 0 && s.method.pareto)
      m->fail("gap", "applies to branch and bound only: set pareto = false (a front needs the whole mapspace)");
    s.method.context_slices = static_cast<int>(m->opt_integer("context_slices").value_or(1));
    if (s.method.context_slices < 1 || s.method.context_slices > 4096)
      m->fail("context_slices", "must be between 1 and 4096 (generation units per Einsum)");
    s.method.fusion = m->opt_bool("fusion").value_or(true);
    if (m->has("must_fuse") && doc["method"]["must_fuse"].is_string()) {
      if (m->str("must_fuse") != "others")
        m->fail("must_fuse", "expected a list of tensor names or \"others\" (every intermediate not in must_not_fuse)");
      s.method.must_fuse_others = true;
    } else {
      s.method.must_fuse = m->str_list("must_fuse");
    }
    s.method.must_not_fuse = m->str_list("must_not_fuse");
    s.method.max_memory_mib = m->opt_integer("max_memory_mib").value_or(0);
    if (s.method.max_memory_mib < 0) m->fail("max_memory_mib", "must be >= 0 (0 = no limit)");
    s.method.epsilon = m->opt_number("epsilon").value_or(0);
    if (!(s.method.epsilon >= 0) || !std::isfinite(s.method.epsilon)) m->fail("epsilon", "must be >= 0 (0 = one exact join)");
    s.method.group_identical = m->opt_bool("group_identical").value_or(true);
    s.method.all_orders = m->opt_bool("all_orders").value_or(false);
    s.method.nested_loops = m->opt_integer("nested_loops").value_or(0);
    s.method.resident = m->opt_bool("resident").value_or(true);
    if (s.method.nested_loops < 0 || s.method.nested_loops > 4)
      m->fail("nested_loops", "must be 0 (no nested fusion) to 4 loops per Einsum of a nested run");
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

std::string map_layer_label(const std::string& workload, const std::vector<std::string>& layers, const std::string& point,
                            const std::string& seed) {
  const std::string layer = layers.size() == 1 ? layers[0] : fmt::format("{{{}}}", fmt::join(layers, ","));
  return workload + "/" + layer + " @ " + point + (seed.empty() ? "" : " seed " + seed);
}

std::vector<UnitColumn> parameter_columns(const std::string& workload, const std::string& einsum, const ArchitecturePoint& point,
                                          const std::string& method, std::optional<uint64_t> seed, const std::string& objective) {
  std::vector<UnitColumn> c = {UnitColumn::of_text("workload", workload), UnitColumn::of_text("einsum", einsum),
                               UnitColumn::of_text("arch", point.name), UnitColumn::of_text("method", method)};
  if (seed) c.push_back(UnitColumn::of_integer("seed", static_cast<int64_t>(*seed)));
  c.push_back(UnitColumn::of_text("objective", objective));
  for (const auto& [key, value] : point.params) c.push_back(UnitColumn::of_real(key, value));
  return c;
}

bool is_network_method(const std::string& name) {
  return name == "fadiff" || name == "dosa" || name == "ga" || name == "bo";
}

bool is_fused_method(const std::string& name) {
  return name == "ffm" || name == "ffm_unfused" || name == "ffm_sa" || name == "ffm_ga" || name == "ffm_random";
}

std::string ffm_join_label(const std::string& workload, const std::string& point, const std::string& method) {
  return workload + " @ " + point + " " + method;
}

std::string get_label(const std::string& network, const std::string& scheme, double buffer_kb, const std::string& search,
                      const std::string& split, int64_t budget, uint64_t seed) {
  if (search == "exact") return fmt::format("get {} {} {}KB exact", network, scheme, buffer_kb);
  const std::string what = search == "sample" ? search : search + "+" + split;
  return fmt::format("get {} {} {}KB {} b{} seed {}", network, scheme, buffer_kb, what, budget, seed);
}

std::string network_label(const std::string& workload, const std::string& point, const std::string& method, uint64_t seed) {
  return workload + " @ " + point + " " + method + " seed " + std::to_string(seed);
}

namespace {

// A workload's name in labels: its spec, with batch and tokens appended when another workload of
// the study has the same spec (e.g. GPT-3 at several sequence lengths).
std::string workload_label(const Study& s, size_t wi) {
  const StudyWorkload& w = s.workloads[wi];
  for (size_t k = 0; k < s.workloads.size(); ++k)
    if (k != wi && s.workloads[k].spec == w.spec) return fmt::format("{}_b{}_t{}", w.spec, w.batch, w.tokens);
  return w.spec;
}

// One unit per (point, workload, method, seed): a network optimizer's run.
std::vector<WorkUnit> partition_network_study(const Study& s, const std::vector<std::string>& methods) {
  std::vector<WorkUnit> units;
  for (const StudyArchitecture& a : s.architectures)
    for (const ArchitecturePoint& point : a.points)
      for (size_t wi = 0; wi < s.workloads.size(); ++wi)
        for (const std::string& method : methods)
          for (uint64_t seed : s.method.seeds) {
            const StudyWorkload& w = s.workloads[wi];
            nlohmann::json p = {{"arch", point.name},   {"arch_toml", point.toml}, {"workload", w.spec},
                                {"batch", w.batch},     {"tokens", w.tokens},      {"method", method},
                                {"seed", seed},         {"time_budget_s", s.method.time_budget_s},
                                {"max_evaluations", s.method.max_evaluations}};
            WorkUnit u;
            u.kind = "optimize_network";
            u.payload = p.dump();
            u.id = stable_id(u.kind + "\n" + u.payload);
            u.label = network_label(workload_label(s, wi), point.name, method, seed);
            u.columns = parameter_columns(workload_label(s, wi), "", point, method, seed, "edp");  // the optimizers minimise EDP
            u.cost_hint = s.method.time_budget_s;
            units.push_back(std::move(u));
          }
  return units;
}

// Fused mappers: FFM's generation slices (one unit per (point, workload, Einsum, slice)) and one
// unit per (point, workload, baseline, seed).
std::vector<WorkUnit> partition_fused_study(const Study& s, const std::vector<std::string>& methods, LayerLister layers_of) {
  std::vector<WorkUnit> units;
  std::vector<std::vector<StudyLayer>> einsums;
  for (const StudyWorkload& w : s.workloads) einsums.push_back(layers_of(w));
  const StudyMethod& m = s.method;
  for (const StudyArchitecture& a : s.architectures)
    for (const ArchitecturePoint& point : a.points)
      for (size_t wi = 0; wi < s.workloads.size(); ++wi) {
        const StudyWorkload& w = s.workloads[wi];
        nlohmann::json base = {{"arch", point.name},         {"arch_toml", point.toml},
                               {"workload", w.spec},         {"batch", w.batch},
                               {"tokens", w.tokens},         {"objective", m.objective},
                               {"fusion", m.fusion},         {"must_fuse", m.must_fuse},
                               {"must_fuse_others", m.must_fuse_others}, {"must_not_fuse", m.must_not_fuse},
                               {"max_memory_mib", m.max_memory_mib}, {"workload_label", workload_label(s, wi)}, {"epsilon", m.epsilon},
                               {"all_orders", m.all_orders}};
        // Only when given, so that the units (and their ids) of studies without stay as they were.
        if (!a.constraints.empty()) base["constraints"] = a.constraints;
        if (m.nested_loops > 0) base["nested_loops"] = m.nested_loops;
        if (!m.resident) base["resident"] = false;
        for (const std::string& method : methods) {
          if (method == "ffm" || method == "ffm_unfused") {
            nlohmann::json exact = base;
            if (method == "ffm_unfused") {
              // Every Einsum alone, whatever the study fixes for "ffm": the layer-by-layer optimum
              // on the same Einsums, mapspace and cost model. "method" is in the payload (and so in
              // the join's key) only here, so that the "ffm" units keep their ids.
              exact["method"] = method;
              exact["fusion"] = false;
              exact["must_fuse"] = nlohmann::json::array();
              exact["must_fuse_others"] = false;
              exact["must_not_fuse"] = nlohmann::json::array();
              exact.erase("nested_loops");
              exact.erase("resident");
            }
            for (size_t i = 0; i < einsums[wi].size(); ++i)
              for (int slice = 0; slice < m.context_slices; ++slice) {
                nlohmann::json p = exact;
                p["einsum"] = i;
                p["einsum_name"] = einsums[wi][i].name;
                p["slice"] = slice;
                p["slices"] = m.context_slices;
                WorkUnit u;
                u.kind = "ffm_pmappings";
                u.payload = p.dump();
                u.id = stable_id(u.kind + "\n" + u.payload);
                u.label = fmt::format("{}/{} @ {} {} slice {}/{}", workload_label(s, wi), einsums[wi][i].name, point.name, method,
                                      slice, m.context_slices);
                u.columns = parameter_columns(workload_label(s, wi), einsums[wi][i].name, point, method, std::nullopt, m.objective);
                u.columns.push_back(UnitColumn::of_integer("einsum_index", static_cast<int64_t>(i)));
                u.columns.push_back(UnitColumn::of_integer("slice", slice));
                u.cost_hint = einsums[wi][i].work / m.context_slices;
                units.push_back(std::move(u));
              }
            continue;
          }
          for (uint64_t seed : m.seeds) {
            nlohmann::json p = base;
            p["method"] = method;
            p["seed"] = seed;
            p["time_budget_s"] = m.time_budget_s;
            p["max_evaluations"] = m.max_evaluations;
            WorkUnit u;
            u.kind = "ffm_baseline";
            u.payload = p.dump();
            u.id = stable_id(u.kind + "\n" + u.payload);
            u.label = network_label(workload_label(s, wi), point.name, method, seed);
            u.columns = parameter_columns(workload_label(s, wi), "", point, method, seed, m.objective);
            u.cost_hint = m.time_budget_s;
            units.push_back(std::move(u));
          }
        }
      }
  return units;
}

}  // namespace

namespace {
std::string file_stem(const std::string& x) {
  const std::filesystem::path p(x);
  return p.has_extension() ? p.stem().string() : x;
}
}  // namespace

std::string schedule_method(const StudySchedule& e) {
  if (e.allocation == "waco" && e.max_parallelism > 0) return fmt::format("waco_p{}", e.max_parallelism);
  if (e.allocation == "greedy" || e.searched()) return e.allocation;
  return file_stem(e.allocation);
}

std::string schedule_label(const std::string& workload, const std::string& mode, const std::string& arch,
                           const std::string& method, std::optional<uint64_t> seed) {
  std::string out = fmt::format("schedule {} {} @ {}", file_stem(workload), mode, file_stem(arch));
  if (seed) out += fmt::format(" {} seed {}", method, *seed);
  return out;
}

namespace {

// One unit per (entry, workload, architecture, mode, seed of a searched allocation); equal
// payloads run once.
std::vector<WorkUnit> partition_schedule_study(const Study& s) {
  std::vector<WorkUnit> units;
  std::set<std::string> ids;
  for (const StudySchedule& e : s.schedule)
    for (const std::string& w : e.workloads)
      for (const std::string& a : e.architectures)
        for (const std::string& mode : e.modes)
          // Cut points matter to fused units only: lbl runs once, with the first value.
          for (size_t si = 0; si < (mode == "fused" ? e.stacks.size() : 1); ++si)
          for (uint64_t seed : e.searched() ? e.seeds : std::vector<uint64_t>{0}) {
            const std::string& stacks = e.stacks[si];
            nlohmann::json p = {{"workload", w},           {"arch", a},
                                {"mode", mode},            {"allocation", e.allocation},
                                {"stacks", stacks},        {"granularity", e.granularity},
                                {"tile_costs", e.tile_costs}, {"semantics", e.semantics},
                                {"fold_unary", e.fold_unary}};
            // Only what changes the result enters the payload (and so the id): the searches' knobs.
            // Only with a gap, so that the units (and ids) of exact studies stay the same.
            if (e.mapper_gap > 0) p["mapper_gap"] = e.mapper_gap;
            if (e.mapper_work > 0) p["mapper_work"] = e.mapper_work;
            if (e.allocation == "ga") p["ga"] = {{"generations", e.generations}, {"population", e.population}, {"seed", seed}};
            if (e.allocation == "waco")
              p["waco"] = {{"max_parallelism", e.max_parallelism}, {"time_limit_s", e.time_limit_s}, {"seed", seed}};
            // Only when set, so that the units (and ids) of studies without it stay the same.
            if (e.allocation == "waco" && e.max_nodes > 0) p["waco"]["max_nodes"] = e.max_nodes;
            WorkUnit u;
            u.kind = "schedule";
            u.payload = p.dump();
            u.id = stable_id(u.kind + "\n" + u.payload);
            if (!ids.insert(u.id).second) continue;
            const std::optional<uint64_t> useed = e.searched() ? std::optional<uint64_t>(seed) : std::nullopt;
            const bool swept = e.stacks_swept && mode == "fused";
            u.label = schedule_label(w, swept ? "fused " + stacks : mode, a, e.method, useed);
            u.columns = {UnitColumn::of_text("workload", w), UnitColumn::of_text("arch", a),
                         UnitColumn::of_text("method", e.method), UnitColumn::of_text("mode", mode),
                         UnitColumn::of_text("allocation", e.allocation),
                         UnitColumn::of_text("tile_costs", e.tile_costs.empty() ? "mapper" : e.tile_costs)};
            if (useed) u.columns.push_back(UnitColumn::of_integer("seed", int64_t(seed)));
            if (e.stacks_swept) u.columns.push_back(UnitColumn::of_text("stacks", mode == "fused" ? stacks : "lbl"));
            // fused: one CT per row, more keys to map; a search costs every capable core.
            u.cost_hint = (mode == "fused" ? 10.0 : 1.0) * (e.searched() ? 4.0 : 1.0);
            units.push_back(std::move(u));
          }
  return units;
}

// One unit per (entry, network, scheme, buffer, search, split, budget, seed); exact units once per
// (network, scheme, buffer, options) and sample units once per split-free setting (equal payloads
// give equal ids, and repeats are dropped).
std::vector<WorkUnit> partition_get_study(const Study& s) {
  std::vector<WorkUnit> units;
  std::set<std::string> ids;
  for (const StudyGet& e : s.get)
    for (const std::string& net : e.networks)
      for (const std::string& scheme : e.schemes)
        for (double kb : e.buffer_kb)
          for (const std::string& search : e.searches) {
            const bool exact = search == "exact", sample = search == "sample";
            for (const std::string& split : exact || sample ? std::vector<std::string>{"none"} : e.splits)
              for (int64_t budget : exact ? std::vector<int64_t>{0} : e.budgets)
                for (uint64_t seed : exact ? std::vector<uint64_t>{0} : e.seeds) {
                  nlohmann::json p = {{"network", net},          {"scheme", scheme},
                                      {"buffer_kb", kb},         {"search", search},
                                      {"split", split},          {"budget", budget},
                                      {"seed", seed},            {"bytes_per_element", e.bytes_per_element},
                                      {"line_buffer", e.line_buffer}};
                  if (e.kb_bytes != 1024) p["kb_bytes"] = e.kb_bytes;  // absent: 1024, so older ids stay
                  if (exact) {
                    p["max_states"] = e.max_states;
                    p["time_limit_s"] = e.time_limit_s;
                    p["assume_monotone"] = e.assume_monotone;
                  } else if (!sample) {
                    p["population"] = e.population;
                    p["max_depth"] = e.max_depth;
                    p["max_category3"] = e.max_category3;
                    p["occlusion_fraction"] = e.occlusion_fraction;
                  }
                  WorkUnit u;
                  u.kind = "get_partition";
                  u.payload = p.dump();
                  u.id = stable_id(u.kind + "\n" + u.payload);
                  if (!ids.insert(u.id).second) continue;
                  u.label = get_label(net, scheme, kb, search, split, budget, seed);
                  u.columns = {UnitColumn::of_text("workload", net),
                               UnitColumn::of_text("method", split == "none" ? search : search + "+" + split),
                               UnitColumn::of_integer("seed", static_cast<int64_t>(seed)),
                               UnitColumn::of_text("objective", "dram"),
                               UnitColumn::of_text("scheme", scheme),
                               UnitColumn::of_real("buffer_kb", kb),
                               UnitColumn::of_integer("budget", budget)};
                  // Plans dominate the cost; repair by the exact 1-cut costs more per plan.
                  u.cost_hint = exact ? 1000.0 : static_cast<double>(budget) * (split == "cut" ? 4 : 1);
                  units.push_back(std::move(u));
                }
          }
  return units;
}

// One unit per (entry, scheme, network, shard); the payload holds the networks up to the unit's
// own, whose draws it replays.
std::vector<WorkUnit> partition_get_dataset_study(const Study& s) {
  std::vector<WorkUnit> units;
  std::set<std::string> ids;
  for (const StudyGetDataset& e : s.get_dataset)
    for (const std::string& scheme : e.schemes) {
      const std::vector<std::string> nets =
          e.networks.empty() ? get::gnn::training_networks(fusion_scheme_from_string(scheme)) : e.networks;
      for (size_t k = 0; k < nets.size(); ++k)
        for (int shard = 0; shard < e.shards; ++shard) {
          const std::vector<std::string> upto(nets.begin(), nets.begin() + static_cast<std::ptrdiff_t>(k) + 1);
          const nlohmann::json p = {{"scheme", scheme},        {"networks", upto},
                                    {"groups", e.groups},      {"max_group_nodes", e.max_group_nodes},
                                    {"seed", e.seed},          {"shard", shard},
                                    {"shards", e.shards}};
          WorkUnit u;
          u.kind = "get_dataset";
          u.payload = p.dump();
          u.id = stable_id(u.kind + "\n" + u.payload);
          if (!ids.insert(u.id).second) continue;
          u.label = fmt::format("get_dataset {} {} shard {}/{} seed {}", scheme, nets[k], shard, e.shards, e.seed);
          u.columns = {UnitColumn::of_text("workload", nets[k]), UnitColumn::of_text("method", "get_dataset"),
                       UnitColumn::of_integer("seed", static_cast<int64_t>(e.seed)), UnitColumn::of_text("scheme", scheme),
                       UnitColumn::of_integer("network_index", static_cast<int64_t>(k)),
                       UnitColumn::of_integer("shard", shard)};
          u.cost_hint = 1.0 + static_cast<double>(k);  // replaying the draws before its own network
          units.push_back(std::move(u));
        }
    }
  return units;
}

// Layer mappers: one unit per (point, workload layer or group of identical layers, seed).
std::vector<WorkUnit> partition_layer_study(const Study& s, const std::string& method, LayerLister layers_of) {
  const bool random = method == "random";
  const bool group = !random && s.method.group_identical;
  std::vector<std::vector<StudyLayer>> layers;
  for (const StudyWorkload& w : s.workloads) layers.push_back(layers_of(w));
  std::vector<WorkUnit> units;
  for (const StudyArchitecture& a : s.architectures) {
    const std::set<std::string> pinned(a.constrained_layers.begin(), a.constrained_layers.end());
    for (const ArchitecturePoint& point : a.points)
      for (size_t wi = 0; wi < s.workloads.size(); ++wi) {
        const StudyWorkload& w = s.workloads[wi];
        std::map<std::string, double> work_of;
        std::map<std::string, int64_t> index_of;  // position in the network
        for (const StudyLayer& l : layers[wi]) {
          work_of[l.name] = l.work;
          index_of.emplace(l.name, static_cast<int64_t>(index_of.size()));
        }
        // Groups of layers with one shape, in the order of their first layer.
        std::vector<std::vector<std::string>> groups;
        std::map<std::string, size_t> group_of_shape;
        for (const StudyLayer& l : layers[wi]) {
          if (!l.mac) continue;  // layer mappers map MAC Einsums
          const bool can_group = group && !l.shape.empty() && groupable_name(l.name) && !pinned.count(l.name);
          if (can_group) {
            auto [it, fresh] = group_of_shape.emplace(l.shape, groups.size());
            if (!fresh) {
              groups[it->second].push_back(l.name);
              continue;
            }
          }
          groups.push_back({l.name});
        }
        for (const std::vector<std::string>& g : groups)
          for (uint64_t seed : random ? s.method.seeds : std::vector<uint64_t>{0}) {
            nlohmann::json p = {{"arch", point.name},       {"arch_toml", point.toml},
                                {"constraints", a.constraints}, {"workload", w.spec},
                                {"batch", w.batch},          {"tokens", w.tokens},
                                {"layer", g.front()},        {"layers", g},
                                {"method", method},          {"objective", s.method.objective},
                                {"budget", s.method.budget}, {"seed", seed},
                                {"max_mappings", s.method.max_mappings}};
            // Only when off, so that the units (and their ids) of existing studies stay the same.
            if (!s.method.pareto) p["pareto"] = false;
            if (s.method.gap > 0) p["gap"] = s.method.gap;
            WorkUnit u;
            u.kind = "map_layer";
            u.payload = p.dump();
            u.id = stable_id(u.kind + "\n" + u.payload);
            u.label = map_layer_label(w.spec, g, point.name, random ? std::to_string(seed) : "");
            u.columns = parameter_columns(w.spec, fmt::format("{}", fmt::join(g, ",")), point, method,
                                          random ? std::optional<uint64_t>(seed) : std::nullopt, s.method.objective);
            u.columns.push_back(UnitColumn::of_integer("einsum_index", index_of.at(g.front())));
            u.columns.push_back(UnitColumn::of_integer("einsum_count", static_cast<int64_t>(g.size())));
            // Exhaustive units: the layer's mapspace size, so that the largest layers go first and
            // do not end up as the tail of the run.
            u.cost_hint = random ? static_cast<double>(s.method.budget) : work_of.at(g.front());
            units.push_back(std::move(u));
          }
      }
  }
  return units;
}

}  // namespace

std::vector<WorkUnit> partition_study(const Study& s, LayerLister layers_of) {
  if (!s.schedule.empty()) return partition_schedule_study(s);  // parse_study: nothing else beside them
  if (!s.get.empty()) return partition_get_study(s);  // parse_study: [[get]] studies hold nothing else
  if (!s.get_dataset.empty()) return partition_get_dataset_study(s);  // parse_study: nothing else beside them
  std::vector<std::string> network, fused;
  std::vector<WorkUnit> units;
  for (const std::string& n : s.method.names)
    if (is_network_method(n)) network.push_back(n);
    else if (is_fused_method(n)) fused.push_back(n);
    else units = partition_layer_study(s, n, layers_of);  // one at most (parse_study)
  if (!network.empty()) {
    std::vector<WorkUnit> more = partition_network_study(s, network);
    units.insert(units.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
  }
  if (!fused.empty()) {
    std::vector<WorkUnit> more = partition_fused_study(s, fused, layers_of);
    units.insert(units.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
  }
  return units;
}

}  // namespace mapfuse
