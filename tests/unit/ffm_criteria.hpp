#pragma once
// A context's pmappings as FFM prunes them: energy, latency and the own words at the context's
// reservation levels (ffm::reservation_levels), in list order. Words at other levels are only
// reported, so pmappings that tie on these may differ there.
#include <cstdint>
#include <tuple>
#include <vector>

#include "engine/search/ffm/pmappings.hpp"

namespace mapfuse::test {

using PmappingCriteria = std::tuple<double, double, std::vector<int64_t>>;

inline std::vector<PmappingCriteria> pmapping_criteria(const std::vector<ffm::Pmapping>& list, const Core& c,
                                                       const ffm::PmappingContext& ctx) {
  const std::vector<int> res = ffm::reservation_levels(c, ctx);
  std::vector<PmappingCriteria> out;
  for (const ffm::Pmapping& p : list) {
    std::vector<int64_t> own;
    for (int l : res) own.push_back(p.own[static_cast<size_t>(l)]);
    out.emplace_back(p.energy_pj, p.cycles, std::move(own));
  }
  return out;
}

}  // namespace mapfuse::test
