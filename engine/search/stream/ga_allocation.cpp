#include "engine/search/stream/ga_allocation.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <map>
#include <random>
#include <string>

#include "engine/common/error.hpp"

namespace mapfuse {
namespace {

// Same too-large operands (which, and their DRAM bandwidths): the problem's inputs and blocks of
// the CT do not change between these two costs.
bool same_operands(const TileCost& a, const TileCost& b) {
  if (a.any_offchip() != b.any_offchip()) return false;
  if (!a.any_offchip()) return true;
  if (a.operands.size() != b.operands.size()) return false;
  for (size_t i = 0; i < a.operands.size(); ++i)
    if (a.operands[i].offchip != b.operands[i].offchip ||
        (a.operands[i].offchip && a.operands[i].dram_bits_per_cycle != b.operands[i].dram_bits_per_cycle))
      return false;
  return true;
}

}  // namespace

CandidateTiles candidate_tiles(const TileSet& ts, const std::vector<std::vector<int>>& layer_cores) {
  CandidateTiles c;
  for (const auto& l : layer_cores) c.slots = std::max(c.slots, int(l.size()));
  c.tiles = ts;
  const size_t n = ts.tiles.size();
  c.tiles.tiles.reserve(n * size_t(c.slots));
  c.cores.reserve(n * size_t(c.slots));
  for (int j = 0; j < c.slots; ++j)
    for (size_t t = 0; t < n; ++t) {
      if (j > 0) c.tiles.tiles.push_back(ts.tiles[t]);  // same ranges and accesses
      const auto& cores = layer_cores[size_t(ts.tiles[t].layer)];
      c.cores.push_back(cores[size_t(j) % cores.size()]);
    }
  return c;
}

AllocationEvaluator::AllocationEvaluator(const Workload& w, const TileGraph& g, const Architecture& arch,
                                         std::vector<std::vector<int>> layer_cores,
                                         std::vector<TileCost> candidate_costs, const ScheduleProblemOptions& popt,
                                         const coala::Options& opt)
    : w_(&w), g_(&g), arch_(&arch), layer_cores_(std::move(layer_cores)), costs_(std::move(candidate_costs)),
      popt_(popt), opt_(opt) {
  const TileSet& ts = g.tiles;
  const size_t n = ts.tiles.size();
  size_t slots = 0;
  if (layer_cores_.size() != w.einsums.size())
    throw InputError({}, "allocation", fmt::format("{} core lists for {} layers", layer_cores_.size(), w.einsums.size()));
  for (const auto& l : layer_cores_) slots = std::max(slots, l.size());
  if (costs_.size() != slots * n)
    throw InputError({}, "tile_costs",
                     fmt::format("{} candidate tile costs; expected {} ({} CTs x {} slots)", costs_.size(), slots * n, n, slots));
  const size_t C = arch.cores.size();
  slot_of_core_.assign(layer_cores_.size() * C, -1);
  for (size_t l = 0; l < layer_cores_.size(); ++l)
    for (size_t j = 0; j < layer_cores_[l].size(); ++j) {
      const int c = layer_cores_[l][j];
      if (c < 0 || size_t(c) >= C) throw InputError({}, "allocation", fmt::format("core {} out of range", c));
      slot_of_core_[l * C + size_t(c)] = int(j);
    }
  // One gene per (layer, group) of a layer with a choice, in layer order.
  std::vector<int> first_gene(w.einsums.size(), -1);
  for (size_t l = 0; l < w.einsums.size(); ++l) {
    if (layer_cores_[l].size() < 2) continue;
    first_gene[l] = int(genes_.size());
    for (int gr = 0; gr < ts.layer_groups[l]; ++gr) genes_.push_back({int(l), gr});
  }
  gene_of_tile_.assign(n, -1);
  same_blocks_.assign(n, 1);
  for (size_t t = 0; t < n; ++t) {
    const Tile& ct = ts.tiles[t];
    if (first_gene[size_t(ct.layer)] >= 0) gene_of_tile_[t] = first_gene[size_t(ct.layer)] + ct.group;
    const size_t k = layer_cores_[size_t(ct.layer)].size();
    for (size_t j = 1; j < k; ++j)
      if (!same_operands(costs_[t], costs_[j * n + t])) same_blocks_[t] = 0;
    all_same_blocks_ = all_same_blocks_ && same_blocks_[t];
  }
}

const TileCost& AllocationEvaluator::cost(int tile, int core) const {
  const size_t n = g_->tiles.tiles.size();
  const int l = g_->tiles.tiles[size_t(tile)].layer;
  const int j = slot_of_core_[size_t(l) * arch_->cores.size() + size_t(core)];
  if (j < 0)
    throw InputError({}, "allocation",
                     fmt::format("core '{}' cannot run layer '{}'", arch_->cores[size_t(core)].name, w_->einsums[size_t(l)].name));
  return costs_[size_t(j) * n + size_t(tile)];
}

std::vector<int> AllocationEvaluator::core_of_tile(std::span<const int> genome) const {
  if (genome.size() != genes_.size())
    throw InputError({}, "allocation", fmt::format("genome of {} genes; expected {}", genome.size(), genes_.size()));
  const TileSet& ts = g_->tiles;
  std::vector<int> out(ts.tiles.size());
  for (size_t t = 0; t < out.size(); ++t) {
    const int gene = gene_of_tile_[t];
    out[t] = gene < 0 ? layer_cores_[size_t(ts.tiles[t].layer)][0] : genome[size_t(gene)];
  }
  return out;
}

std::vector<int> AllocationEvaluator::genome_of(std::span<const int> cot) const {
  const TileSet& ts = g_->tiles;
  if (cot.size() != ts.tiles.size())
    throw InputError({}, "allocation", fmt::format("{} cores for {} CTs", cot.size(), ts.tiles.size()));
  std::vector<int> genome(genes_.size(), -1);
  for (size_t t = 0; t < cot.size(); ++t) {
    const int l = ts.tiles[t].layer;
    if (cot[t] < 0 || size_t(cot[t]) >= arch_->cores.size() ||
        slot_of_core_[size_t(l) * arch_->cores.size() + size_t(cot[t])] < 0)
      throw InputError({}, "allocation", fmt::format("CT {} of '{}': core {} cannot run it", t, w_->einsums[size_t(l)].name, cot[t]));
    const int gene = gene_of_tile_[t];
    if (gene < 0) continue;
    if (genome[size_t(gene)] >= 0 && genome[size_t(gene)] != cot[t])
      throw InputError({}, "allocation",
                       fmt::format("layer '{}', group {}: its CTs are on different cores", w_->einsums[size_t(l)].name,
                                   ts.tiles[t].group));
    genome[size_t(gene)] = cot[t];
  }
  return genome;
}

const coala::Schedule& AllocationEvaluator::evaluate(std::span<const int> genome) {
  const TileSet& ts = g_->tiles;
  const size_t n = ts.tiles.size();
  if (genome.size() != genes_.size())
    throw InputError({}, "allocation", fmt::format("genome of {} genes; expected {}", genome.size(), genes_.size()));
  cores_.resize(n);
  for (size_t t = 0; t < n; ++t) {
    const int gene = gene_of_tile_[t];
    cores_[t] = gene < 0 ? layer_cores_[size_t(ts.tiles[t].layer)][0] : genome[size_t(gene)];
  }
  // Rebuild only when the problem's inputs and blocks would change: never when every CT's
  // candidates agree on their too-large operands.
  bool rebuild = built_cores_.empty();
  if (!rebuild && !all_same_blocks_)
    for (size_t t = 0; t < n && !rebuild; ++t)
      rebuild = !same_blocks_[t] && cores_[t] != built_cores_[t] &&
                !same_operands(cost(int(t), cores_[t]), cost(int(t), built_cores_[t]));
  if (rebuild) {
    std::vector<TileCost> costs(n);
    for (size_t t = 0; t < n; ++t) costs[t] = cost(int(t), cores_[t]);
    problem_ = build_schedule_problem(*w_, *g_, *arch_, cores_, costs, popt_);
    built_cores_ = cores_;
    ++rebuilds_;
  } else {
    for (size_t t = 0; t < n; ++t) {
      const TileCost& c = cost(int(t), cores_[t]);
      coala::TileSpec& s = problem_.tiles[t];
      s.core = cores_[t];
      s.runtime_cc = c.latency_cc;
      s.onchip_energy_pj = c.onchip_energy_pj;
      s.offchip_energy_pj = c.offchip_energy_pj;
    }
  }
  ++evaluations_;
  schedule_ = coala::schedule(problem_, opt_);
  return schedule_;
}

std::vector<int> pareto_front(std::span<const GaPoint> pts) {
  std::vector<int> idx(pts.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = int(i);
  std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) {
    return pts[size_t(a)].latency_cc != pts[size_t(b)].latency_cc ? pts[size_t(a)].latency_cc < pts[size_t(b)].latency_cc
                                                                   : pts[size_t(a)].energy_pj < pts[size_t(b)].energy_pj;
  });
  // Sorted by latency then energy: a point is dominated iff an earlier one has less energy, or
  // the same energy at a lower latency.
  std::vector<int> out;
  double best_e = std::numeric_limits<double>::infinity(), best_e_lat = 0;
  for (int i : idx) {
    const GaPoint& p = pts[size_t(i)];
    if (p.energy_pj < best_e || (p.energy_pj == best_e && p.latency_cc == best_e_lat)) {
      out.push_back(i);
      if (p.energy_pj < best_e) best_e = p.energy_pj, best_e_lat = p.latency_cc;
    }
  }
  return out;
}

