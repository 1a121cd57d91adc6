#include "engine/cost/coala_arch.hpp"

#include <limits>
#include <set>

#include "engine/common/error.hpp"

namespace mapfuse::coala {
namespace {

double level_bits(const Level& lv) {
  if (lv.unbounded()) return std::numeric_limits<double>::max();
  return static_cast<double>(lv.entries) * lv.word_bits * static_cast<double>(lv.instances);
}

// Port width and energies of the level transfers read and write.
void set_port(CoreSpec& cs, const Level& lv) {
  const double bw_words = lv.read_bandwidth > 0 ? lv.read_bandwidth : lv.shared_bandwidth > 0 ? lv.shared_bandwidth : 1;
  const double words_per_access = bw_words * static_cast<double>(lv.instances);
  cs.port_bw_min_bits = lv.word_bits;
  cs.port_bw_max_bits = words_per_access * lv.word_bits;
  cs.read_energy_pj = lv.read_pj * words_per_access;
  cs.write_energy_pj = lv.write_pj * words_per_access;
}

}  // namespace

void set_hardware(Problem& p, const Architecture& a) {
  if (a.offchip < 0)
    throw InputError({}, "arch", "'" + a.name + "' has no off-chip memory; COALA needs a multi-core architecture");
  const int n = a.node_count();
  if (a.routes.size() != static_cast<size_t>(n) * static_cast<size_t>(n))
    throw InputError({}, "arch", "'" + a.name + "' has no routes (finalize_system was not run)");
  p.cores.clear();
  p.links.clear();
  p.paths.assign(a.routes.begin(), a.routes.end());
  for (const Core& c : a.cores) {
    CoreSpec cs;
    cs.name = c.name;
    const int top = static_cast<int>(c.levels.size()) - 2;  // levels.back() is the off-chip memory
    if (top < 0) throw InputError({}, "arch.core." + c.name, "the core has no on-chip level");
    std::set<int> tops;
    for (TensorRole r : {TensorRole::Input, TensorRole::Weight, TensorRole::Output})
      for (int l = top; l >= 0; --l)
        if (c.levels[l].may_keep & role_bit(r)) {
          tops.insert(l);
          break;
        }
    if (tops.empty()) tops.insert(top);
    for (int l : tops) cs.capacity_bits += level_bits(c.levels[l]);
    int act = *tops.rbegin();
    for (int l = top; l >= 0; --l)
      if (c.levels[l].may_keep & role_bit(TensorRole::Output)) {
        act = l;
        break;
      }
    set_port(cs, c.levels[act]);
    p.cores.push_back(std::move(cs));
  }
  for (int m = 0; m < static_cast<int>(a.memories.size()); ++m) {
    const MemoryNode& mem = a.memories[m];
    CoreSpec cs;
    cs.name = mem.name;
    cs.capacity_bits = level_bits(mem.level);
    set_port(cs, mem.level);
    cs.offchip = static_cast<int>(a.cores.size()) + m == a.offchip;
    p.cores.push_back(std::move(cs));
  }
  for (const Link& l : a.links)
    p.links.push_back({l.name, l.bits_per_cycle, l.pj_per_cycle + l.pj_per_bit * l.bits_per_cycle});
}

}  // namespace mapfuse::coala
