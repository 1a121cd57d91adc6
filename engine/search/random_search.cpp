#include "engine/search/random_search.hpp"

#include <limits>
#include <vector>

#include "engine/common/error.hpp"

namespace mapfuse {

Objective objective_from_string(std::string_view s) {
  if (s == "energy") return Objective::Energy;
  if (s == "cycles" || s == "latency" || s == "delay") return Objective::Cycles;
  if (s == "edp") return Objective::Edp;
  throw InputError({}, "objective", "unknown objective '" + std::string(s) +
                                        "'; expected energy, cycles or edp" +
                                        did_you_mean(s, {"energy", "cycles", "edp"}));
}

std::string_view to_string(Objective o) {
  switch (o) {
    case Objective::Energy: return "energy";
    case Objective::Cycles: return "cycles";
    case Objective::Edp: return "edp";
  }
  return "?";
}

double objective_value(Objective o, const CostResult& r) {
  switch (o) {
    case Objective::Energy: return r.energy_pj;
    case Objective::Cycles: return r.cycles;
    case Objective::Edp: return r.edp();
  }
  return 0;
}

double objective_value(Objective o, double energy_pj, double cycles) {
  switch (o) {
    case Objective::Energy: return energy_pj;
    case Objective::Cycles: return cycles;
    case Objective::Edp: return energy_pj * cycles;
  }
  return 0;
}

double objective_value(Objective o, const CompactCost& r) {
  switch (o) {
    case Objective::Energy: return r.energy_pj;
    case Objective::Cycles: return r.cycles;
    case Objective::Edp: return r.edp();
  }
  return 0;
}

namespace {
// SplitMix64: decorrelates the per-sample seeds.
uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
}  // namespace

SearchResult random_search(const Einsum& e, const Core& c, int64_t budget, uint64_t seed,
                           Objective objective, const RandomMappingOptions& opt) {
  if (budget <= 0) throw InputError({}, "budget", "must be positive");
  const EvalPlan plan = compile_plan(e, c);
  struct Best {
    double value = std::numeric_limits<double>::infinity();
    int64_t index = -1;
    int64_t valid = 0;
  };
  Best best;
#pragma omp parallel
  {
    Best local;
    CostResult r;
#pragma omp for schedule(static)
    for (int64_t i = 0; i < budget; ++i) {
      std::mt19937_64 rng(mix(seed ^ mix(static_cast<uint64_t>(i))));
      const Mapping m = random_mapping(e, c, rng, opt);
      if (opt.space && !satisfies(m, *opt.space)) continue;  // broke a factor bound: not in the mapspace
      evaluate(plan, flatten(m), r);
      if (!r.valid()) continue;
      ++local.valid;
      const double v = objective_value(objective, r);
      // Ties go to the lower sample index so the winner does not depend on the thread count.
      if (v < local.value || (v == local.value && i < local.index)) local.value = v, local.index = i;
    }
#pragma omp critical
    {
      best.valid += local.valid;
      if (local.index >= 0 &&
          (local.value < best.value || (local.value == best.value && local.index < best.index)))
        best.value = local.value, best.index = local.index;
    }
  }
  SearchResult out;
  out.evaluated = budget;
  out.valid = best.valid;
  if (best.index >= 0) {
    std::mt19937_64 rng(mix(seed ^ mix(static_cast<uint64_t>(best.index))));
    out.best = random_mapping(e, c, rng, opt);
    out.cost = evaluate(plan, flatten(*out.best));
  }
  return out;
}

}  // namespace mapfuse
