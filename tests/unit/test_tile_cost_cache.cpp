// The tile-cost cache (engine/search/stream/tile_cost_cache.hpp, docs/stream.md "Tile-cost cache"):
// costs bit-identical with and without it on a real workload, keys that tell cores apart by what
// they are (not their names), and a file that round-trips exactly, rejects corruption with its
// line and drops entries of another mapper or cost model.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "engine/arch/arch_toml.hpp"
#include "engine/common/error.hpp"
#include "engine/search/stream/tile_cost_cache.hpp"
#include "engine/search/stream/tile_costs.hpp"
#include "engine/workload/onnx_import.hpp"
#include "tile_workloads.hpp"

using namespace mapfuse;

namespace {

// Stream's ResNet-18 (ReLUs as layers) as bench_tile_cost.cpp tiles it for tpu_like_quad_core:
// one CT per output row, K over the four tpu cores, stacks 0..10 and 11..21; pools on pooling_4,
// adds on simd_5 (three layer-by-layer adds send operands off-chip).
struct ResNet {
  Workload w;
  TileSet ts;
  std::vector<int> core;
};

const ResNet& resnet18() {
  static const ResNet r = [] {
    ResNet out;
    OnnxOptions oo;
    oo.fold_unary = false;
    out.w = import_onnx(std::string(MAPFUSE_SHARED_DATA) + "/stream/classic_cb9dfc52/examples/workload/resnet18.onnx", oo);
    const Architecture a = load_architecture("tpu_like_quad_core");
    TilingOptions opt;
    opt.layers = stream_tiling(out.w, 4);
    std::vector<int> s0, s1;
    for (int i = 0; i <= 10; ++i) s0.push_back(i);
    for (int i = 11; i <= 21; ++i) s1.push_back(i);
    opt.stacks = layer_stacks_manual(out.w, {s0, s1});
    out.ts = generate_tiles(out.w, opt);
    const int pool = a.node_index("pooling_4"), simd = a.node_index("simd_5");
    for (size_t t = 0; t < out.ts.tiles.size(); ++t) {
      const Einsum& e = out.w.einsums[static_cast<size_t>(out.ts.tiles[t].layer)];
      out.core.push_back(e.op == OpKind::Pool                                   ? pool
                         : e.op == OpKind::Elementwise && e.tensors.size() > 2 ? simd
                                                                                : out.ts.tiles[t].group);
    }
    return out;
  }();
  return r;
}

// Bit-identical: every field compared with ==, doubles included.
void check_same(const std::vector<TileCost>& a, const std::vector<TileCost>& b) {
  REQUIRE(a.size() == b.size());
  size_t differ = 0;
  for (size_t t = 0; t < a.size(); ++t) {
    bool same = a[t].latency_cc == b[t].latency_cc && a[t].onchip_energy_pj == b[t].onchip_energy_pj &&
                a[t].offchip_energy_pj == b[t].offchip_energy_pj && a[t].operands.size() == b[t].operands.size();
    for (size_t i = 0; same && i < a[t].operands.size(); ++i)
      same = a[t].operands[i].offchip == b[t].operands[i].offchip &&
             a[t].operands[i].dram_bits_per_cycle == b[t].operands[i].dram_bits_per_cycle &&
             a[t].operands[i].memory_bits == b[t].operands[i].memory_bits;
    differ += !same;
  }
  CHECK(differ == 0);
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("mapfuse_" + std::to_string(::getpid()) + "_" + name)).string();
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_all(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

// The InputError's text when loading `path` (empty when it loads).
std::string load_error(const std::string& path) {
  TileCostCache c;
  try {
    load_tile_cost_cache(path, c);
  } catch (const InputError& e) {
    return e.what();
  }
  return {};
}

}  // namespace

TEST_CASE("tile-cost cache: ResNet-18's costs are bit-identical with and without it, across systems") {
  const ResNet& r = resnet18();
  const Architecture a = load_architecture("tpu_like_quad_core");
  // Another system: the same cores with the tpu cores' SRAM reads twice as expensive.
  Architecture b = a;
  for (int c = 0; c < 4; ++c) b.cores[static_cast<size_t>(c)].levels[2].read_pj *= 2;
  // And a, renamed: another system whose cores are a's under other names.
  Architecture renamed = a;
  renamed.name = "renamed";
  for (Core& c : renamed.cores) c.name += "_x";

  TileCostStats st;
  const std::vector<TileCost> cold_a = map_tile_costs(r.w, r.ts, a, r.core, {}, &st);
  const int64_t problems = st.mapper_problems;
  CHECK(st.tiles == 3866);
  CHECK(problems == 25);
  CHECK(st.cache_hits + st.cache_misses == 0);  // no cache
  const std::vector<TileCost> cold_b = map_tile_costs(r.w, r.ts, b, r.core, {});
  // b's costs differ from a's (else the check below could not tell the cores apart).
  size_t differ = 0;
  for (size_t t = 0; t < cold_a.size(); ++t) differ += cold_a[t].onchip_energy_pj != cold_b[t].onchip_energy_pj;
  CHECK(differ > 3000);

  TileCostCache cache;
  check_same(map_tile_costs(r.w, r.ts, a, r.core, {}, &st, &cache), cold_a);
  CHECK(st.cache_hits == 0);
  CHECK(st.cache_misses == problems);
  CHECK(cache.size() == static_cast<size_t>(problems));
  // b shares only its pooling and SIMD cores with a: their problems hit, the tpu cores' miss.
  check_same(map_tile_costs(r.w, r.ts, b, r.core, {}, &st, &cache), cold_b);
  CHECK(st.cache_hits > 0);
  CHECK(st.cache_misses > 0);
  CHECK(st.cache_hits + st.cache_misses == problems);
  const int64_t b_misses = st.cache_misses;
  CHECK(cache.size() == static_cast<size_t>(problems + b_misses));
  // Warm: no search at all, the same costs; identical cores under other names share the entries.
  check_same(map_tile_costs(r.w, r.ts, a, r.core, {}, &st, &cache), cold_a);
  CHECK(st.cache_hits == problems);
  CHECK(st.mapper_calls == 0);
  CHECK(st.mappings_evaluated == 0);
  check_same(map_tile_costs(r.w, r.ts, renamed, r.core, {}, &st, &cache), cold_a);
  CHECK(st.cache_hits == problems);

  // Options are part of the key: the cycles alone (no energy tie-break) is another search.
  TileCostOptions no_tiebreak;
  no_tiebreak.energy_tiebreak = false;
  std::vector<int> one(r.core.begin(), r.core.end());
  map_tile_costs(r.w, r.ts, a, one, no_tiebreak, &st, &cache);
  CHECK(st.cache_hits == 0);

  // Through a file: saved, loaded into a new cache, every problem found, the same costs.
  const std::string path = temp_path("resnet.tilecache");
  save_tile_cost_cache(path, cache);
  TileCostCache loaded;
  const CacheLoadResult lr = load_tile_cost_cache(path, loaded);
  CHECK(lr.status == CacheLoad::Loaded);
  CHECK(lr.entries == cache.size());
  check_same(map_tile_costs(r.w, r.ts, b, r.core, {}, &st, &loaded), cold_b);
  CHECK(st.cache_hits == problems);
  CHECK(loaded.to_text() == read_all(path));  // the same bytes again
  std::remove(path.c_str());
}

TEST_CASE("tile-cost cache: two threads sharing one cache get the uncached costs") {
  const Architecture a = load_architecture("tpu_like_quad_core");
  const Workload w = test::finalized({test::source("x", "a", 8, 8, 8), test::conv("conv1", "a", 8, 16, 8, 8, 3, 1, 1),
                                      test::conv("conv2", "conv1", 16, 8, 8, 8, 3, 1, 1)});
  const TileSet ts = generate_tiles(w, {});
  const std::vector<int> core(ts.tiles.size(), 1);
  const std::vector<TileCost> cold = map_tile_costs(w, ts, a, core, {});
  TileCostCache cache;
  std::vector<TileCost> r1, r2;
  std::thread t1([&] { r1 = map_tile_costs(w, ts, a, core, {}, nullptr, &cache); });
  std::thread t2([&] { r2 = map_tile_costs(w, ts, a, core, {}, nullptr, &cache); });
  t1.join();
  t2.join();
  check_same(r1, cold);
  check_same(r2, cold);
  CHECK(cache.size() == 3);  // the source and the two convs, each once however the threads raced
  // Every new entry is handed out once, as lines another cache reads back.
  const std::string fresh = cache.take_fresh();
  CHECK(std::count(fresh.begin(), fresh.end(), '\n') == 3);
  CHECK(cache.take_fresh().empty());
  TileCostCache other;
  other.add_lines(fresh);
  CHECK(other.to_text() == cache.to_text());
  TileCostStats st;
  check_same(map_tile_costs(w, ts, a, core, {}, &st, &other), cold);
  CHECK(st.cache_hits == 3);
}

TEST_CASE("tile-cost cache: the core fingerprint changes with every field the mapper reads, not the name") {
  const Core base = load_architecture("tpu_like_quad_core").cores.at(0);
  REQUIRE(base.levels.size() == 4);
  const std::string fp = core_fingerprint(base);
  Core named = base;
  named.name = "another";
  CHECK(core_fingerprint(named) == fp);
  const std::vector<std::pair<const char*, std::function<void(Core&)>>> changes = {
      {"entries", [](Core& c) { c.levels[2].entries += 1; }},
      {"word_bits", [](Core& c) { c.levels[2].word_bits *= 2; }},
      {"block_size", [](Core& c) { c.levels[2].block_size += 1; }},
      {"multiple_buffering", [](Core& c) { c.levels[2].multiple_buffering += 1; }},
      {"read_bandwidth", [](Core& c) { c.levels[2].read_bandwidth += 1; }},
      {"write_bandwidth", [](Core& c) { c.levels[2].write_bandwidth += 1; }},
      {"shared_bandwidth", [](Core& c) { c.levels[2].shared_bandwidth += 1; }},
      {"read_pj", [](Core& c) { c.levels[1].read_pj *= 1.0000001; }},
      {"write_pj", [](Core& c) { c.levels[1].write_pj += 0.5; }},
      {"update_pj", [](Core& c) { c.levels[1].update_pj += 0.5; }},
      {"level name", [](Core& c) { c.levels[1].name += "_"; }},
      {"may_keep", [](Core& c) { c.levels[1].may_keep ^= role_bit(TensorRole::Input); }},
      {"must_keep", [](Core& c) { c.levels[1].must_keep ^= role_bit(TensorRole::Weight); }},
      {"backs_intermediates", [](Core& c) { c.levels[2].backs_intermediates = !c.levels[2].backs_intermediates; }},
      {"fan-out x", [](Core& c) { c.levels[2].fanout.x += 1; }},
      {"fan-out y", [](Core& c) { c.levels[2].fanout.y += 1; }},
      {"x_ranks", [](Core& c) { c.levels[2].fanout.x_ranks.push_back("Z"); }},
      {"y_ranks", [](Core& c) { c.levels[2].fanout.y_ranks.push_back("Z"); }},
      {"x_reuse", [](Core& c) { c.levels[2].fanout.x_reuse ^= 1; }},
      {"y_multicast", [](Core& c) { c.levels[2].fanout.y_multicast ^= 1; }},
      {"x_min_usage", [](Core& c) { c.levels[2].fanout.x_min_usage += 0.25; }},
      {"instances", [](Core& c) { c.levels[0].instances += 1; }},
      {"energy fit", [](Core& c) { c.levels[2].fit = CapacityEnergyFit{1, 2}; }},
      {"compute energy", [](Core& c) { c.compute.energy_pj += 0.1; }},
      {"frequency", [](Core& c) { c.compute.frequency_hz *= 2; }},
      {"operators", [](Core& c) { c.runs ^= op_bit(OpKind::Pool); }},
      {"legacy fills", [](Core& c) { c.legacy_output_fills = !c.legacy_output_fills; }},
      {"vector unit", [](Core& c) { c.vector = VectorUnit{"V", 2, 16, 0.5}; }},
      {"levels", [](Core& c) { c.levels.pop_back(); }},
  };
  for (const auto& [what, change] : changes) {
    Core c = base;
    change(c);
    INFO(what);
    CHECK(core_fingerprint(c) != fp);
  }
}

TEST_CASE("tile-cost cache: a file of another mapper or model is dropped, a corrupt one named by line") {
  const Architecture a = load_architecture("tpu_like_quad_core");
  const Workload w = test::finalized({test::source("x", "a", 8, 8, 8), test::conv("conv1", "a", 8, 16, 8, 8, 3, 1, 1)});
  const TileSet ts = generate_tiles(w, {});
  const std::vector<int> core(ts.tiles.size(), 0);
  TileCostCache cache;
  map_tile_costs(w, ts, a, core, {}, nullptr, &cache);
  REQUIRE(cache.size() == 2);
  const std::string path = temp_path("small.tilecache");
  save_tile_cost_cache(path, cache);
  const std::string good = read_all(path);
  const std::string header = tile_cost_cache_header();
  REQUIRE(good.rfind(header + "\n", 0) == 0);
  CHECK(header.find("mapper=" + std::to_string(kTileCostMapperVersion)) != std::string::npos);
  CHECK(load_error(path).empty());

  SUBCASE("missing: nothing, no error") {
    std::remove(path.c_str());
    TileCostCache c;
    CHECK(load_tile_cost_cache(path, c).status == CacheLoad::Missing);
    CHECK(c.size() == 0);
  }
  SUBCASE("another mapper version or cost model: stale, nothing loaded, the reason named") {
    for (const std::string& from : {std::string("mapper=") + std::to_string(kTileCostMapperVersion), std::string("model=")}) {
      std::string old = good;
      const size_t at = old.find(from);
      REQUIRE(at != std::string::npos);
      old.replace(at, from.size(), from == "model=" ? "model=0" : "mapper=0");
      write_all(path, old);
      TileCostCache c;
      const CacheLoadResult lr = load_tile_cost_cache(path, c);
      CHECK(lr.status == CacheLoad::Stale);
      CHECK(c.size() == 0);
      CHECK(lr.message.find(path) != std::string::npos);
      CHECK(lr.message.find("another format, mapper or cost model") != std::string::npos);
    }
  }
  SUBCASE("not a cache") {
    write_all(path, "latency,energy\n1,2\n");
    const std::string e = load_error(path);
    CHECK(e.find(path + ":1:") != std::string::npos);
    CHECK(e.find("not a tile-cost cache") != std::string::npos);
  }
  SUBCASE("a digit changed in a cost: the checksum names line 2 or 3 and its offset") {
    std::string bad = good;
    const size_t line2 = bad.find('\n') + 1;
    const size_t sp = bad.find(' ', line2);  // after the key: the latency
    bad[sp + 1] = bad[sp + 1] == '9' ? '8' : static_cast<char>(bad[sp + 1] + 1);
    write_all(path, bad);
    const std::string e = load_error(path);
    CHECK(e.find(path + ":2:") != std::string::npos);
    CHECK(e.find("checksum mismatch") != std::string::npos);
    CHECK(e.find("byte offset " + std::to_string(line2)) != std::string::npos);
  }
  SUBCASE("cut short") {
    write_all(path, good.substr(0, good.size() - 10));
    const std::string e = load_error(path);
    CHECK(e.find(path + ":3:") != std::string::npos);
    CHECK(e.find("cut short") != std::string::npos);
  }
  SUBCASE("a line that is not an entry") {
    write_all(path, good + "hello\n");
    const std::string e = load_error(path);
    CHECK(e.find(path + ":4:") != std::string::npos);
  }
  std::remove(path.c_str());
}
