// Computation tiles and their dependency graph (engine/workload/tiles.hpp, tile_graph.hpp).
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <tuple>

#include "engine/common/csv.hpp"
#include "engine/common/error.hpp"
#include "engine/workload/onnx_import.hpp"
#include "engine/workload/tile_graph.hpp"
#include "engine/workload/zoo.hpp"
#include "test_support.hpp"
#include "tile_workloads.hpp"

using namespace mapfuse;

namespace {

using test::conv;
using test::finalized;
using test::source;

std::vector<Range> box_of(const TileSet& ts, int tile, int access) {
  auto b = ts.box(ts.tile_accesses(tile)[access]);
  return {b.begin(), b.end()};
}

using EdgeKey = std::tuple<int, int, int, int, int64_t, int64_t>;  // producer, consumer, kind, tensor, bits, producer bits
std::set<EdgeKey> edge_set(const TileGraph& g) {
  std::set<EdgeKey> s;
  for (size_t i = 0; i < g.edges.size(); ++i) {
    const TileEdge& e = g.edges[i];
    s.insert({e.producer, g.consumer(i), static_cast<int>(e.kind()), e.tensor, e.bits, g.producer_bits(e)});
  }
  return s;
}

}  // namespace

TEST_CASE("tiles: 3x3 stride-1 conv cut into rows: halo rows exact, clipped at the borders") {
  // X[1,2,6,5] produced by src; conv 3x3 pad 1, K=4: P=6, Q=5. Rank order R,S,P,Q,C,K,N.
  Workload w = finalized({source("in", "X", 2, 6, 5), conv("c", "X", 2, 4, 6, 5, 3, 1, 1)});
  TilingOptions opt;
  opt.stacks = layer_stacks_manual(w, {{0, 1}});
  opt.layers = {{{{"H", 0}}, {}}, {{{"P", 0}}, {}}};
  TileGraph g = build_tile_graph(w, opt);
  const TileSet& ts = g.tiles;
  REQUIRE(ts.tiles.size() == 12);
  CHECK(ts.layer_first == std::vector<int>{0, 6, 12});
  // Conv tiles are 6..11; accesses: weight, input, output.
  const std::vector<Range> rows_in = {{0, 2}, {0, 3}, {1, 4}, {2, 5}, {3, 6}, {4, 6}};
  for (int p = 0; p < 6; ++p) {
    const int t = 6 + p;
    CHECK(ts.tiles[t].sub_id == p);
    CHECK(ts.rank_ranges(t)[2] == Range{p, p + 1});
    CHECK(ts.rank_ranges(t)[0] == Range{0, 3});
    const auto in = box_of(ts, t, 1);
    CHECK(in == std::vector<Range>{{0, 1}, {0, 2}, rows_in[p], {0, 5}});
    CHECK(ts.tile_accesses(t)[1].bits == 2 * rows_in[p].size() * 5 * 8);
    CHECK(box_of(ts, t, 2) == std::vector<Range>{{0, 1}, {0, 4}, {p, p + 1}, {0, 5}});
    CHECK(ts.tile_accesses(t)[2].bits == 4 * 5 * 8);
    CHECK(box_of(ts, t, 0) == std::vector<Range>{{0, 3}, {0, 3}, {0, 2}, {0, 4}});
    CHECK(ts.tile_accesses(t)[0].bits == 3 * 3 * 2 * 4 * 8);
  }
  // Order: slot by slot, src row p then conv row p.
  for (int p = 0; p < 6; ++p) {
    CHECK(ts.tiles[p].priority == 2 * p);
    CHECK(ts.tiles[6 + p].priority == 2 * p + 1);
  }
  // Edges by hand: 5 + 5 intra; conv row p reads src rows p-1..p+1 (16 in all), one row of X each.
  std::set<EdgeKey> want;
  for (int p = 1; p < 6; ++p) {
    want.insert({p - 1, p, 0, -1, 0, 0});
    want.insert({6 + p - 1, 6 + p, 0, -1, 0, 0});
  }
  const int X = w.tensor_index("X");
  for (int p = 0; p < 6; ++p)
    for (int h = std::max(0, p - 1); h <= std::min(5, p + 1); ++h) want.insert({h, 6 + p, 1, X, 2 * 5 * 8, 2 * 5 * 8});
  CHECK(want.size() == 26);
  CHECK(edge_set(g) == want);
  // CSR: consumer-grouped.
  for (int t = 0; t < 12; ++t)
    for (int e = g.first_pred[t]; e < g.first_pred[t + 1]; ++e) CHECK(g.consumer(e) == t);
}

