// Fixed fusion decisions in FFM (FfmOptions::must_fuse / must_not_fuse, TransFusion-style
// studies): the constrained optimum is the optimum of the restricted mapspace, never better than
// the free one, and the extremes equal the free search's own special cases.
#include <doctest/doctest.h>

#include "engine/common/error.hpp"
#include "engine/search/ffm/ffm.hpp"
#include "engine/arch/arch_toml.hpp"
#include "engine/search/ffm/pmapping_io.hpp"
#include "tests/unit/test_support.hpp"

using namespace mapfuse;
using namespace mapfuse::ffm;

namespace {

// T1 = T0 W0, T2 = T1 W1, T3 = T2 W2, small enough for the whole fused mapspace in a second. On
// tpuv4i, whose buffers keep every role, so that producer and consumer can share a backing level
// (on Gemmini a matmul's output is backed in the accumulator and its consumer's input in the
// scratchpad: no chain of matmuls fuses there).
Workload matmul_chain(int n) {
  Workload w;
  w.name = "chain" + std::to_string(n);
  for (int i = 0; i < n; ++i)
    w.einsums.push_back(make_matmul("MM" + std::to_string(i), 4, 4, 4, "T" + std::to_string(i), "W" + std::to_string(i),
                                    "T" + std::to_string(i + 1)));
  finalize(w);
  return w;
}

Workload three_matmuls() { return matmul_chain(3); }

int tensor(const Workload& w, const std::string& name) {
  for (size_t t = 0; t < w.tensors.size(); ++t)
    if (w.tensors[t].name == name) return static_cast<int>(t);
  FAIL("no tensor " << name);
  return -1;
}

// Which intermediate tensors the LoopTree keeps on chip.
bool onchip(const FfmSolution& s, const FfmResult& r, const Workload& w, int t) {
  const int producer = w.tensors[t].producer;
  const PmappingContext& ctx = r.pmappings[producer].contexts[s.choices[producer].context];
  const TensorCompat* tc = ctx.find(t);
  REQUIRE(tc != nullptr);
  return tc->fused();
}

}  // namespace

TEST_CASE("ffm fusion constraints: restricted optima bracket the free one and honour the constraint") {
  const Workload w = three_matmuls();
  const Core c = test::preset_core("tpuv4i");
  const int T1 = tensor(w, "T1"), T2 = tensor(w, "T2");

  const FfmResult free_r = ffm_search(w, c, {});
  const FfmSolution* best = free_r.best(Objective::Edp);
  REQUIRE(best != nullptr);

  FfmOptions none;
  none.pmappings.allow_fusion = false;
  const FfmResult unfused_r = ffm_search(w, c, none);
  const FfmSolution* unfused = unfused_r.best(Objective::Edp);
  REQUIRE(unfused != nullptr);

  // Every intermediate through DRAM: exactly the unfused search.
  FfmOptions no;
  no.must_not_fuse = {T1, T2};
  const FfmResult no_r = ffm_search(w, c, no);
  const FfmSolution* no_best = no_r.best(Objective::Edp);
  REQUIRE(no_best != nullptr);
  CHECK(no_best->edp() == unfused->edp());

  // T1 on chip, T2 through DRAM (a TransFusion-like fixed decision).
  FfmOptions mixed;
  mixed.must_fuse = {T1};
  mixed.must_not_fuse = {T2};
  const FfmResult mixed_r = ffm_search(w, c, mixed);
  const FfmSolution* m = mixed_r.best(Objective::Edp);
  REQUIRE(m != nullptr);
  CHECK(onchip(*m, mixed_r, w, T1));
  CHECK_FALSE(onchip(*m, mixed_r, w, T2));
  for (const FfmSolution& s : mixed_r.pareto) {  // the whole front, not just the optimum
    CHECK(onchip(s, mixed_r, w, T1));
    CHECK_FALSE(onchip(s, mixed_r, w, T2));
  }
  // The free search may choose anything the constrained ones can: never worse.
  CHECK(best->edp() <= m->edp());
  CHECK(best->edp() <= no_best->edp());
  CHECK(best->edp() <= unfused->edp());
  // With fusion worth something here, the free optimum is strictly better than no fusion.
  CHECK(best->edp() < unfused->edp());
}

TEST_CASE("ffm fusion constraints: bad tensors are InputErrors") {
  const Workload w = three_matmuls();
  const Core c = test::preset_core("tpuv4i");
  FfmOptions o;
  o.must_fuse = {tensor(w, "W0")};  // a weight: nothing produces it
  CHECK_THROWS_WITH_AS(ffm_search(w, c, o), doctest::Contains("no Einsum produces it"), InputError);
  o.must_fuse = {tensor(w, "T3")};  // the network output: nothing consumes it
  CHECK_THROWS_WITH_AS(ffm_search(w, c, o), doctest::Contains("nothing consumes it"), InputError);
  o.must_fuse = {tensor(w, "T1")};
  o.must_not_fuse = {tensor(w, "T1")};
  CHECK_THROWS_WITH_AS(ffm_search(w, c, o), doctest::Contains("both in must_fuse and in must_not_fuse"), InputError);
  o.must_fuse = {99};
  o.must_not_fuse = {};
  CHECK_THROWS_AS(ffm_search(w, c, o), InputError);
}

