// FFM against the authors' own mapper results: AccelForge's regression oracles
// (Accelergy-Project/accelforge tests/regression_reference.json @ 1c1929c2, tabulated in
// shared/data/ffm/oracles_accelforge_regression.csv). The cases mapfuse expresses exactly are
// checked here against the CSV and against hand counts; the others, their gaps and why, are in
// docs/validation.md ("FFM against AccelForge") and scripts/ffm_crosscheck.sh.
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "engine/cost/fused.hpp"
#include "engine/search/exhaustive.hpp"
#include "engine/search/ffm/ffm.hpp"
#include "engine/search/mapspace_toml.hpp"
#include "engine/workload/load.hpp"
#include "test_support.hpp"

using namespace mapfuse;
using namespace mapfuse::ffm;

namespace {

struct Oracle {
  double energy = 0, latency = 0;
  std::vector<double> einsum_latency;  // per Einsum, in workload order (column 12)
};

// The row whose key (column 4) is `key`, e.g. "simple|matmuls|KN=64,M=64,N_EINSUMS=2|fused".
// Fields may be quoted (keys and parameters contain commas).
Oracle oracle(const std::string& key) {
  std::ifstream in(test::shared_data("ffm/oracles_accelforge_regression.csv"));
  REQUIRE(in.good());
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::string cur;
    bool quoted = false;
    for (char ch : line) {
      if (ch == '"') quoted = !quoted;
      else if (ch == ',' && !quoted) f.push_back(cur), cur.clear();
      else cur += ch;
    }
    f.push_back(cur);
    if (f.size() > 11 && f[3] == key) {
      Oracle o{std::stod(f[8]), std::stod(f[9]), {}};
      std::stringstream parts(f[11]);
      for (std::string item; std::getline(parts, item, ';');) o.einsum_latency.push_back(std::stod(item.substr(item.find('=') + 1)));
      return o;
    }
  }
  FAIL("no oracle row " << key);
  return {};
}

// AccelForge examples/workloads/basic/matmuls.yaml (N_EINSUMS matmuls, M rows, KN columns) and
// three_matmuls_annotated.yaml (three, all ranks 128): T<i+1>[m,n] = T<i>[m,k] W<i>[k,n].
Workload matmuls(int n, int64_t M, int64_t KN) {
  Workload w;
  w.name = "matmuls";
  for (int i = 0; i < n; ++i)
    w.einsums.push_back(make_matmul("Matmul" + std::to_string(i), M, KN, KN, "T" + std::to_string(i),
                                    "W" + std::to_string(i), "T" + std::to_string(i + 1)));
  finalize(w);
  return w;
}

// AccelForge's regression (tests/test_regression.py) minimises the energy-delay product
// (Metrics.ENERGY_DELAY_PRODUCT on every arch but snowcat); "fused" keeps its MainMemory's
// `keep: ~Intermediates, may_keep: All`, so each intermediate may stay on chip or not (mapfuse:
// free fusion), "unfused" sets MainMemory `keep: All`, so every tensor goes through DRAM
// (mapfuse: no fusion). Returns mapfuse's EDP-optimal solution.
FfmSolution search(const Workload& w, const Core& c, bool fused, FfmResult* out = nullptr) {
  FfmOptions o;
  o.pmappings.allow_fusion = fused;
  FfmResult r = ffm_search(w, c, o);
  REQUIRE(r.best(Objective::Edp) != nullptr);
  const FfmSolution best = *r.best(Objective::Edp);
  if (out) *out = std::move(r);
  return best;
}
FfmSolution search(const Workload& w, const std::string& arch, bool fused) {
  return search(w, test::preset_core(arch), fused);
}

}  // namespace

