#include "cli/schedule_record.hpp"

namespace mapfuse::cli {

ScheduleRecord schedule_record(const std::string& name, const std::string& semantics, const std::string& source,
                               const coala::Problem& problem, const coala::Schedule& schedule) {
  ScheduleRecord r;
  r.name = name;
  r.semantics = semantics;
  r.source = source;
  r.latency_cc = schedule.latency_cc;
  r.energy_pj = schedule.energy.total();
  for (size_t i = 0; i < problem.cores.size(); ++i) {
    const auto& c = problem.cores[i];
    r.cores.push_back({c.name, c.capacity_bits, i < schedule.peak_memory_bits.size() ? schedule.peak_memory_bits[i] : 0.0,
                       c.offchip});
  }
  for (const auto& l : problem.links) r.links.push_back({l.name, l.bandwidth_bits_per_cc, l.energy_pj_per_cc});
  r.tiles.reserve(problem.tiles.size());
  for (size_t i = 0; i < problem.tiles.size(); ++i) {
    const auto& t = problem.tiles[i];
    const auto& s = schedule.tiles[i];
    r.tiles.push_back({t.layer, t.sub, t.core, s.pick, s.start, s.end});
  }
  r.transfers.reserve(schedule.transfers.size());
  for (const auto& t : schedule.transfers) {
    // A transfer rides on its sender-receiver path; a block holds the path between its core and DRAM.
    ScheduleRecord::Transfer x{t.tensor, t.sender, t.receiver, t.tile, coala::to_string(t.cause), {}, t.start, t.end,
                               t.bits, t.bandwidth, t.occupies_links, t.link_energy_pj, t.memory_energy_pj};
    for (int l : problem.path(t.sender, t.receiver)) x.links.push_back(l);
    r.transfers.push_back(std::move(x));
  }
  for (size_t c = 0; c < schedule.memory_trace.size(); ++c)
    for (const auto& s : schedule.memory_trace[c]) r.memory.push_back({int32_t(c), s.t, s.bits});
  for (const auto& [term, pj] : schedule.energy.stream_breakdown()) r.energy_breakdown.emplace_back(term, pj);
  return r;
}

}  // namespace mapfuse::cli