TEST_CASE("tiles: stride-2 conv in row tiles of 2; Pad and Ragged remainders") {
  // X[1,1,7,7]; conv 3x3 stride 2 pad 1: P = Q = 4; output row p reads rows 2p-1 .. 2p+1.
  Workload w = finalized({source("in", "X", 1, 7, 7), conv("c", "X", 1, 1, 4, 4, 3, 2, 1)});
  TilingOptions opt;
  opt.stacks = layer_stacks_manual(w, {{0, 1}});
  opt.layers = {{{{"H", 7}}, {}}, {{{"P", 2}}, {}}};
  TileSet ts = generate_tiles(w, opt);
  REQUIRE(ts.layer_first == std::vector<int>{0, 7, 9});
  CHECK(box_of(ts, 7, 1)[2] == Range{0, 4});  // rows -1..3, the -1 is padding
  CHECK(box_of(ts, 8, 1)[2] == Range{3, 7});  // rows 3..7, the 7 is padding
  CHECK(box_of(ts, 8, 1)[3] == Range{0, 7});  // columns -1..7 clipped to 0..6
  // Order: 2 slots (min of 7 and 2): slot 0 = src rows 0..2 (7*0/2 .. 7*1/2), conv tile 0.
  CHECK(ts.order == std::vector<int>{0, 1, 2, 7, 3, 4, 5, 6, 8});

  // P = 4 in 3 parts: tiles of 2; Pad keeps 3 tiles, the third all padding (empty boxes).
  opt.layers[1] = {{{"P", 3}}, {}};
  ts = generate_tiles(w, opt);
  REQUIRE(ts.layer_first.back() - ts.layer_first[1] == 3);
  CHECK(ts.rank_ranges(9)[2] == Range{4, 6});
  CHECK(ts.tile_accesses(9)[1].bits == 0);
  CHECK(ts.tile_accesses(9)[2].bits == 0);
  TileGraph g = connect_tiles(w, ts);
  for (int e = g.first_pred[9]; e < g.first_pred[10]; ++e) CHECK(g.edges[e].kind() == EdgeKind::Intra);
  opt.remainder = Remainder::Ragged;
  ts = generate_tiles(w, opt);
  CHECK(ts.layer_first.back() - ts.layer_first[1] == 2);
  // P = 5 in 2 ragged parts: 3 + 2.
  Workload w5 = finalized({source("in", "X", 1, 9, 9), conv("c", "X", 1, 1, 5, 5, 3, 2, 1)});
  opt.stacks = layer_stacks_manual(w5, {{0, 1}});
  opt.layers = {{{{"H", 1}}, {}}, {{{"P", 2}}, {}}};
  ts = generate_tiles(w5, opt);
  CHECK(ts.rank_ranges(1)[2] == Range{0, 3});
  CHECK(ts.rank_ranges(2)[2] == Range{3, 5});
  CHECK(box_of(ts, 2, 1)[2] == Range{5, 9});  // rows 5..9, 9 is padding

  // Tiles given by size, two user loops (P outer by size 2, Q inner in 2 parts): P = 5 gives
  // ceil(5/2) = 3 row tiles, Q = 5 gives tiles of 3; sub id = 2 * p_tile + q_tile.
  opt.remainder = Remainder::Ragged;
  opt.layers = {{}, {{{"P", 0, 2}, {"Q", 2}}, {}}};
  ts = generate_tiles(w5, opt);
  REQUIRE(ts.layer_first == std::vector<int>{0, 1, 7});
  CHECK(ts.rank_ranges(1 + 3)[2] == Range{2, 4});  // p tile 1
  CHECK(ts.rank_ranges(1 + 3)[3] == Range{3, 5});  // q tile 1, ragged
  CHECK(ts.rank_ranges(1 + 4)[2] == Range{4, 5});  // p tile 2, ragged
  CHECK(box_of(ts, 1 + 4, 1)[2] == Range{7, 9});   // rows 7..9, 9 is padding
  CHECK(box_of(ts, 1 + 3, 1)[3] == Range{5, 9});   // columns 5..9, 9 is padding
  opt.remainder = Remainder::Pad;
  ts = generate_tiles(w5, opt);
  CHECK(ts.rank_ranges(1 + 4)[2] == Range{4, 6});  // padded to 6
  opt.layers[1].intra[0].size = -1;
  CHECK_THROWS_AS(generate_tiles(w5, opt), InputError);
}

