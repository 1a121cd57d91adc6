// Equivalent ranks (engine/search/rank_merge.hpp): which ranks merge, and that a mapping of the
// merged Einsum split back into the original ranks costs exactly the same. The fronts of
// generation with merged ranks are compared with the unmerged reference generator and brute
// forces in test_ffm.cpp.
#include <doctest/doctest.h>

#include <random>

#include "engine/cost/model.hpp"
#include "engine/cost/plan.hpp"
#include "engine/search/random_mapping.hpp"
#include "engine/search/rank_merge.hpp"
#include "engine/workload/load.hpp"
#include "test_support.hpp"

using namespace mapfuse;

namespace {

// Group names, e.g. {"B*M", "H*E", "D"}.
std::vector<std::string> merged_names(const Einsum& e, const RankMerge& m) {
  std::vector<std::string> out;
  for (const Rank& r : merge_ranks(e, m).ranks) out.push_back(r.name);
  return out;
}

const Einsum& einsum_named(const Workload& w, const std::string& name) {
  return w.einsums.at(static_cast<size_t>(w.einsum_index(name)));
}

}  // namespace

TEST_CASE("rank merge: GPT-3's Einsums") {
  const Workload w = load_workload("gpt3_6.7b", {.batch = 2, .tokens = 8});
  const Core& c = test::preset_core("accelforge_tpu_v4i");
  auto names = [&](const std::string& einsum) {
    const Einsum& e = einsum_named(w, einsum);
    return merged_names(e, equivalent_ranks(e, c, int64_t{1} << 40));
  };
  using V = std::vector<std::string>;
  CHECK(names("I") == V{"B*M*D"});  // a copy: every rank indexes both tensors
  CHECK(names("K") == V{"B*M", "H*E", "D"});
  CHECK(names("QK") == V{"B*H", "M", "P", "E"});
  CHECK(names("QK_softmax") == V{"B*M*P*H"});
  CHECK(names("AV") == V{"B*H", "M", "P", "F"});
  CHECK(names("Z") == V{"B*M", "H*F", "G"});
  CHECK(names("FFA") == V{"B*M", "G", "C"});

  // The merged Einsum: sizes multiply, each tensor has one dimension per group it indexes.
  const Einsum& k = einsum_named(w, "K");
  const Einsum mk = merge_ranks(k, equivalent_ranks(k, c, int64_t{1} << 40));
  REQUIRE(mk.ranks.size() == 3);
  CHECK(mk.ranks[0].size == 2 * 8);
  CHECK(mk.ranks[1].size == 32 * 128);
  CHECK(mk.ranks[2].size == 4096);
  CHECK(mk.operations() == k.operations());
  for (int t = 0; t < 3; ++t) CHECK(mk.tensor_volume(t) == k.tensor_volume(t));
  CHECK(mk.tensors[0].dims.size() == 2);  // I[b*m, d]
  CHECK(mk.tensors[2].dims.size() == 2);  // K[b*m, h*e]

  // A group stops at the size limit and the next equivalent rank starts another.
  CHECK(merged_names(k, equivalent_ranks(k, c, 16)) == V{"B*M", "H", "E", "D"});
  CHECK(merged_names(k, equivalent_ranks(k, c, 32 * 128)) == V{"B*M", "H*E", "D"});
}

TEST_CASE("rank merge: nothing merges where ranks are told apart") {
  const Core& c = test::preset_core("accelforge_tpu_v4i");
  // A convolution's input dimensions sum two ranks: no merge at all.
  ConvShape s;
  s.N = 2, s.K = 4, s.C = 4, s.P = 4, s.Q = 4, s.R = 3, s.S = 3;
  CHECK(equivalent_ranks(make_conv("conv", s), c, int64_t{1} << 40).identity());
  // A matmul has no two ranks that index the same tensors.
  CHECK(equivalent_ranks(make_matmul("mm", 8, 8, 8), c, int64_t{1} << 40).identity());
  // A fan-out that names M accepts M and not B: they stay apart.
  Core named = c;
  named.levels[1].fanout.x_ranks = {"M"};
  const Workload w = load_workload("gpt3_6.7b", {.batch = 2, .tokens = 8});
  const Einsum& k = einsum_named(w, "K");
  CHECK(merged_names(k, equivalent_ranks(k, named, int64_t{1} << 40)) == std::vector<std::string>{"B", "M", "H*E", "D"});
}

// Random mappings of merged Einsums (sizes with several primes, so that splitting a factor
// between ranks is not a power-of-two shuffle), split back: the split mapping is structurally
// what the merged one is and the model gives it the same energy, latency and validity, to the
// bit, on every architecture.
TEST_CASE("rank merge: a split mapping costs exactly what the merged one does") {
  const Workload w = test::projection_chain(6, 10, 3, 4, 12, 9);
  std::mt19937_64 rng(7);
  int64_t checked = 0, valid = 0;
  for (const std::string arch : {"accelforge_tpu_v4i", "accelforge_simba", "accelforge_eyeriss", "gemmini_default", "ffm_edge"}) {
    const Core& c = test::preset_core(arch);
    for (const Einsum& e : w.einsums) {
      const RankMerge m = equivalent_ranks(e, c, int64_t{1} << 40);
      REQUIRE(m.groups.size() == 3);
      const Einsum merged = merge_ranks(e, m);
      const EvalPlan pm = compile_plan(merged, c), po = compile_plan(e, c);
      for (int i = 0; i < 400; ++i) {
        const Mapping a = random_mapping(merged, c, rng);
        const Mapping b = split_ranks(a, m, e);
        // Every rank's loops multiply to its size, and each level keeps what it kept.
        std::vector<int64_t> product(e.ranks.size(), 1);
        for (size_t l = 0; l < b.levels.size(); ++l) {
          CHECK(b.levels[l].keep == a.levels[l].keep);
          for (const Loop& lp : b.levels[l].loops) product[static_cast<size_t>(lp.rank)] *= lp.factor;
        }
        for (size_t r = 0; r < e.ranks.size(); ++r) CHECK(product[r] == e.ranks[r].size);
        CHECK(check_structure(a, merged, c).has_value() == check_structure(b, e, c).has_value());
        const CostResult ca = evaluate(pm, flatten(a)), cb = evaluate(po, flatten(b));
        CHECK(ca.invalid == cb.invalid);
        CHECK(ca.energy_pj == cb.energy_pj);
        CHECK(ca.cycles == cb.cycles);
        ++checked;
        valid += cb.valid();
      }
    }
  }
  MESSAGE(checked << " split mappings compared, " << valid << " of them valid");
  CHECK(valid > 100);
}
