#include "engine/cost/coala.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory_resource>
#include <queue>

#include "engine/common/error.hpp"
#include "engine/cost/coala_links.hpp"
#include "engine/cost/coala_memory.hpp"

namespace mapfuse::coala {

Options Options::for_semantics(Semantics s) {
  Options o;
  if (s == Semantics::Mapfuse) {
    o.dedup_only_equal_start = false;
    o.sync_cores_at_layer_start = false;
    o.constant_priority_overcount = false;
    o.input_headstart = true;
  }
  return o;
}

const char* to_string(TransferCause c) {
  switch (c) {
    case TransferCause::OffChip: return "OFF_CHIP";
    case TransferCause::CoreToCore: return "CORE_TO_CORE";
    case TransferCause::Eviction: return "EVICTION";
    case TransferCause::SinkWriteBack: return "SINK_LAYER";
    case TransferCause::Block: return "BLOCK";
  }
  return "?";
}

double Energy::total() const {
  double s = 0;
  for (const auto& [name, v] : stream_breakdown()) s += v;
  return s;
}

std::vector<std::pair<std::string, double>> Energy::stream_breakdown() const {
  return {{"total_cn_onchip_energy", cn_onchip},
          {"total_cn_offchip_link_energy", link[0]},
          {"total_cn_offchip_memory_energy", memory[0] + cn_offchip},
          {"total_eviction_to_offchip_link_energy", link[2]},
          {"total_eviction_to_offchip_memory_energy", memory[2]},
          {"total_sink_layer_output_offchip_link_energy", link[3]},
          {"total_sink_layer_output_offchip_memory_energy", memory[3]},
          {"total_core_to_core_link_energy", link[1]},
          {"total_core_to_core_memory_energy", memory[1]}};
}

namespace {

constexpr double kNone = -1;

struct Location {
  int core;
  double stored_since, available_since;
};

struct SeenOnLink {
  int link;
  double start, end;
  int sender;
};

struct TensorState {
  std::vector<Location> at;                      // cores whose top memory holds it, in arrival order
  std::vector<std::pair<int, int64_t>> priority; // remaining uses per core
  std::vector<SeenOnLink> seen;                  // earlier link events carrying it
};

class Scheduler {
 public:
  Scheduler(const Problem& p, const Options& o) : p_(p), o_(o), pool_(&upstream_) {}

  Schedule run();

 private:
  const Problem& p_;
  const Options& o_;
  std::pmr::monotonic_buffer_resource upstream_;
  std::pmr::unsynchronized_pool_resource pool_;
  int dram_ = -1;
  std::vector<LinkCalendar> links_;
  std::vector<MemoryTimeline> memory_;
  std::vector<std::vector<int>> stored_;  // per core, insertion order
  std::vector<TensorState> ts_;
  std::vector<double> idle_;
  std::vector<int> used_cores_;
  std::vector<int> succ_begin_, succ_;  // CSR successors
  std::vector<int> pred_begin_, pred_;  // CSR predecessors
  Schedule out_;
  std::vector<Location> removal_scratch_;
  std::vector<int> victims_;
  std::vector<std::pair<const LinkCalendar*, double>> path_scratch_;