TEST_CASE("tiles: K split over 4 cores: sub ids inter-core fastest, groups, edges to every group") {
  // src -> c1 (K=8, split 4 across cores, rows) -> c2 (reads all 8 channels), 1x1 convs on 3 rows.
  Workload w = finalized({source("in", "X", 2, 3, 4), conv("c1", "X", 2, 8, 3, 4, 1, 1, 0),
                          conv("c2", "c1", 8, 2, 3, 4, 1, 1, 0)});
  TilingOptions opt;
  opt.stacks = layer_stacks_manual(w, {{0, 1, 2}});
  opt.layers = {{{{"H", 0}}, {}}, {{{"P", 0}}, {{"K", 4}}}, {{{"P", 0}}, {}}};
  TileGraph g = build_tile_graph(w, opt);
  const TileSet& ts = g.tiles;
  REQUIRE(ts.layer_first == std::vector<int>{0, 3, 15, 18});
  CHECK(ts.layer_groups == std::vector<int>{1, 4, 1});
  for (int sub = 0; sub < 12; ++sub) {
    const int t = 3 + sub, row = sub / 4, grp = sub % 4;
    CHECK(ts.tiles[t].group == grp);
    CHECK(ts.rank_ranges(t)[5] == Range{2 * grp, 2 * grp + 2});  // K
    CHECK(ts.rank_ranges(t)[2] == Range{row, row + 1});          // P
    CHECK(box_of(ts, t, 0)[3] == Range{2 * grp, 2 * grp + 2});   // weight K slice
    CHECK(box_of(ts, t, 2)[1] == Range{2 * grp, 2 * grp + 2});   // output channels
    CHECK(ts.tile_accesses(t)[2].bits == 2 * 4 * 8);
  }
  // Intra edges per group: sub s -> s + 4; c2 row r reads c1 row r of every group.
  std::set<EdgeKey> want;
  for (int r = 1; r < 3; ++r) want.insert({r - 1, r, 0, -1, 0, 0}), want.insert({15 + r - 1, 15 + r, 0, -1, 0, 0});
  for (int s = 4; s < 12; ++s) want.insert({3 + s - 4, 3 + s, 0, -1, 0, 0});
  for (int r = 0; r < 3; ++r) {
    want.insert({r, 3 + 4 * r, 1, w.tensor_index("X"), 2 * 4 * 8, 2 * 4 * 8});
    for (int grp = 0; grp < 4; ++grp) want.insert({r, 3 + 4 * r + grp, 1, w.tensor_index("X"), 64, 64});
    for (int grp = 0; grp < 4; ++grp) want.insert({3 + 4 * r + grp, 15 + r, 1, w.tensor_index("c1"), 64, 64});
  }
  CHECK(edge_set(g) == want);
  // Order: per row slot, src, then c1's four groups, then c2.
  CHECK(ts.order == std::vector<int>{0, 3, 4, 5, 6, 15, 1, 7, 8, 9, 10, 16, 2, 11, 12, 13, 14, 17});
}

TEST_CASE("tiles: residual add with two producers of different tile sizes") {
  // a: 6 rows in tiles of 3; b: one row per tile; add: one row per tile.
  Einsum add;
  add.name = "add";
  add.op = OpKind::Elementwise;
  add.ranks = {{"N", 1}, {"C", 2}, {"H", 6}, {"W", 4}};
  const std::vector<Projection> id = {{{0, 1}}, {{1, 1}}, {{2, 1}}, {{3, 1}}};
  add.tensors = {{"A", TensorRole::Input, id, 8}, {"B", TensorRole::Input, id, 8}, {"S", TensorRole::Output, id, 8}};
  Workload w = finalized({source("in", "A", 2, 6, 4), source("A", "B", 2, 6, 4), add});
  TilingOptions opt;
  opt.stacks = layer_stacks_manual(w, {{0, 1, 2}});
  opt.layers = {{{{"H", 2}}, {}}, {{{"H", 0}}, {}}, {{{"H", 0}}, {}}};
  TileGraph g = build_tile_graph(w, opt);
  REQUIRE(g.tiles.layer_first == std::vector<int>{0, 2, 8, 14});
  const int A = w.tensor_index("A"), B = w.tensor_index("B");
  for (int h = 0; h < 6; ++h) {
    std::set<EdgeKey> got;
    for (int e = g.first_pred[8 + h]; e < g.first_pred[8 + h + 1]; ++e) {
      const auto& x = g.edges[e];
      got.insert({x.producer, 8 + h, static_cast<int>(x.kind()), x.tensor, x.bits, g.producer_bits(x)});
    }
    std::set<EdgeKey> want = {{h / 3, 8 + h, 1, A, 64, 3 * 64}, {2 + h, 8 + h, 1, B, 64, 64}};
    if (h > 0) want.insert({8 + h - 1, 8 + h, 0, -1, 0, 0});
    CHECK(got == want);
  }
  // Order: 2 slots (min(2, 6, 6)); slot 0 = a tile 0, b rows 0..2, add rows 0..2.
  CHECK(g.tiles.order == std::vector<int>{0, 2, 3, 4, 8, 9, 10, 1, 5, 6, 7, 11, 12, 13});
}