// "simple": every storage action costs 1 unit per bit and a MAC 1, the MAC does one operation per
// cycle and storage is unlimited in size and bandwidth. With no register at the MAC, every MAC
// reads its weight and input and read-modify-writes its output at the storage it is mapped to,
// the first read of each output skipped, so per Einsum: energy = MACs + 8 bits x (4 MACs - outputs),
// whatever the tiling, fused or not (both levels cost the same); latency = MACs.
TEST_CASE("ffm vs accelforge: simple, two 64x64x64 matmuls (fused and unfused) match exactly") {
  const Workload w = matmuls(2, 64, 64);
  const double macs = 64.0 * 64 * 64, outputs = 64.0 * 64;
  const double hand_energy = 2 * (macs + 8 * (4 * macs - outputs));
  for (bool fusion : {true, false}) {
    CAPTURE(fusion);
    const Oracle af = oracle(std::string("simple|matmuls|KN=64,M=64,N_EINSUMS=2|") + (fusion ? "fused" : "unfused"));
    CHECK(af.energy == hand_energy);  // 17,235,968: the oracle is the hand count
    CHECK(af.latency == 2 * macs);
    const FfmSolution best = search(w, "accelforge_simple", fusion);
    CHECK(best.energy_pj == doctest::Approx(af.energy).epsilon(1e-12));
    CHECK(best.cycles == doctest::Approx(af.latency).epsilon(1e-12));
  }
}

TEST_CASE("ffm vs accelforge: simple, three_matmuls_annotated (128^3 x 3) matches exactly") {
  const Workload w = matmuls(3, 128, 128);
  const double macs = 128.0 * 128 * 128, outputs = 128.0 * 128;
  for (bool fusion : {true, false}) {
    CAPTURE(fusion);
    const Oracle af = oracle(std::string("simple|three_matmuls_annotated||") + (fusion ? "fused" : "unfused"));
    CHECK(af.energy == 3 * (macs + 8 * (4 * macs - outputs)));  // 207,224,832
    CHECK(af.latency == 3 * macs);
    const FfmSolution best = search(w, "accelforge_simple", fusion);
    CHECK(best.energy_pj == doctest::Approx(af.energy).epsilon(1e-12));
    CHECK(best.cycles == doctest::Approx(af.latency).epsilon(1e-12));
  }
}

// GPT-3 175B prefill (batch 1, 2,048 tokens) as AccelForge's regression runs it on `simple`: the
// zoo's ten Einsums at 175B's sizes, every value 16 bits (_gpt3.yaml). mapfuse counts words of a
// level's width, so the core's words are 16 bits at 16 units each (1 per bit). Every MAC Einsum's
// latency is its MAC count and the softmax's its operations, as in the oracle's per-Einsum column;
// the copy I takes one cycle per value here and none in AccelForge (2.2e-6 of the total), which
// is also the whole energy difference.
TEST_CASE("ffm vs accelforge: simple, GPT-3 175B prefill with 16-bit values matches Einsum by Einsum") {
  Workload w = load_workload("gpt3_6.7b", {.batch = 1, .tokens = 2048});
  for (Einsum& e : w.einsums)
    for (Rank& r : e.ranks) {
      if (r.name == "H") r.size = 96;
      if (r.name == "D" || r.name == "G" || r.name == "J") r.size = 12288;
      if (r.name == "C") r.size = 49152;
    }
  finalize(w);
  Core c = test::preset_core("accelforge_simple");
  for (Level& lv : c.levels) lv.word_bits = 16, lv.read_pj *= 2, lv.write_pj *= 2, lv.update_pj *= 2;
  const double copy = 2048.0 * 12288;  // the copy's values: one cycle each, read and written once
  for (bool fusion : {true, false}) {
    CAPTURE(fusion);
    const Oracle af = oracle(std::string("simple|gpt3_175B|BATCH_SIZE=1,DECODE=False,N_NEW_TOKENS=2048|") +
                             (fusion ? "fused" : "unfused"));
    FfmResult r;
    const FfmSolution best = search(w, c, fusion, &r);
    REQUIRE(af.einsum_latency.size() == w.einsums.size());
    for (size_t i = 0; i < w.einsums.size(); ++i) {
      CAPTURE(w.einsums[i].name);
      const Choice& ch = best.choices[i];
      const double cycles = r.pmappings[i].pmappings[static_cast<size_t>(ch.context)][static_cast<size_t>(ch.pmapping)].cycles;
      if (i == 0) {
        CHECK(cycles == copy);
        CHECK(af.einsum_latency[i] == 0);
        continue;
      }
      CHECK(cycles == static_cast<double>(w.einsums[i].operations()));  // MACs, or the softmax's operations
      CHECK(cycles == doctest::Approx(af.einsum_latency[i]).epsilon(5e-6));  // the CSV keeps 6 digits
    }
    CHECK(best.cycles == doctest::Approx(af.latency + copy).epsilon(1e-8));
    CHECK(best.energy_pj == doctest::Approx(af.energy + copy * (1 + 2 * 16)).epsilon(1e-8));
  }
}