TEST_CASE("ffm memory limit: a join that would outgrow the limit stops with an InputError, not a kill") {
  const Workload w = three_matmuls();
  const Core c = test::preset_core("tpuv4i");
  const FfmResult r = ffm_search(w, c, {});
  REQUIRE(r.best(Objective::Edp) != nullptr);
  const int64_t pm = pmapping_bytes(r.pmappings);
  CHECK(pm > 0);
  CHECK(r.peak_records_bytes >= pm);
  // The same pmappings joined under a limit below what they already take: refused, with the reason.
  CHECK_THROWS_WITH_AS(ffm_join(w, c, r.pmappings, pm - 1), doctest::Contains("exceed the memory limit"), InputError);
  // At the measured peak it completes, with the same optimum.
  const FfmResult again = ffm_join(w, c, r.pmappings, r.peak_records_bytes);
  REQUIRE(again.best(Objective::Edp) != nullptr);
  CHECK(again.best(Objective::Edp)->edp() == r.best(Objective::Edp)->edp());
}

TEST_CASE("ffm distributed: slices of the (Einsum, context) list, serialised and merged, join to ffm_search's result") {
  // Three matmuls, and a projection chain whose equivalent ranks generation merges (contexts
  // that split B and M differently share one search; each gets its own split mappings, which
  // must survive the slice's text form).
  for (const Workload& w : {three_matmuls(), test::projection_chain(2, 6, 3, 2, 4, 3)}) {
    INFO(w.name);
    const Core c = test::preset_core("tpuv4i");
    FfmOptions o;
    const FfmResult whole = ffm_search(w, c, o);
    REQUIRE(!whole.pareto.empty());
    for (int slices : {1, 3}) {
      INFO("slices " << slices);
      const auto contexts = matchable_contexts(w, c, o);
      std::vector<std::string> parts;
      // Generated in reverse order (as ranks may deliver them): the merge does not care.
      for (int i = static_cast<int>(w.einsums.size()) - 1; i >= 0; --i)
        for (int s = slices - 1; s >= 0; --s) parts.push_back(generate_pmapping_slice(w, c, o, contexts, i, s, slices));
      const FfmResult joined = ffm_join(w, c, merge_pmapping_slices(w, c, contexts, parts));
      REQUIRE(joined.pareto.size() == whole.pareto.size());
      for (size_t k = 0; k < whole.pareto.size(); ++k) {
        CHECK(joined.pareto[k].energy_pj == whole.pareto[k].energy_pj);  // to the bit
        CHECK(joined.pareto[k].cycles == whole.pareto[k].cycles);
        CHECK(joined.pareto[k].choices.size() == whole.pareto[k].choices.size());
      }
      for (size_t i = 0; i < w.einsums.size(); ++i) {
        CHECK(joined.pmappings[i].kept == whole.pmappings[i].kept);
        // (Not the number evaluated: partial choices are skipped against each thread's front.)
        for (size_t k = 0; k < whole.pmappings[i].pmappings.size(); ++k) {
          REQUIRE(joined.pmappings[i].pmappings[k].size() == whole.pmappings[i].pmappings[k].size());
          for (size_t j = 0; j < whole.pmappings[i].pmappings[k].size(); ++j)
            CHECK(joined.pmappings[i].pmappings[k][j].mapping == whole.pmappings[i].pmappings[k][j].mapping);
        }
      }
      // A slice made for another context list (another version's, from an old journal) is refused,
      // not matched to the wrong contexts by index.
      {
        auto other = contexts;
        other[0].pop_back();
        CHECK_THROWS_WITH(merge_pmapping_slices(w, c, other, parts), doctest::Contains("another context list"));
        other = contexts;
        std::swap(other[0].front(), other[0].back());
        CHECK_THROWS_WITH(merge_pmapping_slices(w, c, other, parts), doctest::Contains("another context list"));
      }
      // A missing slice is reported, not silently joined.
      if (slices > 1) {
        parts.pop_back();
        CHECK_THROWS_WITH(merge_pmapping_slices(w, c, contexts, parts), doctest::Contains("missing"));
      }
    }
  }
}