TEST_CASE("tiles: concat reads each input at its place along the axis (offset)") {
  // cat[n, c, h, w] = A[n, c, h, w] for c < 2, B[n, c - 2, h, w] for c >= 2 (the ONNX importer's form).
  Einsum cat;
  cat.name = "cat";
  cat.op = OpKind::Copy;
  cat.ranks = {{"N", 1}, {"C", 5}, {"H", 2}, {"W", 2}};
  const std::vector<Projection> id = {{{0, 1}}, {{1, 1}}, {{2, 1}}, {{3, 1}}};
  cat.tensors = {{"A", TensorRole::Input, id, 8, {0, 0, 0, 0}},
                 {"B", TensorRole::Input, id, 8, {0, -2, 0, 0}},
                 {"O", TensorRole::Output, id, 8}};
  Workload w = finalized({source("in", "A", 2, 2, 2), source("in2", "B", 3, 2, 2), cat});
  TilingOptions opt;
  opt.stacks = layer_stacks_manual(w, {{0, 1, 2}});
  opt.layers = {{{{"C", 0}}, {}}, {{{"C", 0}}, {}}, {{{"C", 0}}, {}}};
  TileGraph g = build_tile_graph(w, opt);
  REQUIRE(g.tiles.layer_first == std::vector<int>{0, 2, 5, 10});
  for (int c = 0; c < 5; ++c) {
    const int t = 5 + c;
    const auto a = box_of(g.tiles, t, 0), b = box_of(g.tiles, t, 1);
    CHECK(g.tiles.tile_accesses(t)[0].bits == (c < 2 ? 32 : 0));
    CHECK(g.tiles.tile_accesses(t)[1].bits == (c < 2 ? 0 : 32));
    if (c < 2) CHECK(a[1] == Range{c, c + 1});
    else CHECK(b[1] == Range{c - 2, c - 1});
    int inter = 0;
    for (int e = g.first_pred[t]; e < g.first_pred[t + 1]; ++e) {
      const auto& x = g.edges[e];
      if (x.kind() != EdgeKind::Inter) continue;
      ++inter;
      CHECK(x.producer == (c < 2 ? c : 2 + c - 2));
      CHECK(x.tensor == w.tensor_index(c < 2 ? "A" : "B"));
    }
    CHECK(inter == 1);
  }
}

TEST_CASE("tiles: R-tree edges equal pairwise edges on random multi-dimensional cases") {
  // A producer writes a D-dim tensor (identity over D ranks); a consumer reads it through random
  // strided windows with random offsets; both are cut by random splits, Pad or Ragged.
  for (int dims = 2; dims <= 6; ++dims)
    for (uint32_t seed = 1; seed <= 4; ++seed) {
      std::mt19937 rng(seed * 131 + dims);
      auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
      Einsum p, c;
      p.name = "p";
      c.name = "c";
      p.op = c.op = OpKind::Copy;
      TensorAccess pin{"in", TensorRole::Input, {}, 8}, pout{"T", TensorRole::Output, {}, 8};
      TensorAccess cin{"T", TensorRole::Input, {}, 8}, cout{"U", TensorRole::Output, {}, 8};
      std::vector<int64_t> ext(dims);
      for (int d = 0; d < dims; ++d) ext[d] = uni(2, dims <= 3 ? 14 : 6);
      // The consumer: an output rank o_d and a window rank r_d per dimension (the last dims only
      // get a window when the rank budget allows).
      for (int d = 0; d < dims; ++d) {
        p.ranks.push_back({"p" + std::to_string(d), ext[d]});
        pin.dims.push_back({{d, 1}});
        pout.dims.push_back({{d, 1}});
      }
      cin.offset.assign(dims, 0);
      for (int d = 0; d < dims; ++d) {
        const int64_t stride = uni(1, 2), win = d < kMaxRanks - dims ? uni(1, 3) : 1;
        const int64_t out = std::max<int64_t>(1, (ext[d] - win) / stride + 1 + uni(0, 1));
        const int o = static_cast<int>(c.ranks.size());
        c.ranks.push_back({"o" + std::to_string(d), out});
        Projection proj{{o, stride}};
        if (win > 1) {
          proj.push_back({static_cast<int>(c.ranks.size()), 1});
          c.ranks.push_back({"r" + std::to_string(d), win});
        }
        cin.dims.push_back(proj);
        cout.dims.push_back({{o, 1}});
        cin.offset[d] = -uni(0, 1);
      }
      p.tensors = {pin, pout};
      c.tensors = {cin, cout};
      Workload w = finalized({p, c});
      TilingOptions opt;
      opt.stacks = layer_stacks_manual(w, {{0, 1}});
      opt.remainder = seed % 2 ? Remainder::Pad : Remainder::Ragged;
      opt.layers.resize(2);
      for (int l = 0; l < 2; ++l) {
        const Einsum& e = w.einsums[l];
        for (size_t r = 0; r < e.ranks.size(); ++r) {
          if (uni(0, 2) == 0) continue;
          TileSplit sp{e.ranks[r].name, uni(1, 4)};
          (uni(0, 3) == 0 ? opt.layers[l].inter : opt.layers[l].intra).push_back(sp);
        }
      }
      TileSet ts = generate_tiles(w, opt);
      TileGraph a = connect_tiles(w, ts, EdgeSearch::RTree);
      TileGraph b = connect_tiles(w, ts, EdgeSearch::Pairwise);
      INFO("dims " << dims << " seed " << seed << " tiles " << ts.tiles.size());
      int inter = 0;
      for (const auto& e : a.edges) inter += e.kind() == EdgeKind::Inter;
      CHECK(inter > 0);
      CHECK(a.first_pred == b.first_pred);
      CHECK(edge_set(a) == edge_set(b));
      // The overlap bits are the exact intersection volume: summed over a consumer's producers
      // they equal its input box (the producers' output boxes tile the tensor without overlap).
      for (int t = ts.layer_first[1]; t < ts.layer_first[2]; ++t) {
        int64_t sum = 0;
        for (int e = a.first_pred[t]; e < a.first_pred[t + 1]; ++e) sum += a.edges[e].bits;
        CHECK(sum == ts.tile_accesses(t)[0].bits);
      }
    }
}