// TPUv4i with the mapspace its YAML states (accelforge_tpu_v4i: intermediates backed in the
// GlobalBuffer, forced LocalBuffer / Register keeps, no multicast across the four cores, full
// fan-out use). mapfuse counts as Timeloop v3 and differs from AccelForge's model in exactly two
// ways, both checked here to the pJ and to the cycle (docs/validation.md):
//  - AccelForge charges a LocalBuffer read for every output word drained to the level above
//    (4,096 or 16,384 words x 1.992 pJ per Einsum); Timeloop's drain costs the parent's update only;
//  - Timeloop (and mapfuse) round each Einsum's latency up to whole cycles (1.05 GHz).
TEST_CASE("ffm vs accelforge: tpu_v4i matmul chains within 1 % energy, the difference to the pJ") {
  struct Case {
    const char* key;
    int n;
    int64_t size;
  };
  const Core& tpu = test::preset_core("accelforge_tpu_v4i");
  const double drain_pj = tpu.levels[tpu.level_index("LocalBuffer")].read_pj;
  CHECK(drain_pj == 1.992);
  for (const Case k : {Case{"tpu_v4i|matmuls|KN=64,M=64,N_EINSUMS=2|", 2, 64}, Case{"tpu_v4i|three_matmuls_annotated||", 3, 128}})
    for (bool fusion : {true, false}) {
      CAPTURE(k.key);
      CAPTURE(fusion);
      const Oracle af = oracle(std::string(k.key) + (fusion ? "fused" : "unfused"));
      REQUIRE(af.einsum_latency.size() == static_cast<size_t>(k.n));
      const FfmSolution best = search(matmuls(k.n, k.size, k.size), "accelforge_tpu_v4i", fusion);
      const double outputs = static_cast<double>(k.size * k.size);
      CHECK(best.energy_pj == doctest::Approx(af.energy * 1e12 - k.n * outputs * drain_pj).epsilon(1e-6));
      CHECK(std::abs(best.energy_pj / (af.energy * 1e12) - 1) < 0.01);
      double cycles = 0;
      for (double s : af.einsum_latency) cycles += std::ceil(s * 1.05e9 - 1e-3);
      CHECK(best.cycles == cycles);
      CHECK(std::abs(best.cycles / (af.latency * 1.05e9) - 1) < 0.05);
    }
}

