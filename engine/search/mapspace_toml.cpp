#include "engine/search/mapspace_toml.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "engine/common/error.hpp"
#include "engine/common/toml_reader.hpp"
#include "engine/mapping/mapping.hpp"

namespace mapfuse {
std::vector<ConstraintSpec> parse_constraints(std::string_view text, const std::string& file) {
  toml::table doc = parse_toml(text, file);
  std::vector<ConstraintSpec> out;
  const toml::array* arr = doc["constraint"].as_array();
  if (!doc.contains("constraint")) return out;
  if (!arr) {
    const auto& src = doc.get("constraint")->source();
    throw InputError({file, static_cast<int>(src.begin.line), 0}, "constraint",
                     "expected an array of tables ([[constraint]])");
  }
  int index = 0;
  for (const auto& node : *arr) {
    const std::string path = "constraint[" + std::to_string(index++) + "]";
    if (!node.is_table())
      throw InputError({file, static_cast<int>(node.source().begin.line), 0}, path, "expected a table");
    const toml::table& tbl = *node.as_table();
    TomlReader r(tbl, file, path);
    ConstraintSpec s;
    s.where = {file, static_cast<int>(tbl.source().begin.line), 0};
    s.level = r.str("level");
    s.layer = r.opt_str("layer").value_or("");
    if (r.has("temporal_order")) {
      s.has_order = true;
      s.order = r.str_list("temporal_order");
    } else {
      r.str_list("temporal_order");
    }
    for (const char* key : {"min_factors", "max_factors"}) {
      auto& dst = std::string_view(key) == "min_factors" ? s.min_factors : s.max_factors;
      if (auto t = r.opt_table(key)) {
        const toml::table* raw = tbl.get(key)->as_table();
        for (const auto& [k, v] : *raw) {
          const int64_t f = t->integer(k.str());
          if (f < 1) t->fail(k.str(), fmt::format("factor bound {} is not positive; expected >= 1", f));
          dst.emplace_back(std::string(k.str()), f);
        }
        t->finish();
      }
    }
    if (r.has("keep")) {
      s.has_keep = true;
      for (const std::string& role : r.str_list("keep")) {
        if (role == "input") s.keep.push_back(TensorRole::Input);
        else if (role == "weight") s.keep.push_back(TensorRole::Weight);
        else if (role == "output") s.keep.push_back(TensorRole::Output);
        else r.fail("keep", "unknown tensor role '" + role + "'; expected input, weight or output" +
                                did_you_mean(role, {"input", "weight", "output"}));
      }
    } else {
      r.str_list("keep");
    }
    s.has_x = r.has("spatial_x");
    s.spatial_x = r.str_list("spatial_x");
    s.has_y = r.has("spatial_y");
    s.spatial_y = r.str_list("spatial_y");
    r.finish();
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<ConstraintSpec> load_constraints(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError({path, 0, 0}, {}, "cannot open file for reading");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_constraints(ss.str(), path);
}

Mapspace make_mapspace(const std::vector<ConstraintSpec>& specs, const Einsum& e, const Core& core) {
  const Core& c = core_for(core, e);
  const int L = static_cast<int>(c.levels.size()), R = static_cast<int>(e.ranks.size());
  Mapspace m;
  m.levels.resize(L);
  std::vector<std::string> level_names, rank_names;
  for (const auto& lv : c.levels) level_names.push_back(lv.name);
  for (const auto& rk : e.ranks) rank_names.push_back(rk.name);
  std::vector<std::vector<const ConstraintSpec*>> limits(R);  // constraints that bound each rank
  for (const ConstraintSpec& s : specs) {
    if (!s.layer.empty() && s.layer != e.name) continue;
    const int l = c.level_index(s.level);
    if (l < 0)
      throw InputError(s.where, "constraint.level",
                       "unknown level '" + s.level + "'" + did_you_mean(s.level, level_names));
    const bool strict = !s.layer.empty();
    auto rank = [&](const std::string& name, const char* key) -> int {
      const int r = e.rank_index(name);
      if (r < 0 && strict)
        throw InputError(s.where, std::string("constraint.") + key,
                         "Einsum '" + e.name + "' has no rank '" + name + "'" + did_you_mean(name, rank_names));
      return r;
    };
    LevelConstraints& lc = m.levels[l];
    if (s.has_order) {
      std::vector<int> order;
      for (const std::string& n : s.order)
        if (int r = rank(n, "temporal_order"); r >= 0) order.push_back(r);
      lc.order = order;
      for (int r = 0; r < R; ++r)
        if (std::find(order.begin(), order.end(), r) == order.end()) limits[r].push_back(&s);
    }
    lc.min_factor.resize(R);
    lc.max_factor.resize(R);
    for (const auto& [n, f] : s.min_factors)
      if (int r = rank(n, "min_factors"); r >= 0) lc.min_factor[r] = f;
    for (const auto& [n, f] : s.max_factors)
      if (int r = rank(n, "max_factors"); r >= 0) {
        lc.max_factor[r] = f;
        limits[r].push_back(&s);
      }
    for (int r = 0; r < R; ++r)
      if (lc.min_factor[r] && lc.max_factor[r] && *lc.min_factor[r] > *lc.max_factor[r])
        throw InputError(s.where, "constraint.min_factors",
                         fmt::format("level {} asks rank {} for a factor of at least {} and at most {}: no factor "
                                     "satisfies both",
                                     s.level, e.ranks[static_cast<size_t>(r)].name, *lc.min_factor[r],
                                     *lc.max_factor[r]));
    if (s.has_keep) {
      TensorMask k = 0;
      for (size_t t = 0; t < e.tensors.size(); ++t)
        if (std::find(s.keep.begin(), s.keep.end(), e.tensors[t].role) != s.keep.end()) k |= static_cast<TensorMask>(1u << t);
      lc.keep = k;
    }
    auto axis = [&](const std::vector<std::string>& names, const char* key) {
      uint32_t mask = 0;
      for (const std::string& n : names)
        if (int r = rank(n, key); r >= 0) mask |= 1u << r;
      return mask;
    };
    if (s.has_x) lc.spatial_x = axis(s.spatial_x, "spatial_x");
    if (s.has_y) lc.spatial_y = axis(s.spatial_y, "spatial_y");
  }
  // Can every rank still reach its size? Upper bound of each level's temporal factor times the
  // spatial fan-outs that may carry the rank.
  for (int r = 0; r < R; ++r) {
    int64_t most = 1;
    bool unbounded = false;
    for (int l = 0; l < L; ++l) {
      const LevelConstraints& lc = m.levels[l];
      const bool listed = !lc.order || std::find(lc.order->begin(), lc.order->end(), r) != lc.order->end();
      if (listed) {
        if (lc.max_factor.size() > static_cast<size_t>(r) && lc.max_factor[r]) most *= *lc.max_factor[r];
        else unbounded = true;
      }
      const Fanout& f = c.levels[l].fanout;
      if (axis_accepts(f, LoopKind::SpatialX, e, r) && (!lc.spatial_x || (*lc.spatial_x >> r & 1))) most *= f.x;
      if (axis_accepts(f, LoopKind::SpatialY, e, r) && (!lc.spatial_y || (*lc.spatial_y >> r & 1))) most *= f.y;
      if (lc.min_factor.size() > static_cast<size_t>(r) && lc.min_factor[r] &&
          e.ranks[r].size % *lc.min_factor[r] != 0 && *lc.min_factor[r] > e.ranks[r].size)
        throw InputError({}, "constraint.min_factors",
                         fmt::format("rank {} has size {} but level {} asks for a factor of at least {}",
                                     e.ranks[r].name, e.ranks[r].size, c.levels[l].name, *lc.min_factor[r]));
    }
    if (!unbounded && most < e.ranks[r].size) {
      std::string who;
      for (const ConstraintSpec* s : limits[r])
        who += fmt::format("{}{}:{} (level {})", who.empty() ? "" : ", ", s->where.file, s->where.line, s->level);
      throw InputError({}, "constraint",
                       fmt::format("the constraints leave rank {} of '{}' at most {} of its {} iterations; "
                                   "conflicting: {}",
                                   e.ranks[r].name, e.name, most, e.ranks[r].size, who.empty() ? "fan-out limits" : who));
    }
  }
  return m;
}

}  // namespace mapfuse