TEST_CASE("tiles: layer stacks (manual, automatic, errors)") {
  // Four 1x1 convs in a chain with 2*2, 2*4, 4*4 and 4*2 weights (bits x8).
  Workload w = finalized({conv("a", "in", 2, 2, 2, 2, 1, 1, 0), conv("b", "a", 2, 4, 2, 2, 1, 1, 0),
                          conv("c", "b", 4, 4, 2, 2, 1, 1, 0), conv("d", "c", 4, 2, 2, 2, 1, 1, 0)});
  CHECK(weight_bits(w, 1) == 64);
  CHECK(layer_stacks_lbl(w) == std::vector<std::vector<int>>{{0}, {1}, {2}, {3}});
  CHECK(layer_stacks_manual(w, {{2, 1}}) == std::vector<std::vector<int>>{{0}, {1, 2}, {3}});
  CHECK(layer_stacks_manual(w, {{1}, {2, 3}}) == std::vector<std::vector<int>>{{0}, {1}, {2, 3}});
  // Capacity 224 bits: 32+64+128 = 224 fits, +64 does not.
  CHECK(layer_stacks_auto(w, 224) == std::vector<std::vector<int>>{{0, 1, 2}, {3}});
  CHECK(layer_stacks_auto(w, 192) == std::vector<std::vector<int>>{{0, 1}, {2, 3}});
  CHECK(layer_stacks_auto(w, 192, true) == std::vector<std::vector<int>>{{0, 1}, {2}, {3}});
  CHECK(layer_stacks_auto(w, 100) == std::vector<std::vector<int>>{{0, 1}, {2}, {3}});
  // The cut points a study sweeps (StackSpec): auto:F applies the same rule at F x the capacity.
  using Stacks = std::vector<std::vector<int>>;
  CHECK(layer_stacks(w, parse_stack_spec("auto"), 224) == Stacks{{0, 1, 2}, {3}});
  CHECK(layer_stacks(w, parse_stack_spec("auto:0.5"), 384) == Stacks{{0, 1}, {2, 3}});
  CHECK(layer_stacks(w, parse_stack_spec("auto:2"), 112) == Stacks{{0, 1, 2}, {3}});
  CHECK(layer_stacks(w, parse_stack_spec("auto:1.5"), 128) == Stacks{{0, 1}, {2, 3}});
  CHECK(layer_stacks(w, parse_stack_spec("auto:100"), 224) == Stacks{{0, 1, 2, 3}});
  CHECK(layer_stacks(w, parse_stack_spec("auto:1e-9"), 224) == Stacks{{0}, {1}, {2}, {3}});
  CHECK(layer_stacks(w, parse_stack_spec("first"), 192) == Stacks{{0, 1}, {2}, {3}});
  CHECK(layer_stacks(w, parse_stack_spec("1-2"), 192) == Stacks{{0}, {1, 2}, {3}});
  CHECK(layer_stacks(w, parse_stack_spec("0,1-3"), 192) == Stacks{{0}, {1, 2, 3}});
  for (const char* bad : {"auto:0", "auto:-1", "auto:", "auto:1x", "auto:nan", "Auto", "2-1", "a-b", "1,"}) {
    CAPTURE(bad);
    try {
      (void)parse_stack_spec(bad, "stacks");
      FAIL("expected an InputError");
    } catch (const InputError& e) {
      CHECK(e.key() == "stacks");
      CHECK(std::string(e.what()).find("auto:F") != std::string::npos);
    }
  }
  auto msg = [&](const std::vector<std::vector<int>>& s) {
    try {
      layer_stacks_manual(w, s);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(msg({{0, 2}}).find("not contiguous") != std::string::npos);
  CHECK(msg({{0, 2}}).find("'b'") != std::string::npos);
  CHECK(msg({{2, 3}, {0, 1}}).find("cyclic") != std::string::npos);
  CHECK(msg({{2, 3}, {0, 1}}).find("'c' reads 'b'") != std::string::npos);
  CHECK(msg({{0}, {0, 1}}).find("already in stacks[0]") != std::string::npos);
  CHECK(msg({{}}).find("empty") != std::string::npos);
  CHECK(msg({{7}}).find("out of range") != std::string::npos);
  CHECK_THROWS_AS(layer_stacks_auto(w, 0), InputError);
  // A rank name typo.
  TilingOptions opt;
  opt.layers.resize(4);
  opt.layers[1].inter = {{"KK", 2}};
  try {
    generate_tiles(w, opt);
    FAIL("expected an InputError");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("did you mean 'K'") != std::string::npos);
  }
  // Layer by layer: a singleton stack keeps its inter-core split only.
  opt.layers[1] = {{{"P", 0}}, {{"K", 2}}};
  TileSet ts = generate_tiles(w, opt);
  CHECK(ts.layer_first == std::vector<int>{0, 1, 3, 4, 5});
}

namespace {

// Stream's CN (layer id, sub id) -> our tile, through the ONNX node names.
struct StreamRun {
  Workload w;
  TileGraph g;
  std::map<int, int> layer;  // Stream layer id -> Einsum index
  CsvTable cns, edges;
};

Workload stream_workload(const std::string& onnx) {
  OnnxOptions oo;
  oo.fold_unary = false;  // Stream runs ReLUs as layers of their own
  return import_onnx(test::shared_data(onnx), oo);
}

// Stream's ResNet-18 fused run (derived/coala/README.md): its tiling, stacks [(0..10), (11..21)]
// and the rest layer by layer.
TilingOptions resnet18_fused_tiling(const Workload& w) {
  TilingOptions opt;
  opt.layers = stream_tiling(w, 4);
  std::vector<int> a(11), b(11);
  std::iota(a.begin(), a.end(), 0);
  std::iota(b.begin(), b.end(), 11);
  opt.stacks = layer_stacks_manual(w, {a, b});
  return opt;
}

StreamRun stream_run(const std::string& onnx, const std::string& dir, bool fused_all) {
  StreamRun r;
  r.w = stream_workload(onnx);
  TilingOptions opt;
  opt.layers = stream_tiling(r.w, 4);
  std::vector<int> all(r.w.einsums.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
  opt.stacks = fused_all ? layer_stacks_manual(r.w, {all}) : layer_stacks_lbl(r.w);
  r.g = build_tile_graph(r.w, opt);
  r.cns = read_csv(test::shared_data(dir + "/cns.csv"));
  r.edges = read_csv(test::shared_data(dir + "/edges.csv"));
  const int lid = r.cns.column("layer_id"), lname = r.cns.column("layer_name");
  for (const auto& row : r.cns.rows) {
    const int e = r.w.einsum_index(row[lname]);
    REQUIRE_MESSAGE(e >= 0, row[lname]);
    r.layer[std::stoi(row[lid])] = e;
  }
  return r;
}

int64_t output_stream_bits(const TileSet& ts, int tile) {
  for (const TileAccess& a : ts.tile_accesses(tile))
    if (a.role == TensorRole::Output) return a.stream_bits;
  return -1;
}

void compare_with_stream(const StreamRun& r, size_t cns, size_t edges, int padded_edges) {
  const TileSet& ts = r.g.tiles;
  CHECK(ts.tiles.size() == cns);
  CHECK(r.cns.rows.size() == cns);
  auto tile = [&](const std::string& layer, const std::string& sub) {
    const int e = r.layer.at(std::stoi(layer));
    return ts.layer_first[e] + std::stoi(sub);
  };
  // Priorities and groups.
  const int lid = r.cns.column("layer_id"), sid = r.cns.column("sub_id"), grp = r.cns.column("group"),
            ord = r.cns.column("sched_order_idx");
  int order_mismatch = 0;
  for (const auto& row : r.cns.rows) {
    const int t = tile(row[lid], row[sid]);
    CHECK(ts.tiles[t].group == std::stoi(row[grp]));
    order_mismatch += ts.tiles[t].priority != std::stoll(row[ord]);
  }
  CHECK(order_mismatch == 0);
  // Stream's tensor sizes per CN: O, I (the first activation input) and W (the second input of an
  // add, the weights of a conv or gemm) are our stream_bits.
  const int ob = r.cns.column("tensor_O_bits"), ib = r.cns.column("tensor_I_bits"), wb = r.cns.column("tensor_W_bits"),
            op = r.cns.column("op_type");
  int sized = 0;
  for (const auto& row : r.cns.rows) {
    const int t = tile(row[lid], row[sid]);
    std::vector<int64_t> in, other;
    int64_t out = -1;
    for (const TileAccess& a : ts.tile_accesses(t)) {
      if (a.role == TensorRole::Output) out = a.stream_bits;
      else (a.role == TensorRole::Input && in.empty() ? in : other).push_back(a.stream_bits);
    }
    INFO("CN " << row[lid] << "/" << row[sid] << " " << row[op]);
    CHECK(out == std::stoll(row[ob]));
    REQUIRE(!in.empty());
    CHECK(in[0] == std::stoll(row[ib]));
    if (row[op] == "conv" || row[op] == "gemm" || row[op] == "add") {
      REQUIRE(other.size() == 1);
      CHECK(other[0] == std::stoll(row[wb]));
    }
    ++sized;
  }
  CHECK(sized == static_cast<int>(cns));
  // Edges: (producer, consumer, kind) and Stream's bits (the producer's whole output, as Stream
  // sizes it: stream_bits). Where a Pad remainder extends the producer past the tensor, our
  // producer_bits (the data that exists) is smaller.
  std::set<std::tuple<int, int, int, int64_t>> want, got;
  const int pl = r.edges.column("producer_layer"), ps = r.edges.column("producer_sub"),
            cl = r.edges.column("consumer_layer"), cs = r.edges.column("consumer_sub"),
            kind = r.edges.column("kind"), pbits = r.edges.column("producer_output_bits");
  for (const auto& row : r.edges.rows)
    want.insert({tile(row[pl], row[ps]), tile(row[cl], row[cs]), row[kind] == "inter",
                 row[kind] == "inter" ? std::stoll(row[pbits]) : 0});
  int padded = 0;
  for (size_t i = 0; i < r.g.edges.size(); ++i) {
    const TileEdge& e = r.g.edges[i];
    const int64_t sb = e.kind() == EdgeKind::Inter ? output_stream_bits(ts, e.producer) : 0;
    got.insert({e.producer, r.g.consumer(i), e.kind() == EdgeKind::Inter, sb});
    padded += sb != r.g.producer_bits(e);
  }
  CHECK(padded == padded_edges);
  CHECK(r.edges.rows.size() == edges);
  CHECK(r.g.edges.size() == edges);
  std::vector<std::tuple<int, int, int, int64_t>> missing, extra;
  std::set_difference(want.begin(), want.end(), got.begin(), got.end(), std::back_inserter(missing));
  std::set_difference(got.begin(), got.end(), want.begin(), want.end(), std::back_inserter(extra));
  CHECK(missing.size() == 0);
  CHECK(extra.size() == 0);
  for (size_t i = 0; i < std::min<size_t>(missing.size(), 5); ++i)
    MESSAGE("missing " << std::get<0>(missing[i]) << " -> " << std::get<1>(missing[i]) << " bits "
                       << std::get<3>(missing[i]));
  for (size_t i = 0; i < std::min<size_t>(extra.size(), 5); ++i)
    MESSAGE("extra " << std::get<0>(extra[i]) << " -> " << std::get<1>(extra[i]) << " bits " << std::get<3>(extra[i]));
}

}  // namespace

TEST_CASE("tiles: Stream's 2-conv fused run: 448 CNs, 3096 edges, its order") {
  StreamRun r = stream_run("stream/classic_cb9dfc52/testing/workload/2_conv.onnx",
                           "stream/derived/coala/2conv_fused_fixed_k4", true);
  compare_with_stream(r, 448, 3096, 0);
  // Conv CN ranges: Stream's OY and K columns are our P and K.
  const int lid = r.cns.column("layer_id"), sid = r.cns.column("sub_id"), oy0 = r.cns.column("OY_start"),
            oy1 = r.cns.column("OY_end"), k0 = r.cns.column("K_start"), k1 = r.cns.column("K_end");
  for (const auto& row : r.cns.rows) {
    const int t = r.g.tiles.layer_first[r.layer.at(std::stoi(row[lid]))] + std::stoi(row[sid]);
    const auto rr = r.g.tiles.rank_ranges(t);
    CHECK(rr[2] == Range{std::stoi(row[oy0]), std::stoi(row[oy1])});
    CHECK(rr[5] == Range{std::stoi(row[k0]), std::stoi(row[k1])});
  }
}

TEST_CASE("tiles: Stream's ResNet-18 layer-by-layer run: 162 CNs, 541 edges, its order") {
  StreamRun r = stream_run("stream/classic_cb9dfc52/examples/workload/resnet18.onnx",
                           "stream/derived/coala/resnet18_lbl_fixed_k4", false);
  // 35 edges leave ReLUs whose 14 or 7 columns are split in 4 (Pad: tiles of 4 or 2 columns, the
  // last one partly padding): Stream moves the padded tile, the data that exists is smaller.
  compare_with_stream(r, 162, 541, 35);
}

TEST_CASE("tiles: Stream's ResNet-18 fused setting gives its 3866 CNs") {
  // Stream's fused run (derived/coala/README.md): stacks [(0..10), (11..21)], the rest layer by
  // layer; its edges are not shipped, its CN count is.
  Workload w = stream_workload("stream/classic_cb9dfc52/examples/workload/resnet18.onnx");
  REQUIRE(w.einsums.size() == 48);  // Stream's 49 layers less the Flatten (layer 47)
  TilingOptions opt = resnet18_fused_tiling(w);
  REQUIRE(opt.stacks.size() == 2 + 26);
  TileGraph g = build_tile_graph(w, opt);
  CHECK(g.tiles.tiles.size() == 3866);
  // Priorities are a permutation (a priority, not a topological order: a 3x3 conv's row r waits
  // for its producer's row r+1, which comes in the next slot).
  std::vector<int64_t> pr;
  for (const Tile& t : g.tiles.tiles) pr.push_back(t.priority);
  std::sort(pr.begin(), pr.end());
  for (size_t i = 0; i < pr.size(); ++i) CHECK(pr[i] == static_cast<int64_t>(i));
}

namespace {

// FNV-1a over the CSR rows and every edge field, in order: a fingerprint of the whole edge list.
uint64_t graph_fingerprint(const TileGraph& g) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](int64_t v) {
    for (int i = 0; i < 8; ++i) h = (h ^ ((static_cast<uint64_t>(v) >> (8 * i)) & 0xff)) * 1099511628211ull;
  };
  for (int f : g.first_pred) mix(f);
  for (const TileEdge& e : g.edges) {
    mix(e.producer);
    mix(e.tensor);
    mix(e.bits);
  }
  return h;
}

bool same_edges(const TileGraph& a, const TileGraph& b) {
  if (a.first_pred != b.first_pred || a.edges.size() != b.edges.size()) return false;
  for (size_t i = 0; i < a.edges.size(); ++i)
    if (a.edges[i].producer != b.edges[i].producer || a.edges[i].tensor != b.edges[i].tensor ||
        a.edges[i].bits != b.edges[i].bits)
      return false;
  return true;
}

// Every layer in one fused stack, cut into `h` x `wd`-pixel CTs (bench_tiles' Fsrcnn1M at 2x2).
TilingOptions fused_pixels(const Workload& w, int64_t h, int64_t wd) {
  TilingOptions opt;
  opt.layers = pixel_tiling(w, h, wd);
  opt.stacks = {std::vector<int>(w.einsums.size())};
  std::iota(opt.stacks[0].begin(), opt.stacks[0].end(), 0);
  return opt;
}

}  // namespace

