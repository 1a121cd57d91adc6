#include "engine/arch/arch_sweep.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>

namespace mapfuse {

const std::vector<std::string>& gemmini_parameter_keys() {
  static const std::vector<std::string> k = {"pe", "scratchpad_kib", "accumulator_kib"};
  return k;
}

const std::vector<std::string>& level_parameter_fields() {
  static const std::vector<std::string> f = {"entries",        "size_kb",         "fanout_x",         "fanout_y",
                                             "read_bandwidth", "write_bandwidth", "shared_bandwidth", "block_size"};
  return f;
}

namespace {

bool contains(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

// "<Level>.<field>" split at the last dot ("" level when there is none).
std::pair<std::string, std::string> split_key(const std::string& key) {
  const size_t dot = key.rfind('.');
  if (dot == std::string::npos) return {"", key};
  return {key.substr(0, dot), key.substr(dot + 1)};
}

[[noreturn]] void fail(const ArchParameter& p, const std::string& message) { throw InputError(p.where, p.key_path, message); }

int64_t positive_integer(const ArchParameter& p) {
  if (!(p.value > 0) || std::floor(p.value) != p.value || p.value > 1e15)
    fail(p, fmt::format("value {} is not a positive integer", p.value));
  return static_cast<int64_t>(p.value);
}

double positive_number(const ArchParameter& p) {
  if (!(p.value > 0) || !std::isfinite(p.value)) fail(p, fmt::format("value {} is not positive", p.value));
  return p.value;
}

Level& level_named(Core& c, const ArchParameter& p, const std::string& name) {
  const int i = c.level_index(name);
  if (i < 0) {
    std::vector<std::string> names;
    for (const Level& l : c.levels) names.push_back(l.name);
    fail(p, fmt::format("the architecture '{}' has no level '{}'; levels: {}{}", c.name, name, fmt::join(names, ", "),
                        did_you_mean(name, names)));
  }
  return c.levels[i];
}

// Capacity of `kib` KiB spread over the level's instances, in words per instance.
int64_t entries_per_instance(const ArchParameter& p, const Level& lv, double kib) {
  const double words = kib * 1024.0 * 8.0 / lv.word_bits / static_cast<double>(lv.instances);
  if (words < 1)
    fail(p, fmt::format("{} KiB over {} instances of {} leaves less than one {}-bit word per instance", kib, lv.instances,
                        lv.name, lv.word_bits));
  return static_cast<int64_t>(std::floor(words));
}

}  // namespace

std::string check_parameter_key(const std::string& key) {
  if (contains(gemmini_parameter_keys(), key)) return "";
  const auto [level, field] = split_key(key);
  std::vector<std::string> candidates = gemmini_parameter_keys();
  if (level.empty())
    return "unknown sweep key '" + key + "'; expected " + fmt::format("{}", fmt::join(gemmini_parameter_keys(), ", ")) +
           " or <Level>.<field>" + did_you_mean(key, candidates);
  if (!contains(level_parameter_fields(), field))
    return "unknown architecture field '" + field + "' in sweep key '" + key + "'; expected one of " +
           fmt::format("{}", fmt::join(level_parameter_fields(), ", ")) + did_you_mean(field, level_parameter_fields());
  return "";
}

std::string parameter_tag(const std::string& key) {
  if (key == "pe") return "pe";
  if (key == "scratchpad_kib") return "sp";
  if (key == "accumulator_kib") return "acc";
  std::string t;
  for (char ch : key) t += ch == '.' ? '_' : static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return t;
}

Architecture apply_parameters(const Architecture& base, const std::vector<ArchParameter>& params) {
  Architecture a = base;
  if (a.cores.size() != 1) {
    if (params.empty()) return a;
    fail(params.front(), "only single-core architectures can be swept");
  }
  Core& c = a.cores[0];
  for (const ArchParameter& p : params)
    if (std::string why = check_parameter_key(p.key); !why.empty()) fail(p, why);

  // Phase 1: fan-outs (they decide instance counts, which the capacities of phase 2 divide by).
  const ArchParameter* pe = nullptr;
  int64_t acc_total_words = 0;
  for (const ArchParameter& p : params) {
    if (p.key == "pe") {
      const int64_t n = positive_integer(p);
      Level& sp = level_named(c, p, "Scratchpad");
      Level& acc = level_named(c, p, "Accumulator");
      acc_total_words = acc.entries * acc.instances;  // kept unless accumulator_kib is swept
      sp.fanout.x = n;
      acc.fanout.y = n;
      sp.shared_bandwidth = 2.0 * static_cast<double>(n);  // DOSA's GemminiConfig: pe_dim * 2
      pe = &p;
    } else if (p.key.ends_with(".fanout_x") || p.key.ends_with(".fanout_y")) {
      const auto [level, field] = split_key(p.key);
      Level& lv = level_named(c, p, level);
      (field == "fanout_x" ? lv.fanout.x : lv.fanout.y) = positive_integer(p);
    }
  }
  finalize(c, a.name);

  // Phase 2: capacities and bandwidths.
  bool acc_set = false;
  for (const ArchParameter& p : params) {
    if (p.key == "scratchpad_kib") {
      Level& sp = level_named(c, p, "Scratchpad");
      sp.entries = entries_per_instance(p, sp, positive_number(p));
    } else if (p.key == "accumulator_kib") {
      Level& acc = level_named(c, p, "Accumulator");
      acc.entries = entries_per_instance(p, acc, positive_number(p));
      acc_set = true;
    } else if (p.key != "pe") {
      const auto [level, field] = split_key(p.key);
      Level& lv = level_named(c, p, level);
      if (field == "entries") lv.entries = positive_integer(p);
      else if (field == "size_kb") lv.entries = entries_per_instance(p, lv, positive_number(p) * static_cast<double>(lv.instances));
      else if (field == "read_bandwidth") lv.read_bandwidth = positive_number(p);
      else if (field == "write_bandwidth") lv.write_bandwidth = positive_number(p);
      else if (field == "shared_bandwidth") lv.shared_bandwidth = positive_number(p);
      else if (field == "block_size") lv.block_size = static_cast<int>(positive_integer(p));
    }
  }
  if (pe && !acc_set) {
    Level& acc = level_named(c, *pe, "Accumulator");
    if (acc_total_words > 0) {
      if (acc_total_words < acc.instances)
        fail(*pe, fmt::format("the accumulator's {} words cannot be spread over {} columns", acc_total_words, acc.instances));
      acc.entries = acc_total_words / acc.instances;
    }
  }
  finalize(c, a.name);
  return a;
}

}  // namespace mapfuse