namespace {

// One Einsum's per-component figures in AccelForge's regression JSON (tests/regression_reference.json
// @ 1c1929c2): actions per (component, tensor, action) and the dynamic energy (every
// energy_per_component entry of the Einsum but leakage), in J.
struct OracleEinsum {
  std::map<std::pair<std::string, std::string>, std::pair<double, double>> actions;  // (component, tensor) -> (read, write)
  double dynamic_energy = 0;
};

OracleEinsum oracle_einsum(const std::string& key, const std::string& einsum) {
  std::ifstream in(test::shared_data("ffm/accelforge/HEAD/tests/regression_reference.json"));
  REQUIRE(in.good());
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t begin = text.find("\"" + key + "\"");
  REQUIRE(begin != std::string::npos);
  const size_t end = std::min(text.size(), text.find("\n  \"", begin + 1));  // the next case
  const std::string body = text.substr(begin, end - begin);
  OracleEinsum o;
  const std::string q = "'" + einsum + "', '([A-Za-z]+)', '";
  const std::regex energy("\"\\(" + q + "([a-z]+)'\\)\": ([0-9.e+-]+)");
  const std::regex action("\"\\(" + q + "([A-Za-z0-9]+)', '(read|write)'\\)\": ([0-9.e+-]+)");
  for (auto it = std::sregex_iterator(body.begin(), body.end(), energy); it != std::sregex_iterator(); ++it)
    if ((*it)[2] != "leak") o.dynamic_energy += std::stod((*it)[3]);
  for (auto it = std::sregex_iterator(body.begin(), body.end(), action); it != std::sregex_iterator(); ++it) {
    auto& rw = o.actions[{(*it)[1], (*it)[2]}];
    ((*it)[3] == "read" ? rw.first : rw.second) = std::stod((*it)[4]);
  }
  return o;
}

// The part of AccelForge's pmapping templates that decides this comparison
// (accelforge/mapper/FFM/_make_pmappings/make_pmapping_templates/make_loops.py,
// insert_temporal_loops, @1c1929c2), for one matmul of a chain on eyeriss. A template is a list
// of storage nodes, one tensor each, with loops allowed only between consecutive nodes; two
// "optimality-preserving" rules then strike ranks from each block of loops: below a node that
// does not back its tensor, the ranks that index that tensor ("lower the node through them
// instead"); above a node, the ranks that do not index its tensor ("raise the node through them
// instead"), this one only once every fused tensor's backing node is placed. The block between
// nodes A and B thus iterates only the ranks irrelevant to A (every rank if A backs its tensor)
// and relevant to B, the block under the OutputScratchpad only the ranks irrelevant to the
// output. Spatial loops must reuse the fan-out's `reuse` tensor: X (reuse: weight) spreads ranks
// that do not index the weight, Y (reuse: output) those that do not index the output.
//
// One mapspace constraint text per template: which tensors the GlobalBuffer keeps and each
// block's loop order, for the Einsum's layer. mapfuse puts all of a level's loops under all of
// its tensors:
//  - unfused (`onchip` empty): the block above the first GlobalBuffer node and, with two nodes,
//    the block between them (ranks irrelevant to the first) go to MainMemory's loops: the first
//    node's tile then sees only irrelevant loops between it and its old place, which changes no
//    count. With three nodes the blocks between them are left out.
//  - fused (`onchip`: the tensors backed in the GlobalBuffer, which come first, with no loops
//    above them but the shared ones): the blocks between GlobalBuffer nodes go, in order, to the
//    GlobalBuffer's loops; a rank in two blocks iterates in one of them (one template each).
// Both are subsets of AccelForge's templates.
std::vector<std::string> accelforge_templates(const Einsum& e, TensorMask onchip) {
  using Ranks = std::vector<std::string>;
  auto irrelevant = [&](int t) {
    Ranks out;
    for (size_t r = 0; r < e.ranks.size(); ++r)
      if (!e.rank_relevant(t, static_cast<int>(r))) out.push_back(e.ranks[r].name);
    return out;
  };
  auto minus = [](Ranks a, const Ranks& b) {
    std::erase_if(a, [&](const std::string& x) { return std::find(b.begin(), b.end(), x) != b.end(); });
    return a;
  };
  auto perms = [](Ranks v) {
    std::vector<Ranks> out;
    std::sort(v.begin(), v.end());
    do out.push_back(v);
    while (std::next_permutation(v.begin(), v.end()));
    return out;
  };
  auto list = [](const Ranks& v) {
    std::string s = "[";
    for (const auto& x : v) s += (s.size() > 1 ? ", \"" : "\"") + x + "\"";
    return s + "]";
  };
  const char* role[] = {"input", "weight", "output"};
  Ranks all;
  for (const auto& r : e.ranks) all.push_back(r.name);
  const int in = 0, wt = 1, out = 2;  // make_matmul's tensor order
  const std::string layer = "layer = \"" + e.name + "\"\n";
  auto level = [&](const char* name, const Ranks& order) {
    return "[[constraint]]\nlevel = \"" + std::string(name) + "\"\n" + layer + "temporal_order = " + list(order) + "\n";
  };
  // One rank per scratchpad block for a matmul, so one order each.
  const std::string scratchpads = level("InputScratchpad", minus(irrelevant(in), irrelevant(wt))) +
                                  level("WeightScratchpad", minus(irrelevant(wt), irrelevant(out))) +
                                  level("OutputScratchpad", irrelevant(out));
  auto global_buffer = [&](const std::vector<int>& gb, const Ranks& order) {
    std::string keep;
    for (int t : gb) keep += std::string(keep.empty() ? "\"" : ", \"") + role[t] + "\"";
    return level("GlobalBuffer", order) + "keep = [" + keep + "]\nspatial_x = " + list(irrelevant(wt)) +
           "\nspatial_y = " + list(irrelevant(out)) + "\n";
  };
  std::vector<std::string> files;
  for (unsigned subset = 0; subset < 8; ++subset) {
    if ((subset & onchip) != onchip) continue;
    std::vector<int> gb;
    for (int t : {in, wt, out})
      if (subset >> t & 1) gb.push_back(t);
    do {
      if (onchip == 0) {
        const int first = gb.empty() ? in : gb.front();
        Ranks between;
        if (gb.size() == 2) between = minus(irrelevant(gb[0]), irrelevant(gb[1]));
        const Ranks below = gb.empty() ? Ranks{} : minus(irrelevant(gb.back()), irrelevant(in));
        for (Ranks mm : perms(minus(all, irrelevant(first)))) {
          mm.insert(mm.end(), between.begin(), between.end());
          for (const Ranks& g : perms(below)) files.push_back(level("MainMemory", mm) + global_buffer(gb, g) + scratchpads);
        }
        continue;
      }
      const size_t backed = static_cast<size_t>(std::popcount(static_cast<unsigned>(onchip)));
      if (!std::all_of(gb.begin(), gb.begin() + static_cast<long>(backed), [&](int t) { return onchip >> t & 1; })) continue;
      std::vector<Ranks> blocks;  // below the last backed node, then below each later node
      for (size_t i = backed - 1; i < gb.size(); ++i) {
        const Ranks above = i + 1 < backed ? Ranks{} : (i + 1 == backed ? all : irrelevant(gb[i]));
        blocks.push_back(minus(above, irrelevant(i + 1 < gb.size() ? gb[i + 1] : in)));
      }
      // A rank in several blocks iterates in one of them: every choice of home.
      Ranks dup;
      for (const auto& r : all) {
        int n = 0;
        for (const Ranks& b : blocks) n += std::count(b.begin(), b.end(), r) > 0;
        if (n > 1) dup.push_back(r);
      }
      std::vector<std::vector<Ranks>> done{blocks};
      for (const std::string& r : dup) {
        std::vector<std::vector<Ranks>> next;
        for (const auto& bl : done)
          for (size_t home = 0; home < bl.size(); ++home) {
            if (std::find(bl[home].begin(), bl[home].end(), r) == bl[home].end()) continue;
            auto v = bl;
            for (size_t i = 0; i < v.size(); ++i)
              if (i != home) std::erase(v[i], r);
            next.push_back(v);
          }
        done = next;
      }
      for (const auto& bl : done) {
        std::vector<Ranks> orders{{}};
        for (const Ranks& b : bl) {
          std::vector<Ranks> grown;
          for (const Ranks& o : orders)
            for (const Ranks& p : perms(b)) {
              Ranks x = o;
              x.insert(x.end(), p.begin(), p.end());
              grown.push_back(x);
            }
          orders = grown;
        }
        for (const Ranks& o : orders) files.push_back(global_buffer(gb, o) + scratchpads);
      }
    } while (std::next_permutation(gb.begin(), gb.end()));
  }
  return files;
}

// Checks a mapping's counts of one Einsum against AccelForge's, (component, tensor) by
// (component, tensor), and returns the energy of the reads AccelForge adds: it charges a read of
// every output word a level drains to its parent, where Timeloop, and so mapfuse, charge the
// parent's update only. `access` is the Einsum's whole count (one tile when nothing is shared).
double check_counts(const OracleEinsum& af, const Einsum& e, const std::vector<std::string>& names, const Core& c,
                    const CostResult& cost, const Mapping& m) {
  double drain_pj = 0;
  size_t counted = 0;
  for (size_t l = 0; l < c.levels.size(); ++l)
    for (size_t t = 0; t < 3; ++t) {
      const TensorAccesses& a = cost.access[l][t];
      const auto it = af.actions.find({c.levels[l].name, names[t]});
      if (it == af.actions.end()) {  // bypassed in AccelForge's optimum: bypassed here too
        CHECK(a.total() == 0);
        continue;
      }
      ++counted;
      CAPTURE(c.levels[l].name);
      CAPTURE(names[t]);
      const double words = c.levels[l].name == "GlobalBuffer" ? 8.0 : 1.0 / 8;  // 64-bit actions, else bits
      const double read = it->second.first * words, write = it->second.second * words;
      CHECK(static_cast<double>(a.fills + a.updates) == write);
      size_t parent = l + 1;  // the next level out that keeps the output, if any
      while (t == 2 && parent < c.levels.size() && cost.access[parent][t].total() == 0) ++parent;
      if (t != 2 || parent == c.levels.size()) {
        CHECK(static_cast<double>(a.reads) == read);
        continue;
      }
      // The words drained: the parent's updates times the partial sums reduced on the way (the
      // Y fan-out spreads K).
      int64_t reduced = 1;
      for (size_t k = l + 1; k <= parent; ++k)
        for (const Loop& loop : m.levels[k].loops)
          if (loop.kind != LoopKind::Temporal && !e.rank_relevant(2, loop.rank)) reduced *= loop.factor;
      const int64_t drained = cost.access[parent][t].updates * reduced;
      CHECK(read - static_cast<double>(a.reads) == static_cast<double>(drained));
      drain_pj += static_cast<double>(drained) * c.levels[l].read_pj;
    }
  CHECK(counted == af.actions.size());
  return drain_pj;
}

}  // namespace

