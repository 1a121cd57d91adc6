#include "engine/cost/plan.hpp"

#include "engine/common/error.hpp"

namespace mapfuse {

EvalPlan compile_plan(const Einsum& e, const Core& core) {
  const Core& c = core_for(core, e);
  validate(e);
  if (c.levels.size() > kMaxLevels)
    throw InputError({}, "architecture", "too many levels for the evaluation plan");
  EvalPlan p;
  p.n_ranks = static_cast<int8_t>(e.ranks.size());
  p.n_tensors = static_cast<int8_t>(e.tensors.size());
  p.n_levels = static_cast<int8_t>(c.levels.size());
  p.output = static_cast<int8_t>(e.output_index());
  for (size_t r = 0; r < e.ranks.size(); ++r) p.rank_size[r] = e.ranks[r].size;
  for (size_t t = 0; t < e.tensors.size(); ++t) {
    const TensorAccess& ta = e.tensors[t];
    PlanTensor& pt = p.tensors[t];
    pt.role = ta.role;
    pt.n_dims = static_cast<int8_t>(ta.dims.size());
    pt.plain_rank.fill(-1);
    for (size_t d = 0; d < ta.dims.size(); ++d)
      if (ta.dims[d].size() == 1 && ta.dims[d][0].coeff == 1) pt.plain_rank[d] = static_cast<int8_t>(ta.dims[d][0].rank);
    for (auto& dim : pt.dims) dim.terms.fill({static_cast<int8_t>(kPadRank), 0});
    for (size_t d = 0; d < ta.dims.size(); ++d) {
      if (ta.dims[d].size() > kMaxTerms)
        throw InputError({}, "einsum '" + e.name + "'.tensors." + ta.name,
                         "a dimension has more than " + std::to_string(kMaxTerms) + " terms");
      pt.dims[d].n_terms = static_cast<int8_t>(ta.dims[d].size());
      for (size_t k = 0; k < ta.dims[d].size(); ++k) {
        const int r = ta.dims[d][k].rank;
        pt.dims[d].terms[k] = {static_cast<int8_t>(r), ta.dims[d][k].coeff};
        pt.relevant_ranks |= static_cast<uint16_t>(1u << r);
        if (pt.rank_terms[r] == 2)
          throw InputError({}, "einsum '" + e.name + "'.tensors." + ta.name,
                           "rank " + e.ranks[r].name + " appears in more than two dimensions");
        pt.rank_dim[r][pt.rank_terms[r]] = static_cast<int8_t>(d);
        pt.rank_coeff[r][pt.rank_terms[r]] = ta.dims[d][k].coeff;
        ++pt.rank_terms[r];
      }
    }
    pt.volume = e.tensor_volume(static_cast<int>(t));
    // The refill analysis compares sums of loop steps per dimension; each such sum is at most
    // 3 * sum(coeff * rank size) over the dimension's terms (strides of one rank at least double
    // from loop to loop). Pack into the smallest word whose per-dimension field holds that.
    if (pt.n_dims > 0) {
      auto fits = [&](int word_bits) {
        const int b = word_bits / pt.n_dims;
        for (const auto& dim : ta.dims) {
          unsigned __int128 bound = 0;
          for (const auto& term : dim)
            bound += static_cast<unsigned __int128>(term.coeff) * static_cast<unsigned __int128>(e.ranks[term.rank].size);
          if (b < 127 && 3 * bound >= (static_cast<unsigned __int128>(1) << b)) return false;
        }
        return true;
      };
      using Packing = PlanTensor::Packing;
      pt.packing = fits(64) ? Packing::Word64 : fits(128) ? Packing::Word128 : Packing::None;
      const int b = (pt.packing == Packing::Word64 ? 64 : 128) / pt.n_dims;
      for (size_t d = 0; d < ta.dims.size(); ++d)
        for (const auto& term : ta.dims[d]) {
          pt.key64[term.rank] += static_cast<uint64_t>(term.coeff) << (b * d % 64);
          pt.key128[term.rank] += static_cast<unsigned __int128>(term.coeff) << (b * d);
        }
    }
  }
  for (size_t l = 0; l < c.levels.size(); ++l) {
    const Level& lv = c.levels[l];
    PlanLevel& pl = p.levels[l];
    pl.entries = lv.entries;
    pl.block_size = lv.block_size;
    pl.multiple_buffering = lv.multiple_buffering;
    pl.read_bw = lv.read_bandwidth;
    pl.write_bw = lv.write_bandwidth;
    pl.shared_bw = lv.shared_bandwidth;
    pl.read_pj = lv.read_pj;
    pl.write_pj = lv.write_pj;
    pl.update_pj = lv.update_pj;
    pl.may_keep = lv.may_keep;
    pl.fanout_x = lv.fanout.x;
    pl.fanout_y = lv.fanout.y;
    pl.must_keep = lv.must_keep;
    pl.min_x = min_axis_use(lv.fanout, LoopKind::SpatialX, e);
    pl.min_y = min_axis_use(lv.fanout, LoopKind::SpatialY, e);
    pl.multicast_x = lv.fanout.x_multicast;
    pl.multicast_y = lv.fanout.y_multicast;
  }
  p.op_pj = c.compute.energy_pj;
  p.legacy_output_fills = c.legacy_output_fills;
  p.operations = e.operations();
  return p;
}

FlatMapping flatten(const Mapping& m) {
  FlatMapping f;
  f.n_levels = static_cast<int8_t>(m.levels.size());
  for (int l = static_cast<int>(m.levels.size()) - 1; l >= 0; --l) {
    f.keep[l] = m.levels[l].keep;
    // Within a level the temporal loops enclose the spatial fan-out (Timeloop's nest order).
    for (bool spatial : {false, true})
      for (const Loop& lp : m.levels[l].loops) {
        if (lp.factor == 1 || (lp.kind != LoopKind::Temporal) != spatial) continue;
        if (f.n_loops == kMaxLoops)
          throw InputError({}, "mapping", "more than " + std::to_string(kMaxLoops) + " loops");
        f.loops[f.n_loops++] = {static_cast<int8_t>(l), static_cast<int8_t>(lp.rank), lp.kind,
                                lp.factor};
      }
  }
  return f;
}

}  // namespace mapfuse
