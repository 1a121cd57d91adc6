#include "engine/arch/architecture.hpp"

#include "engine/common/error.hpp"

namespace mapfuse {

int Core::level_index(std::string_view n) const {
  for (size_t i = 0; i < levels.size(); ++i)
    if (levels[i].name == n) return static_cast<int>(i);
  return -1;
}

bool Link::connects(int from, int to) const {
  if (from == to) return false;
  if (!bus) return nodes.size() == 2 && nodes[0] == from && nodes[1] == to;
  if (port && from != nodes[0] && to != nodes[0]) return false;
  bool f = false, t = false;
  for (int n : nodes) f |= n == from, t |= n == to;
  return f && t;
}

const std::string& Architecture::node_name(int node) const {
  const auto n = static_cast<size_t>(node);
  return n < cores.size() ? cores[n].name : memories.at(n - cores.size()).name;
}

int Architecture::node_index(std::string_view n) const {
  for (int i = 0; i < node_count(); ++i)
    if (node_name(i) == n) return i;
  return -1;
}

void finalize(Core& core, const std::string& where) {
  if (core.levels.empty()) throw InputError({}, where, "architecture has no memory levels");
  if (core.levels.size() > kMaxLevels)
    throw InputError({}, where, "architecture has " + std::to_string(core.levels.size()) +
                                    " levels; at most " + std::to_string(kMaxLevels) +
                                    " are supported");
  int64_t instances = 1;
  for (int l = static_cast<int>(core.levels.size()) - 1; l >= 0; --l) {
    Level& lv = core.levels[l];
    const std::string key = where + ".levels." + lv.name;
    if (lv.entries < 0) throw InputError({}, key, "capacity is negative; expected >= 0");
    if (lv.word_bits <= 0) throw InputError({}, key, "word_bits must be positive");
    if (lv.block_size <= 0) throw InputError({}, key, "block_size must be positive");
    if (lv.fanout.x <= 0 || lv.fanout.y <= 0)
      throw InputError({}, key, "spatial fan-out must be positive");
    if (lv.fit) {
      const double e = lv.fit->at(lv.capacity_kb());
      lv.read_pj = lv.write_pj = lv.update_pj = e;
    }
    if (lv.mlp) {
      if (lv.entries == 0) throw InputError({}, key, "energy_mlp needs a finite capacity");
      lv.read_pj = lv.write_pj = lv.update_pj = lv.mlp->at(lv.capacity_kb());
    }
    lv.instances = instances;
    instances *= lv.fanout.total();
  }
  core.compute.instances = instances;
  if (core.compute.frequency_hz <= 0)
    throw InputError({}, where + ".compute", "frequency must be positive");
  core.vector_core.reset();
  if (core.vector) {
    const VectorUnit& v = *core.vector;
    if (v.level < 0 || v.level >= static_cast<int>(core.levels.size()))
      throw InputError({}, where + ".vector", "level index out of range");
    if (v.lanes < 1) throw InputError({}, where + ".vector", "lanes must be >= 1");
    Core vc = core;
    vc.vector.reset();
    for (int l = 0; l < v.level; ++l) {
      vc.levels[l].may_keep = vc.levels[l].must_keep = 0;
      vc.levels[l].fanout = Fanout{};
    }
    Fanout lanes;
    lanes.x = v.lanes;
    lanes.x_min_usage = 1;  // the unit runs `lanes` operations a cycle whatever the mapping (AccelForge)
    lanes.x_multicast = 0;  // each operation reads its operands and writes its result itself
    vc.levels[v.level].fanout = lanes;
    vc.compute.name = v.name;
    vc.compute.energy_pj = v.energy_pj;
    finalize(vc, where + ".vector");
    core.vector_core = std::make_shared<const Core>(std::move(vc));
  }
}

}  // namespace mapfuse