// Eyeriss is the one architecture where mapfuse's optimum beats AccelForge's by more than the
// counting conventions (8.5-14.6 % in energy with leakage added, latency equal). The cause is
// AccelForge's template rules above: they assume a node can always be lowered through the ranks
// that index its tensor, but when an irrelevant loop sits between (GlobalBuffer[T0] N=2 M=4, so
// that the weights bypassing the GlobalBuffer stay in the WeightScratchpads across M), lowering
// moves M outside N and refetches every weight per M. Here mapfuse searches exactly AccelForge's
// templates and must find AccelForge's optimum: every (component, tensor) count of the oracle,
// and its dynamic energy once the drain reads are added. mapfuse's own mapspace then holds a
// mapping at least 8 % cheaper at the same latency.
TEST_CASE("ffm vs accelforge: eyeriss unfused, AccelForge's templates reproduce its optimum; mapfuse's lies outside them") {
  const Core& eyeriss = test::preset_core("accelforge_eyeriss");
  struct Case {
    const char* key;
    int64_t size;
    const char* einsum;
  };
  for (const Case k : {Case{"eyeriss|matmuls|KN=64,M=64,N_EINSUMS=2|unfused", 64, "Matmul0"},
                       Case{"eyeriss|three_matmuls_annotated||unfused", 128, "Matmul1"}}) {
    const std::string key = k.key;
    CAPTURE(key);
    const Einsum e = make_matmul(k.einsum, k.size, k.size, k.size, "T0", "W0", "T1");
    MapperResult best;
    for (const std::string& toml : accelforge_templates(e, 0)) {
      const Mapspace space = make_mapspace(parse_constraints(toml, "accelforge template"), e, eyeriss);
      MapperResult r = exhaustive_search(e, eyeriss, space, {Objective::Edp});
      if (r.best && (!best.best || r.cost.edp() < best.cost.edp())) best = std::move(r);
    }
    REQUIRE(best.best);
    CAPTURE(to_text(*best.best, e, eyeriss));
    const OracleEinsum af = oracle_einsum(key, k.einsum);
    const double drain_pj = check_counts(af, e, {"T0", "W0", "T1"}, eyeriss, best.cost, *best.best);
    CHECK(best.cost.energy_pj + drain_pj == doctest::Approx(af.dynamic_energy * 1e12).epsilon(1e-6));
    // mapfuse's own optimum, at the same latency, is outside every template.
    const MapperResult free = exhaustive_search(e, eyeriss, Mapspace{}, {Objective::Edp});
    REQUIRE(free.best);
    CHECK(free.cost.cycles == best.cost.cycles);
    CHECK(free.cost.energy_pj < 0.92 * best.cost.energy_pj);
  }
}