TEST_CASE("tiles: real networks' R-tree graphs equal the pairwise search and the builder before the CSR rewrite") {
  // Fingerprints and edge counts of the builder as of 95469be (before the two-pass CSR build):
  // the rewrite must give the same edge list, in the same order.
  struct Case {
    const char* what;
    Workload w;
    TilingOptions opt;
    bool pairwise;  // small enough for the all-pairs reference
    size_t tiles, edges;
    uint64_t fingerprint;
  };
  std::vector<Case> cases;
  {
    Workload w = stream_workload("stream/classic_cb9dfc52/examples/workload/resnet18.onnx");
    TilingOptions opt = resnet18_fused_tiling(w);
    cases.push_back({"resnet18 fused (Stream)", std::move(w), std::move(opt), true, 3866, 25216, 10760296768506514376ull});
  }
  {
    Workload w = stream_workload("stream/classic_cb9dfc52/examples/workload/fsrcnn.onnx");
    TilingOptions coarse = fused_pixels(w, 16, 32), fine = fused_pixels(w, 4, 4);
    cases.push_back({"fsrcnn 16x32-pixel CTs", w, std::move(coarse), true, 8160, 54192, 3319572382470725604ull});
    cases.push_back({"fsrcnn 4x4-pixel CTs", std::move(w), std::move(fine), false, 259200, 1770762,
                     1884038097592857929ull});
  }
  {  // Newer than the fingerprints: the pairwise search only. Every layer in one fused stack.
    Workload w = zoo_workload("xception", {});
    TilingOptions opt;
    opt.layers = stream_tiling(w, 4);
    opt.stacks = {std::vector<int>(w.einsums.size())};
    std::iota(opt.stacks[0].begin(), opt.stacks[0].end(), 0);
    cases.push_back({"xception fused (zoo)", std::move(w), std::move(opt), true, 0, 0, 0});
  }
  for (Case& c : cases) {
    INFO(std::string(c.what));
    const TileGraph g = build_tile_graph(c.w, c.opt);
    CHECK(g.edges.size() > g.tiles.tiles.size());
    if (c.fingerprint) {
      CHECK(g.tiles.tiles.size() == c.tiles);
      CHECK(g.edges.size() == c.edges);
      CHECK(graph_fingerprint(g) == c.fingerprint);
    }
    if (c.pairwise) CHECK(same_edges(g, connect_tiles(c.w, g.tiles, EdgeSearch::Pairwise)));
  }
}