  void validate() const;
  void build_graph();
  bool contains(int tensor, int core) const;
  const Location* location(int tensor, int core) const;
  int best_sender(int tensor) const;
  void spawn(int tensor, int core, double stored, double available);
  void remove(int tensor, int core, double t);
  int64_t& priority_ref(int tensor, int core);
  int64_t instance_priority(int tensor, int core) const;
  int64_t total_priority(int tensor) const;
  double transfer(int tensor, int receiver, double earliest, const std::vector<int>& keep, int sender, double fraction,
                  TransferCause cause, bool cause_given, int tile);
  double removal(int tensor, int core, double t, double fraction, bool write_back, TransferCause cause, int tile);
  double make_space(int tensor, int core, double t, const std::vector<int>& keep, int tile);
  double clear_memories(int tile, double t);
  double block(int tile, double t);
  void check_for_removal(const std::vector<int>& needed, double t);
  double memory_energy(double bits, int sender, int receiver) const;
};

void Scheduler::validate() const {
  const size_t nc = p_.cores.size();
  int offchip = 0;
  for (const auto& c : p_.cores) offchip += c.offchip ? 1 : 0;
  if (offchip != 1)
    throw InputError({}, "cores", "exactly one off-chip (DRAM) core expected, found " + std::to_string(offchip));
  if (p_.paths.size() != nc * nc)
    throw InputError({}, "paths", "one path per ordered core pair expected (" + std::to_string(nc * nc) + "), got " +
                                      std::to_string(p_.paths.size()));
  for (size_t i = 0; i < p_.paths.size(); ++i) {
    for (int l : p_.paths[i])
      if (l < 0 || size_t(l) >= p_.links.size())
        throw InputError({}, "paths", "path " + std::to_string(i / nc) + "->" + std::to_string(i % nc) +
                                          " names link " + std::to_string(l) + ", which does not exist");
  }
  auto check_tensor = [&](int t, const std::string& what) {
    if (t < 0 || size_t(t) >= p_.tensors.size())
      throw InputError({}, what, "unknown tensor " + std::to_string(t));
  };
  for (size_t i = 0; i < p_.tiles.size(); ++i) {
    const auto& c = p_.tiles[i];
    const std::string key = "tiles[" + std::to_string(i) + "]";
    if (c.core < 0 || size_t(c.core) >= nc || p_.cores[size_t(c.core)].offchip)
      throw InputError({}, key, "core " + std::to_string(c.core) + " is not a compute core of the problem");
    check_tensor(c.output, key + ".output");
    for (int t : c.inputs) check_tensor(t, key + ".inputs");
    for (const auto& b : c.blocks) check_tensor(b.tensor, key + ".blocks");
    if (!(c.bw_fraction > 0 && c.bw_fraction <= 1))
      throw InputError({}, key, "bw_fraction must lie in (0, 1]");
    for (int t : c.inputs)
      if (p_.path(dram_, c.core).empty() && p_.tensors[size_t(t)].starts_offchip)
        throw InputError({}, key, "no path from the off-chip core to core " + std::to_string(c.core));
  }
  for (const auto& [a, b] : p_.edges)
    if (a < 0 || b < 0 || size_t(a) >= p_.tiles.size() || size_t(b) >= p_.tiles.size())
      throw InputError({}, "edges", "edge names an unknown tile");
}

void Scheduler::build_graph() {
  const size_t n = p_.tiles.size();
  succ_begin_.assign(n + 1, 0);
  pred_begin_.assign(n + 1, 0);
  for (const auto& [a, b] : p_.edges) {
    ++succ_begin_[size_t(a) + 1];
    ++pred_begin_[size_t(b) + 1];
  }
  for (size_t i = 0; i < n; ++i) {
    succ_begin_[i + 1] += succ_begin_[i];
    pred_begin_[i + 1] += pred_begin_[i];
  }
  succ_.resize(p_.edges.size());
  pred_.resize(p_.edges.size());
  std::vector<int> fs(succ_begin_.begin(), succ_begin_.end() - 1), fp(pred_begin_.begin(), pred_begin_.end() - 1);
  for (const auto& [a, b] : p_.edges) {
    succ_[size_t(fs[size_t(a)]++)] = b;
    pred_[size_t(fp[size_t(b)]++)] = a;
  }
  // Successors in (layer, sub) order, as Stream extends its candidates.
  for (size_t i = 0; i < n; ++i)
    std::sort(succ_.begin() + succ_begin_[i], succ_.begin() + succ_begin_[i + 1], [&](int x, int y) {
      const auto &a = p_.tiles[size_t(x)], &b = p_.tiles[size_t(y)];
      return std::pair(a.layer, a.sub) < std::pair(b.layer, b.sub);
    });
}

const Location* Scheduler::location(int tensor, int core) const {
  for (const auto& l : ts_[size_t(tensor)].at)
    if (l.core == core) return &l;
  return nullptr;
}

bool Scheduler::contains(int tensor, int core) const { return location(tensor, core) != nullptr; }

// Where the tensor has been available longest; ties to the lowest core index (Stream's instance order).
int Scheduler::best_sender(int tensor) const {
  const auto& at = ts_[size_t(tensor)].at;
  int best = -1;
  double best_t = 0;
  for (const auto& l : at)
    if (best < 0 || l.available_since < best_t || (l.available_since == best_t && l.core < best)) {
      best = l.core;
      best_t = l.available_since;
    }
  return best;
}

void Scheduler::spawn(int tensor, int core, double stored, double available) {
  if (contains(tensor, core)) return;
  ts_[size_t(tensor)].at.push_back({core, stored, available});
  stored_[size_t(core)].push_back(tensor);
  const double bits = p_.tensors[size_t(tensor)].bits;
  const double peak = memory_[size_t(core)].add(stored, bits);
  if (peak > p_.cores[size_t(core)].capacity_bits)
    throw InputError({}, "cores[" + std::to_string(core) + "]",
                     "top memory of core '" + p_.cores[size_t(core)].name + "' overflows (" + std::to_string(peak) +
                         " bits > capacity " + std::to_string(p_.cores[size_t(core)].capacity_bits) + ")");
}

void Scheduler::remove(int tensor, int core, double t) {
  auto& at = ts_[size_t(tensor)].at;
  auto it = std::find_if(at.begin(), at.end(), [&](const Location& l) { return l.core == core; });
  if (it == at.end()) return;
  at.erase(it);
  auto& st = stored_[size_t(core)];
  st.erase(std::find(st.begin(), st.end(), tensor));
  memory_[size_t(core)].add(t, -p_.tensors[size_t(tensor)].bits);
}

int64_t& Scheduler::priority_ref(int tensor, int core) {
  auto& pr = ts_[size_t(tensor)].priority;
  for (auto& [c, v] : pr)
    if (c == core) return v;
  pr.emplace_back(core, 0);
  return pr.back().second;
}

// Stream's Tensor.get_instance_priority: a core with no count of its own (the producer's) sees the
// counts of the cores that do not hold the tensor.
int64_t Scheduler::instance_priority(int tensor, int core) const {
  const auto& pr = ts_[size_t(tensor)].priority;
  for (const auto& [c, v] : pr)
    if (c == core) return v;
  int64_t s = 0;
  for (const auto& [c, v] : pr)
    if (!contains(tensor, c)) s += v;
  return s;
}

int64_t Scheduler::total_priority(int tensor) const {
  int64_t s = 0;
  for (const auto& [c, v] : ts_[size_t(tensor)].priority) s += v;
  return s;
}

double Scheduler::memory_energy(double bits, int sender, int receiver) const {
  const auto& s = p_.cores[size_t(sender)];
  const auto& r = p_.cores[size_t(receiver)];
  const double reads = std::ceil(bits / s.port_bw_min_bits);
  const double writes = std::ceil(bits / r.port_bw_min_bits);
  return s.read_energy_pj * (s.port_bw_min_bits / s.port_bw_max_bits) * reads +
         r.write_energy_pj * (r.port_bw_min_bits / r.port_bw_max_bits) * writes;
}

// Stream's schedule_tensor_transfer: from where the tensor has been longest (or `sender`), in the
// earliest window >= max(earliest, its availability there), after room was made on the receiver.
double Scheduler::transfer(int tensor, int receiver, double earliest, const std::vector<int>& keep, int sender,
                           double fraction, TransferCause cause, bool cause_given, int tile) {
  if (contains(tensor, receiver)) return earliest;
  const auto& spec = p_.tensors[size_t(tensor)];
  const int from0 = sender >= 0 ? sender : best_sender(tensor);
  if (from0 < 0)
    throw InputError({}, "tensors[" + std::to_string(tensor) + "]",
                     "tile " + std::to_string(tile) + " needs a tensor that exists nowhere yet (no producer scheduled)");
  const double available = location(tensor, from0)->available_since;
  double t = std::max(earliest, available);
  t = make_space(tensor, receiver, t, keep, tile);
  const int from = sender >= 0 ? sender : best_sender(tensor);
  const auto& path = p_.path(from, receiver);
  if (path.empty())
    throw InputError({}, "paths", "no path from core " + std::to_string(from) + " to core " + std::to_string(receiver));

  double slowest = std::numeric_limits<double>::infinity();
  path_scratch_.clear();
  for (int l : path) {
    const double bw = std::ceil(fraction * p_.links[size_t(l)].bandwidth_bits_per_cc);
    slowest = std::min(slowest, bw);
    path_scratch_.emplace_back(&links_[size_t(l)], bw);
  }
  const double duration = std::ceil(spec.bits / slowest);
  auto& seen = ts_[size_t(tensor)].seen;

  double start = kNone;
  bool reused = false;
  if (!o_.dedup_only_equal_start && duration > 0) {
    // Multicast: ride on an earlier window of this tensor on every link of the path.
    for (const auto& s : seen) {
      if (s.link != path.front() || s.sender != from || s.start < t || s.end - s.start < duration) continue;
      bool all = true;
      for (int l : path)
        all = all && std::any_of(seen.begin(), seen.end(),
                                 [&](const SeenOnLink& x) { return x.link == l && x.sender == from && x.start == s.start; });
      if (all && (start == kNone || s.start < start)) start = s.start;
    }
    reused = start != kNone;
  }
  if (!reused) start = earliest_on_all(path_scratch_, t, duration);
  const double end = start + duration;

  spawn(tensor, receiver, start, end);

  if (!cause_given) cause = from == dram_ ? TransferCause::OffChip : TransferCause::CoreToCore;
  Transfer tr{.tensor = tensor, .sender = from, .receiver = receiver, .tile = tile, .cause = cause,
              .start = start, .end = end, .bits = spec.bits, .bandwidth = slowest, .search_from = t};
  bool new_everywhere = true;
  for (size_t k = 0; k < path.size(); ++k) {
    const int l = path[k];
    const double bw = path_scratch_[k].second;
    bool is_new = end != start && !reused;
    if (is_new)
      for (const auto& s : seen)
        if (s.link == l && s.start == start) is_new = false;
    if (is_new) {
      links_[size_t(l)].reserve(start, end, bw);
      seen.push_back({l, start, end, from});
      tr.link_energy_pj += duration * p_.links[size_t(l)].energy_pj_per_cc * fraction;
    } else {
      new_everywhere = false;
    }
  }
  tr.occupies_links = new_everywhere;
  tr.memory_energy_pj = memory_energy(spec.bits, from, receiver);
  if (reused) {  // one read at the sender serves every receiver of a multicast
    const auto& s = p_.cores[size_t(from)];
    tr.memory_energy_pj -= s.read_energy_pj * (s.port_bw_min_bits / s.port_bw_max_bits) * std::ceil(spec.bits / s.port_bw_min_bits);
  }
  out_.energy.link[int(cause)] += tr.link_energy_pj;
  out_.energy.memory[int(cause)] += tr.memory_energy_pj;
  if (new_everywhere) out_.latency_cc = std::max(out_.latency_cc, end);
  out_.transfers.push_back(tr);

  // A copy on a core that neither produced it nor still needs it is dropped once sent on.
  if (from != dram_ && (spec.owner < 0 || from != p_.tiles[size_t(spec.owner)].core) &&
      instance_priority(tensor, from) == 0)
    remove(tensor, from, end);
  return end;
}

double Scheduler::removal(int tensor, int core, double t, double fraction, bool write_back, TransferCause cause,
                          int tile) {
  if (write_back && !contains(tensor, dram_)) {
    static const std::vector<int> none;
    const double end = transfer(tensor, dram_, 0, none, core, fraction, cause, true, tile);
    t = std::max(t, end);
  }
  remove(tensor, core, t);
  return t;
}

// Stream's make_space_for_tensor: wait until the future peak leaves room, else evict the stored
// tensors with the smallest remaining-uses x size first (written back to DRAM if not there).
double Scheduler::make_space(int tensor, int core, double t, const std::vector<int>& keep, int tile) {
  const auto& spec = p_.tensors[size_t(tensor)];
  const auto& cs = p_.cores[size_t(core)];
  if (spec.bits > cs.capacity_bits)
    throw InputError({}, "tensors[" + std::to_string(tensor) + "]",
                     "tensor of " + std::to_string(spec.bits) + " bits does not fit in core '" + cs.name + "' (" +
                         std::to_string(cs.capacity_bits) + " bits)");
  auto& mem = memory_[size_t(core)];
  const double fit = mem.earliest_fit(t, spec.bits, cs.capacity_bits);
  const double to_free = spec.bits - (cs.capacity_bits - mem.usage_at(fit));
  if (to_free > 0) {
    struct Cand {
      double importance, bits;
      int tensor;
    };
    std::vector<Cand> cands;
    for (int s : stored_[size_t(core)]) {
      if (location(s, core)->stored_since > fit) continue;
      if (std::find(keep.begin(), keep.end(), s) != keep.end()) continue;
      const double b = p_.tensors[size_t(s)].bits;
      cands.push_back({double(instance_priority(s, core)) * b, b, s});
    }
    std::stable_sort(cands.begin(), cands.end(), [](const Cand& a, const Cand& b) {
      return a.importance != b.importance ? a.importance < b.importance : a.bits < b.bits;
    });
    double freed = 0;
    size_t k = 0;
    while (k < cands.size() && freed < to_free) freed += cands[k++].bits;
    if (freed < to_free) {
      // What the CT holds besides: its inputs, which it needs at once and so cannot evict.
      double kept = 0;
      for (int s : keep)
        if (contains(s, core)) kept += p_.tensors[size_t(s)].bits;
      const auto& ct = p_.tiles[size_t(tile)];
      throw InputError({}, "cores[" + std::to_string(core) + "]",
                       "cannot free " + std::to_string(int64_t(to_free)) + " bits on core '" + cs.name + "' (" +
                           std::to_string(int64_t(cs.capacity_bits)) + " bits) for a tensor of " +
                           std::to_string(int64_t(spec.bits)) + " bits of CT " + std::to_string(tile) + " (layer " +
                           std::to_string(ct.layer) + ", sub " + std::to_string(ct.sub) + "): its " +
                           std::to_string(keep.size()) + " inputs hold " + std::to_string(int64_t(kept)) +
                           " bits there and the CT needs them all at once");
    }
    if (core == dram_) throw InputError({}, "cores", "evictions required in the off-chip memory; make it larger");
    for (size_t i = 0; i < k; ++i) {
      const int e = cands[i].tensor;
      const int owner = p_.tensors[size_t(e)].owner;
      const double frac = owner >= 0 ? p_.tiles[size_t(owner)].bw_fraction : 1.0;
      t = std::max(t, removal(e, core, t, frac, true, TransferCause::Eviction, tile));
    }
  }
  return std::max(fit, t);
}

double Scheduler::clear_memories(int tile, double t) {
  const auto& c = p_.tiles[size_t(tile)];
  // One pass per too-large operand, each re-reading what is stored at the advanced time (Stream).
  auto& victims = victims_;
  for (size_t pass = 0; pass < c.blocks.size(); ++pass) {
    victims.clear();
    for (int s : stored_[size_t(c.core)])
      if (location(s, c.core)->stored_since <= t && std::find(c.inputs.begin(), c.inputs.end(), s) == c.inputs.end())
        victims.push_back(s);
    for (int v : victims) t = removal(v, c.core, t, c.bw_fraction, true, TransferCause::Eviction, tile);
  }
  return t;
}

// Stream's block_offchip_links: the earliest window in which every link between the core and DRAM
// has the CT's summed DRAM bandwidths free for its runtime.
double Scheduler::block(int tile, double t) {
  const auto& c = p_.tiles[size_t(tile)];
  struct PerLink {
    int link;
    double sum;
  };
  std::vector<PerLink> per_link;
  auto add = [&](int link, double bw) {
    for (auto& pl : per_link)
      if (pl.link == link) {
        pl.sum += bw;
        return;
      }
    per_link.push_back({link, bw});
  };
  for (const auto& b : c.blocks)
    for (int l : b.to_offchip ? p_.path(c.core, dram_) : p_.path(dram_, c.core)) add(l, b.bandwidth_bits_per_cc);
  if (per_link.empty()) return t;
  path_scratch_.clear();
  for (const auto& pl : per_link) {
    const double cap = p_.links[size_t(pl.link)].bandwidth_bits_per_cc;
    double need = pl.sum;
    if (pl.sum > cap) {  // oversubscribed: each request scaled down for the search only
      need = 0;
      for (const auto& b : c.blocks) {
        const auto& path = b.to_offchip ? p_.path(c.core, dram_) : p_.path(dram_, c.core);
        if (std::find(path.begin(), path.end(), pl.link) != path.end())
          need += std::floor(cap / pl.sum * b.bandwidth_bits_per_cc);
      }
    }
    path_scratch_.emplace_back(&links_[size_t(pl.link)], need);
  }
  const double start = earliest_on_all(path_scratch_, t, c.runtime_cc);
  const double end = start + c.runtime_cc;
  for (const auto& pl : per_link)
    for (const auto& b : c.blocks) {
      const auto& path = b.to_offchip ? p_.path(c.core, dram_) : p_.path(dram_, c.core);
      if (std::find(path.begin(), path.end(), pl.link) == path.end()) continue;
      auto& seen = ts_[size_t(b.tensor)].seen;
      bool is_new = end != start;
      if (is_new)
        for (const auto& s : seen)
          if (s.link == pl.link && s.start == start) is_new = false;
      if (is_new) {
        links_[size_t(pl.link)].reserve(start, end, b.bandwidth_bits_per_cc);
        seen.push_back({pl.link, start, end, b.to_offchip ? c.core : dram_});
        out_.latency_cc = std::max(out_.latency_cc, end);
      }
      out_.transfers.push_back(Transfer{.tensor = b.tensor,
                                        .sender = b.to_offchip ? c.core : dram_,
                                        .receiver = b.to_offchip ? dram_ : c.core,
                                        .tile = tile,
                                        .cause = TransferCause::Block,
                                        .start = start,
                                        .end = end,
                                        .bits = p_.tensors[size_t(b.tensor)].bits,
                                        .bandwidth = b.bandwidth_bits_per_cc,
                                        .search_from = t,
                                        .occupies_links = is_new});
    }
  return start;
}

// Stream's check_for_removal: a tensor nobody needs any more leaves every memory; an output leaves a
// core when the last consumer that read it there has finished.
void Scheduler::check_for_removal(const std::vector<int>& needed, double t) {
  for (int x : needed) {
    if (total_priority(x) != 0) continue;
    const auto& spec = p_.tensors[size_t(x)];
    removal_scratch_.assign(ts_[size_t(x)].at.begin(), ts_[size_t(x)].at.end());
    for (const auto& l : removal_scratch_) {
      double when = t;
      if (spec.is_output && spec.owner >= 0) {
        const int o = spec.owner;
        double latest = kNone;
        bool any = false;
        for (int k = succ_begin_[size_t(o)]; k < succ_begin_[size_t(o) + 1]; ++k) {
          const int s = succ_[size_t(k)];
          if (p_.tiles[size_t(s)].layer == p_.tiles[size_t(o)].layer) continue;
          if (l.core != dram_ && p_.tiles[size_t(s)].core != l.core) continue;
          const double e = out_.tiles[size_t(s)].end;
          if (e >= 0 && (!any || e > latest)) {
            latest = e;
            any = true;
          }
        }
        if (any) when = latest;
      }
      remove(x, l.core, when);
    }
  }
}

Schedule Scheduler::run() {
  const size_t nc = p_.cores.size(), n = p_.tiles.size();
  for (size_t i = 0; i < nc; ++i)
    if (p_.cores[i].offchip) dram_ = int(i);
  validate();
  build_graph();
  links_.clear();
  links_.reserve(p_.links.size());
  for (const auto& l : p_.links) links_.emplace_back(l.bandwidth_bits_per_cc, &pool_);
  memory_.assign(nc, MemoryTimeline{});
  stored_.assign(nc, {});
  ts_.assign(p_.tensors.size(), {});
  out_ = Schedule{};
  out_.tiles.assign(n, ScheduledTile{});
  size_t expected_transfers = 0;
  for (const auto& c : p_.tiles) expected_transfers += c.inputs.size() + c.blocks.size();
  out_.transfers.reserve(expected_transfers + expected_transfers / 4);

  // Cores in use idle from 0; only they take part in synchronisations.
  std::vector<char> used(nc, 0);
  for (const auto& c : p_.tiles) used[size_t(c.core)] = 1;
  idle_.assign(nc, 0);
  for (size_t i = 0; i < nc; ++i)
    if (used[i]) used_cores_.push_back(int(i));

  // Remaining-use counts per core.
  for (size_t t = 0; t < p_.tensors.size(); ++t) {
    const auto& spec = p_.tensors[t];
    if (spec.is_output || !o_.constant_priority_overcount) {
      for (int c : spec.consumers) ++priority_ref(int(t), p_.tiles[size_t(c)].core);
    } else {
      for (int c : spec.consumers) priority_ref(int(t), p_.tiles[size_t(c)].core) = int64_t(spec.consumers.size());
    }
  }
  for (size_t t = 0; t < p_.tensors.size(); ++t)
    if (p_.tensors[t].starts_offchip) spawn(int(t), dram_, 0, 0);

  // Synchronisation points: first CT (sub 0) of a layer whose predecessor layers all come earlier.
  std::vector<char> sync(n, 0);
  if (o_.sync_cores_at_layer_start) {
    int max_layer = 0;
    for (const auto& c : p_.tiles) max_layer = std::max(max_layer, c.layer);
    std::vector<int64_t> layer_last(size_t(max_layer) + 1, std::numeric_limits<int64_t>::min());
    for (const auto& c : p_.tiles) layer_last[size_t(c.layer)] = std::max(layer_last[size_t(c.layer)], c.priority);
    for (size_t i = 0; i < n; ++i) {
      const auto& c = p_.tiles[i];
      if (c.sub != 0) continue;
      bool all = true;
      for (int k = pred_begin_[i]; k < pred_begin_[i + 1]; ++k) {
        const int pl = p_.tiles[size_t(pred_[size_t(k)])].layer;
        if (pl != c.layer && layer_last[size_t(pl)] >= c.priority) all = false;
      }
      sync[i] = all;
    }
  }

  std::vector<int> waiting(n);
  for (size_t i = 0; i < n; ++i) waiting[i] = pred_begin_[i + 1] - pred_begin_[i];
  using Item = std::pair<int64_t, int>;
  std::priority_queue<Item, std::vector<Item>, std::greater<>> ready;
  std::vector<double> preds_end(n, 0);
  for (size_t i = 0; i < n; ++i)
    if (waiting[i] == 0) ready.emplace(p_.tiles[i].priority, int(i));

  for (size_t pick = 0; pick < n; ++pick) {
    if (ready.empty()) throw InputError({}, "edges", "the tile graph has a cycle");
    const int id = ready.top().second;
    ready.pop();
    const auto& c = p_.tiles[size_t(id)];
    auto& st = out_.tiles[size_t(id)];
    st.pick = int(pick);
    st.preds_end = preds_end[size_t(id)];

    if (sync[size_t(id)]) {
      double m = 0;
      for (int k : used_cores_) m = std::max(m, idle_[size_t(k)]);
      for (int k : used_cores_) idle_[size_t(k)] = m;
    }
    const double idle = idle_[size_t(c.core)];
    double t = std::max(idle, st.preds_end);
    st.ready = t;
    if (!c.blocks.empty()) t = clear_memories(id, t);

    double earliest = idle;
    if (o_.input_headstart) {
      double headstart = 0;
      const auto& d = p_.cores[size_t(dram_)];
      for (int x : c.inputs) headstart += std::ceil(p_.tensors[size_t(x)].bits / (d.port_bw_max_bits * c.bw_fraction));
      earliest = idle - headstart;
    }
    for (int x : c.inputs)
      t = std::max(t, transfer(x, c.core, earliest, c.inputs, -1, c.bw_fraction, TransferCause::OffChip, false, id));
    st.after_inputs = t;

    const int out_core = c.output_offchip ? dram_ : c.core;
    t = make_space(c.output, out_core, t, c.inputs, id);
    if (!c.blocks.empty()) t = block(id, t);

    st.start = t;
    st.end = t + c.runtime_cc;
    spawn(c.output, out_core, st.start, st.end);
    idle_[size_t(c.core)] = st.end;
    out_.latency_cc = std::max(out_.latency_cc, st.end);
    out_.energy.cn_onchip += c.onchip_energy_pj;
    out_.energy.cn_offchip += c.offchip_energy_pj;

    for (int x : c.inputs) --priority_ref(x, c.core);
    check_for_removal(c.inputs, st.end);
    if (c.sink && !c.output_offchip)
      removal(c.output, c.core, st.end, c.bw_fraction, true, TransferCause::SinkWriteBack, id);

    for (int k = succ_begin_[size_t(id)]; k < succ_begin_[size_t(id) + 1]; ++k) {
      const int s = succ_[size_t(k)];
      if (--waiting[size_t(s)] == 0) {
        double m = 0;
        for (int q = pred_begin_[size_t(s)]; q < pred_begin_[size_t(s) + 1]; ++q)
          m = std::max(m, out_.tiles[size_t(pred_[size_t(q)])].end);
        preds_end[size_t(s)] = m;
        ready.emplace(p_.tiles[size_t(s)].priority, s);
      }
    }
  }
  out_.peak_memory_bits.resize(nc);
  for (size_t i = 0; i < nc; ++i) out_.peak_memory_bits[i] = memory_[i].peak();
  out_.memory_trace.resize(nc);
  for (size_t i = 0; i < nc; ++i) {
    auto& trace = out_.memory_trace[i];
    const auto& steps = memory_[i].steps();
    trace.reserve(steps.size());
    for (const auto& s : steps)
      if (trace.empty() || s.usage != trace.back().bits) trace.push_back({s.t, s.usage});
  }
  return std::move(out_);
}

}  // namespace

Schedule schedule(const Problem& problem, const Options& options) {
  Scheduler s(problem, options);
  return s.run();
}

}  // namespace mapfuse::coala