// The same for the fused cases (every intermediate backed in the GlobalBuffer), on the whole
// chain through mapfuse ffm with the templates as per-layer constraints. The templates of one
// Einsum are tried with the others' fixed, Einsum after Einsum, until nothing changes. The result
// shares no loop, so each Einsum's tile is the whole Einsum and its counts compare directly.
TEST_CASE("ffm vs accelforge: eyeriss fused, AccelForge's templates reproduce its optimum; mapfuse's lies outside them") {
  const Core& eyeriss = test::preset_core("accelforge_eyeriss");
  struct Case {
    const char* key;
    int n;
    int64_t size;
    int first;  // AccelForge's number of the first Einsum (Matmul0 or Matmul1)
  };
  for (const Case k : {Case{"eyeriss|matmuls|KN=64,M=64,N_EINSUMS=2|fused", 2, 64, 0},
                       Case{"eyeriss|three_matmuls_annotated||fused", 3, 128, 1}}) {
    const std::string key = k.key;
    CAPTURE(key);
    const Workload w = matmuls(k.n, k.size, k.size);
    FfmOptions o;
    for (int i = 1; i < k.n; ++i) o.must_fuse.push_back(w.tensor_index("T" + std::to_string(i)));
    std::vector<std::vector<std::string>> templates;
    for (int i = 0; i < k.n; ++i)
      templates.push_back(accelforge_templates(w.einsums[static_cast<size_t>(i)],
                                               static_cast<TensorMask>((i > 0 ? 1 : 0) | (i + 1 < k.n ? 4 : 0))));
    std::vector<size_t> pick(static_cast<size_t>(k.n), 0);
    auto solve = [&](const std::vector<size_t>& p) -> std::optional<FfmSolution> {
      std::string toml;
      for (int i = 0; i < k.n; ++i) toml += templates[static_cast<size_t>(i)][p[static_cast<size_t>(i)]];
      o.pmappings.constraints = parse_constraints(toml, "accelforge templates");
      const FfmResult r = ffm_search(w, eyeriss, o);
      if (const FfmSolution* s = r.best(Objective::Edp)) return *s;
      return std::nullopt;
    };
    std::optional<FfmSolution> best = solve(pick);
    for (bool changed = true; changed;) {
      changed = false;
      for (int i = 0; i < k.n; ++i)
        for (size_t t = 0; t < templates[static_cast<size_t>(i)].size(); ++t) {
          std::vector<size_t> p = pick;
          p[static_cast<size_t>(i)] = t;
          const std::optional<FfmSolution> s = solve(p);
          if (s && (!best || s->edp() < best->edp())) best = s, pick = p, changed = true;
        }
    }
    REQUIRE(best);
    CAPTURE(to_text(best->tree, w, eyeriss));
    REQUIRE(best->tree.groups.size() == 1);
    REQUIRE(best->tree.groups[0].shared_loops.empty());
    const FusedCost cost = evaluate_fused(best->tree, w, eyeriss);
    REQUIRE(cost.valid);
    double energy = 0;
    for (int i = 0; i < k.n; ++i) {
      const std::string name = "Matmul" + std::to_string(i + k.first);
      CAPTURE(name);
      const OracleEinsum af = oracle_einsum(key, name);
      const Einsum& e = w.einsums[static_cast<size_t>(i)];
      std::vector<std::string> names;
      for (const auto& t : e.tensors) names.push_back(t.name);
      const double drain_pj = check_counts(af, e, names, eyeriss, cost.tiles[static_cast<size_t>(i)],
                                           best->tree.groups[0].mappings[static_cast<size_t>(i)]);
      CHECK(cost.tiles[static_cast<size_t>(i)].energy_pj + drain_pj == doctest::Approx(af.dynamic_energy * 1e12).epsilon(1e-6));
      energy += cost.tiles[static_cast<size_t>(i)].energy_pj;
    }
    CHECK(energy == doctest::Approx(best->energy_pj).epsilon(1e-12));
    // mapfuse's own optimum, at the same latency, is outside every template.
    o.pmappings.constraints.clear();
    const FfmResult free = ffm_search(w, eyeriss, o);
    REQUIRE(free.best(Objective::Edp) != nullptr);
    CHECK(free.best(Objective::Edp)->cycles == best->cycles);
    CHECK(free.best(Objective::Edp)->energy_pj < 0.9 * best->energy_pj);
  }
}