namespace {

struct Individual {
  std::vector<int> genome;
  double f[2] = {0, 0};  // latency, energy
};

bool dominates(const Individual& a, const Individual& b) {
  return a.f[0] <= b.f[0] && a.f[1] <= b.f[1] && (a.f[0] < b.f[0] || a.f[1] < b.f[1]);
}

// DEAP's selNSGA2: fronts by non-dominated sorting until k are chosen; the front that does not fit
// whole gives its least crowded members (ties: the earlier one).
std::vector<Individual> select_nsga2(std::vector<Individual> pop, size_t k) {
  const size_t n = pop.size();
  std::vector<int> dominated_by(n, 0);
  std::vector<std::vector<int>> dominates_list(n);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = i + 1; j < n; ++j) {
      if (dominates(pop[i], pop[j])) dominates_list[i].push_back(int(j)), ++dominated_by[j];
      else if (dominates(pop[j], pop[i])) dominates_list[j].push_back(int(i)), ++dominated_by[i];
    }
  std::vector<Individual> out;
  std::vector<int> front;
  for (size_t i = 0; i < n; ++i)
    if (dominated_by[i] == 0) front.push_back(int(i));
  while (!front.empty() && out.size() < k) {
    if (out.size() + front.size() <= k) {
      for (int i : front) out.push_back(pop[size_t(i)]);
    } else {
      // Crowding distance: per objective, the extremes infinite, the others the normalised gap
      // between their neighbours.
      std::vector<double> crowd(front.size(), 0);
      std::vector<int> ord(front.size());
      for (int m = 0; m < 2; ++m) {
        for (size_t i = 0; i < ord.size(); ++i) ord[i] = int(i);
        std::stable_sort(ord.begin(), ord.end(), [&](int a, int b) {
          return pop[size_t(front[size_t(a)])].f[m] < pop[size_t(front[size_t(b)])].f[m];
        });
        const double lo = pop[size_t(front[size_t(ord.front())])].f[m], hi = pop[size_t(front[size_t(ord.back())])].f[m];
        if (hi == lo) continue;
        crowd[size_t(ord.front())] = crowd[size_t(ord.back())] = std::numeric_limits<double>::infinity();
        for (size_t i = 1; i + 1 < ord.size(); ++i)
          crowd[size_t(ord[i])] += (pop[size_t(front[size_t(ord[i + 1])])].f[m] - pop[size_t(front[size_t(ord[i - 1])])].f[m]) /
                                   (2 * (hi - lo));
      }
      for (size_t i = 0; i < ord.size(); ++i) ord[i] = int(i);
      std::stable_sort(ord.begin(), ord.end(), [&](int a, int b) { return crowd[size_t(a)] > crowd[size_t(b)]; });
      for (size_t i = 0; out.size() < k; ++i) out.push_back(pop[size_t(front[size_t(ord[i])])]);
    }
    std::vector<int> next;
    for (int i : front)
      for (int j : dominates_list[size_t(i)])
        if (--dominated_by[size_t(j)] == 0) next.push_back(j);
    std::sort(next.begin(), next.end());
    front = std::move(next);
  }
  return out;
}