TEST_CASE("ffm epsilon: the two-pass dirty/clean join returns the exact front and prunes partial mappings") {
  Core c = load_architecture(test::source_dir("tests/fixtures/ffm/small_core.toml")).cores.at(0);
  for (Level& l : c.levels)
    if (l.name == "Buffer") l.entries = 256;
  finalize(c, "eps");
  Workload w;
  w.name = "chain6";
  for (int i = 0; i < 6; ++i)
    w.einsums.push_back(make_matmul("MM" + std::to_string(i), 8, 8, 8, "T" + std::to_string(i), "W" + std::to_string(i),
                                    "T" + std::to_string(i + 1)));
  finalize(w);
  const FfmResult exact = ffm_search(w, c, {});
  REQUIRE(exact.pareto.size() >= 2);
  int64_t pruned_any = 0;
  for (double eps : {0.05, 0.5, 2.0}) {
    INFO("epsilon " << eps);
    FfmOptions o;
    o.epsilon = eps;
    const FfmResult two = ffm_search(w, c, o);
    REQUIRE(two.pareto.size() == exact.pareto.size());
    for (size_t k = 0; k < exact.pareto.size(); ++k) {
      CHECK(two.pareto[k].energy_pj == exact.pareto[k].energy_pj);
      CHECK(two.pareto[k].cycles == exact.pareto[k].cycles);
    }
    int64_t pruned = 0, kept_two = 0, kept_exact = 0;
    for (const JoinStep& s : two.steps) pruned += s.bound_pruned, kept_two += s.kept;
    for (const JoinStep& s : exact.steps) kept_exact += s.kept;
    pruned_any += pruned;
    CHECK(kept_two <= kept_exact);  // never keeps more
    CHECK(two.dirty_kept > 0);
  }
  CHECK(pruned_any > 0);  // the bound does work here (not at every epsilon: a coarse one may cut nothing)
}

TEST_CASE("ffm reuse: an Einsum equal to an earlier one (up to tensor names) reuses the pmappings of every context with the same tiling exactly") {
  const Workload w = matmul_chain(4);
  const Core c = test::preset_core("tpuv4i");
  const FfmResult r = ffm_search(w, c, {});
  REQUIRE(!r.pareto.empty());
  // Four equal matmuls. MM0 generates everything it has. MM1 reads T1 and writes T2: its unfused
  // context and those with only its output on chip tile like MM0's, the others are new. MM2 and
  // MM3 (T3 in, T4 the workload's output) have nothing new.
  CHECK(r.pmappings[0].contexts_reused == 0);
  CHECK(r.pmappings[0].evaluated > 0);
  CHECK(r.pmappings[1].contexts_reused > 0);
  CHECK(r.pmappings[1].contexts_reused < static_cast<int64_t>(r.pmappings[1].contexts.size()));
  CHECK(r.pmappings[1].evaluated > 0);
  CHECK(r.pmappings[1].reused_from == -1);
  for (int i : {2, 3}) {
    CHECK(r.pmappings[i].contexts_reused == static_cast<int64_t>(r.pmappings[i].contexts.size()));
    CHECK(r.pmappings[i].evaluated == 0);
  }
  // Against every Einsum generated on its own: the same pmappings and the same front, to the bit.
  const auto contexts = matchable_contexts(w, c, {});
  std::vector<EinsumPmappings> own;
  for (int i = 0; i < 4; ++i) own.push_back(generate_pmappings(w, i, c, {}, contexts[static_cast<size_t>(i)]));
  for (int i = 0; i < 4; ++i) {
    REQUIRE(own[i].pmappings.size() == r.pmappings[i].pmappings.size());
    for (size_t k = 0; k < own[i].pmappings.size(); ++k) {
      REQUIRE(own[i].pmappings[k].size() == r.pmappings[i].pmappings[k].size());
      for (size_t j = 0; j < own[i].pmappings[k].size(); ++j) {
        CHECK(own[i].pmappings[k][j].energy_pj == r.pmappings[i].pmappings[k][j].energy_pj);
        CHECK(own[i].pmappings[k][j].cycles == r.pmappings[i].pmappings[k][j].cycles);
        CHECK(own[i].pmappings[k][j].own == r.pmappings[i].pmappings[k][j].own);
        CHECK(own[i].pmappings[k][j].mapping == r.pmappings[i].pmappings[k][j].mapping);
      }
    }
  }
  const FfmResult joined = ffm_join(w, c, own);
  REQUIRE(joined.pareto.size() == r.pareto.size());
  for (size_t k = 0; k < r.pareto.size(); ++k) {
    CHECK(joined.pareto[k].energy_pj == r.pareto[k].energy_pj);
    CHECK(joined.pareto[k].cycles == r.pareto[k].cycles);
  }
  // Tensor names do not matter, rank names do (a fan-out may name the ranks it accepts).
  Einsum renamed = w.einsums[1];
  renamed.tensors[0].name = "X";
  CHECK(generation_key(renamed, contexts[1]) == generation_key(w.einsums[1], contexts[1]));
  renamed.ranks[0].name = "Q";
  CHECK(generation_key(renamed, contexts[1]) != generation_key(w.einsums[1], contexts[1]));
}