// Integers and reals from the engine's rng in a fixed way (std distributions differ between
// standard libraries; the search must not).
struct Rng {
  std::mt19937_64 g;
  size_t below(size_t n) { return size_t(g() % uint64_t(n)); }
  double real() { return double(g() >> 11) * 0x1.0p-53; }
};

}  // namespace

void check_ga_options(const GaOptions& opt) {
  if (opt.population < 2)
    throw InputError({}, "--population", fmt::format("expected at least 2 individuals, got {}", opt.population));
  if (opt.generations < 0)
    throw InputError({}, "--generations", fmt::format("expected 0 or more generations, got {}", opt.generations));
}

GaResult ga_allocate(AllocationEvaluator& ev, const GaOptions& opt) {
  check_ga_options(opt);
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t evals0 = ev.evaluations();
  const size_t G = ev.genes().size();
  Rng rng{std::mt19937_64(opt.seed)};
  GaResult r;
  std::map<std::vector<int>, std::pair<double, double>> seen;  // every allocation evaluated
  std::vector<GaPoint> archive;
  GaGeneration best{0, 0, std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity(),
                    std::numeric_limits<double>::infinity()};
  std::string first_refusal;
  auto fitness = [&](Individual& ind) {
    ++r.offspring;
    auto it = seen.find(ind.genome);
    if (it == seen.end()) {
      const coala::Schedule* s = nullptr;
      try {
        s = &ev.evaluate(ind.genome);
      } catch (const InputError& e) {
        // The scheduler refuses the allocation (a core's memory cannot hold a CT's tensors): it
        // is infeasible, dominated by every feasible one. The largest finite value keeps the
        // crowding distances free of inf - inf.
        ++r.infeasible;
        if (first_refusal.empty()) first_refusal = e.what();
        constexpr double worst = std::numeric_limits<double>::max();
        seen.emplace(ind.genome, std::pair{worst, worst});
        ind.f[0] = ind.f[1] = worst;
        return;
      }
      it = seen.emplace(ind.genome, std::pair{s->latency_cc, s->energy.total()}).first;
      GaPoint p{ind.genome, s->latency_cc, s->energy.total()};
      best.best_latency_cc = std::min(best.best_latency_cc, p.latency_cc);
      best.best_energy_pj = std::min(best.best_energy_pj, p.energy_pj);
      best.best_edp = std::min(best.best_edp, p.edp());
      archive.push_back(std::move(p));
    }
    ind.f[0] = it->second.first;
    ind.f[1] = it->second.second;
  };
  auto record = [&](int gen) {
    best.generation = gen;
    best.evaluations = ev.evaluations() - evals0;
    r.trace.push_back(best);
  };

  std::vector<Individual> pop(size_t(opt.population));
  for (Individual& ind : pop) {
    ind.genome.resize(G);
    for (size_t i = 0; i < G; ++i) {
      const auto& ch = ev.choices(int(i));
      ind.genome[i] = ch[rng.below(ch.size())];
    }
    fitness(ind);
  }
  record(0);
  const size_t mu = std::max<size_t>(1, size_t(opt.population) / 2), lambda = size_t(opt.population);
  auto allowed = [&](size_t gene, int core) {
    const auto& ch = ev.choices(int(gene));
    return std::find(ch.begin(), ch.end(), core) != ch.end();
  };
  std::vector<int> rest;
  for (int gen = 1; gen <= opt.generations; ++gen) {
    if (G == 0) {  // nothing to choose: the one allocation, scheduled once
      record(gen);
      continue;
    }
    std::vector<Individual> offspring;
    offspring.reserve(lambda);
    for (size_t o = 0; o < lambda; ++o) {
      const double op = rng.real();
      if (op < opt.crossover_probability && pop.size() >= 2) {
        const size_t a = rng.below(pop.size());
        size_t b = rng.below(pop.size() - 1);
        if (b >= a) ++b;
        Individual child = pop[a];
        const std::vector<int>& p2 = pop[b].genome;
        if (G > 10) {
          // Ordered crossover (DEAP cxOrdered) on a multiset: parent 1's slice [lo, hi] stays,
          // the other positions take parent 2's genes in its order from hi + 1 on (wrapping),
          // less one copy of each value the slice holds; a core that cannot run its new position's
          // layer leaves parent 1's gene there.
          size_t lo = rng.below(G), hi = rng.below(G - 1);
          if (hi >= lo) ++hi;
          if (lo > hi) std::swap(lo, hi);
          std::vector<int> held(child.genome.begin() + long(lo), child.genome.begin() + long(hi) + 1);
          rest.clear();
          for (size_t k = 0; k < G; ++k) {
            const int v = p2[(hi + 1 + k) % G];
            auto h = std::find(held.begin(), held.end(), v);
            if (h != held.end()) held.erase(h);
            else rest.push_back(v);
          }
          size_t next = 0;
          for (size_t k = 0; k < G && next < rest.size(); ++k) {
            const size_t pos = (hi + 1 + k) % G;
            if (pos >= lo && pos <= hi) continue;
            const int v = rest[next++];
            if (allowed(pos, v)) child.genome[pos] = v;
          }
        } else {
          // Two-point crossover (DEAP cxTwoPoint): parent 2's genes in [c1, c2).
          size_t c1 = 1 + rng.below(G), c2 = 1 + (G > 1 ? rng.below(G - 1) : 0);
          if (c2 >= c1) ++c2;
          else std::swap(c1, c2);
          for (size_t k = c1; k < std::min(c2, G); ++k) child.genome[k] = p2[k];
        }
        fitness(child);
        offspring.push_back(std::move(child));
      } else if (op < opt.crossover_probability + opt.mutation_probability) {
        Individual child = pop[rng.below(pop.size())];
        if (rng.real() < 0.75) {
          for (size_t k = 0; k < G; ++k)
            if (rng.real() < 1.0 / double(G)) {
              const auto& ch = ev.choices(int(k));
              child.genome[k] = ch[rng.below(ch.size())];
            }
        } else if (G > 1) {
          // Swap two genes; the second among those whose cores each can take the other's.
          const size_t i = rng.below(G);
          rest.clear();
          for (size_t k = 0; k < G; ++k)
            if (k != i && allowed(k, child.genome[i]) && allowed(i, child.genome[k])) rest.push_back(int(k));
          if (!rest.empty()) std::swap(child.genome[i], child.genome[size_t(rest[rng.below(rest.size())])]);
        }
        fitness(child);
        offspring.push_back(std::move(child));
      } else {
        offspring.push_back(pop[rng.below(pop.size())]);  // a copy keeps its fitness
      }
    }
    for (auto& o : offspring) pop.push_back(std::move(o));
    pop = select_nsga2(std::move(pop), mu);
    record(gen);
  }
  if (archive.empty())
    throw InputError({}, "allocation",
                     fmt::format("none of the {} allocations the search drew could be scheduled; the first: {}",
                                 r.infeasible, first_refusal));
  for (int i : pareto_front(archive)) r.front.push_back(archive[size_t(i)]);
  r.best = r.front.front();
  for (const GaPoint& p : r.front)
    if (p.edp() < r.best.edp()) r.best = p;
  r.evaluations = ev.evaluations() - evals0;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace mapfuse
