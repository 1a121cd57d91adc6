// GET-fusion's fusion-group models (LBDF and BRR F_beta / F_D, docs/get.md) on hand-built graphs
// with the arithmetic written out, the note's VGG16 conv1_2 figure, plan checks and invariants.
#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <set>

#include "engine/common/error.hpp"
#include "engine/cost/fusion_group.hpp"
#include "engine/workload/op_graph.hpp"
#include "test_support.hpp"

using namespace mapfuse;

namespace {

struct Builder {
  OpGraph g;
  Builder(Shape3 input) { g.network_inputs.push_back(input); }
  OpInput in(int p) const {
    return p < 0 ? OpInput{-1, 0, g.network_inputs[0]} : OpInput{p, -1, g.nodes[p].out};
  }
  int add(OpNode n) {
    n.name = "n" + std::to_string(g.size());
    g.nodes.push_back(std::move(n));
    return g.size() - 1;
  }
  // k x k conv, stride s, symmetric padding (k-1)/2, with bias.
  int conv(int p, int64_t cout, int k, int s = 1) {
    OpNode n;
    n.op_type = "Conv";
    n.cls = OpClass::Conv;
    n.inputs = {in(p)};
    const Shape3 x = n.inputs[0].shape;
    const int pad = (k - 1) / 2;
    n.kh = n.kw = k;
    n.sh = n.sw = s;
    n.pad_top = n.pad_bottom = n.pad_left = n.pad_right = pad;
    n.out = {cout, (x.h + 2 * pad - k) / s + 1, (x.w + 2 * pad - k) / s + 1};
    n.weight_elems = cout * x.c * k * k + cout;
    n.bias_elems = cout;
    return add(n);
  }
  int pool(int p, int k, int s) {
    OpNode n;
    n.op_type = "MaxPool";
    n.cls = OpClass::Pool;
    n.inputs = {in(p)};
    const Shape3 x = n.inputs[0].shape;
    n.kh = n.kw = k;
    n.sh = n.sw = s;
    n.out = {x.c, (x.h - k) / s + 1, (x.w - k) / s + 1};
    return add(n);
  }
  int unary(int p, const char* op = "Relu") {
    OpNode n;
    n.op_type = op;
    n.cls = OpClass::Unary;
    n.inputs = {in(p)};
    n.out = n.inputs[0].shape;
    return add(n);
  }
  int gap(int p) {
    OpNode n;
    n.op_type = "GlobalAveragePool";
    n.cls = OpClass::GlobalPool;
    n.inputs = {in(p)};
    n.out = {n.inputs[0].shape.c, 1, 1};
    return add(n);
  }
  int binary(int a, int b, const char* op = "Add") {
    OpNode n;
    n.op_type = op;
    n.cls = OpClass::Binary;
    n.inputs = {in(a), in(b)};
    n.out = n.inputs[0].shape;
    return add(n);
  }
  int concat(int a, int b) {
    OpNode n;
    n.op_type = "Concat";
    n.cls = OpClass::Concat;
    n.inputs = {in(a), in(b)};
    n.out = n.inputs[0].shape;
    n.out.c += n.inputs[1].shape.c;
    return add(n);
  }
  OpGraph done() {
    g.nodes.back().is_output = true;
    finalize(g);
    return g;
  }
};

// x(8,16,16) -> conv3x3 8->16 -> relu -> conv3x3/2 16->16 -> conv1x1 16->32
OpGraph conv_chain() {
  Builder b({8, 16, 16});
  int c0 = b.conv(-1, 16, 3);
  int r1 = b.unary(c0);
  int c2 = b.conv(r1, 16, 3, 2);
  b.conv(c2, 32, 1);
  return b.done();
}
// x(16,8,8) -> conv -> relu(n1) -> conv -> relu -> conv -> add(n4, n1) -> relu; convs 3x3 16->16
OpGraph residual() {
  Builder b({16, 8, 8});
  int c0 = b.conv(-1, 16, 3);
  int r1 = b.unary(c0);
  int c2 = b.conv(r1, 16, 3);
  int r3 = b.unary(c2);
  int c4 = b.conv(r3, 16, 3);
  int a5 = b.binary(c4, r1);
  b.unary(a5);
  return b.done();
}
// x(16,8,8) -> conv1x1 (n0) -> GAP -> conv 16->4 -> relu -> conv 4->16 -> sigmoid -> mul(n0, n5)
OpGraph squeeze_excite() {
  Builder b({16, 8, 8});
  int c0 = b.conv(-1, 16, 1);
  int g1 = b.gap(c0);
  int c2 = b.conv(g1, 4, 1);
  int r3 = b.unary(c2);
  int c4 = b.conv(r3, 16, 1);
  int s5 = b.unary(c4, "Sigmoid");
  b.binary(c0, s5, "Mul");
  return b.done();
}
// x(8,16,16) -> maxpool3x3/2 -> squeeze conv1x1 8->4 -> relu -> {conv1x1 4->8, conv3x3 4->8} -> concat
OpGraph concat_branch() {
  Builder b({8, 16, 16});
  int p0 = b.pool(-1, 3, 2);
  int c1 = b.conv(p0, 4, 1);
  int r2 = b.unary(c1);
  int e3 = b.conv(r2, 8, 1);
  int e4 = b.conv(r2, 8, 3);
  b.concat(e3, e4);
  return b.done();
}

GroupCost cost(const OpGraph& g, std::vector<int> grp, FusionScheme s, int64_t beta = int64_t{1} << 30,
               GroupModelOptions o = {}) {
  GroupWorkspace ws(g);
  return group_cost(g, grp, s, beta, o, ws);
}
std::vector<int> iota(int a, int b) {
  std::vector<int> v(b - a);
  std::iota(v.begin(), v.end(), a);
  return v;
}
constexpr auto L = FusionScheme::Lbdf;
constexpr auto B = FusionScheme::Brr;

}  // namespace

TEST_CASE("get models: conv chain, LBDF and BRR by hand") {
  const OpGraph g = conv_chain();
  // Weights: 16*8*9+16 = 1168, 0, 16*16*9+16 = 2320, 32*16+32 = 544; sum 4032.
  // LBDF rows per tensor: x read by 3x3 pad 1: 3*(16+2)*8 = 432; n0 -> relu: 16*16 = 256;
  // relu -> 3x3/2 pad 1: 3*18*16 = 864; n2 (16,8,8) -> 1x1: 8*16 = 128. Sum 1680.
  auto c = cost(g, {0, 1, 2, 3}, L);
  CHECK(c.weight_elems == 4032);
  CHECK(c.buffer_elems == 4032 + 1680);
  CHECK(c.buffer_bytes == 2 * 5712);
  // F_D = W + in x (8*16*16 = 2048) + out (32*8*8 = 2048).
  CHECK(c.dram_elems == 4032 + 4096);
  CHECK(c.dram_bytes == 2 * 8128);
  // (K-1) rows + K_w: x: (2*18+3)*8 = 312; relu -> n2: (2*18+3)*16 = 624; others as before.
  GroupModelOptions rw;
  rw.line_buffer = LineBufferForm::RowsPlusWindow;
  CHECK(cost(g, {0, 1, 2, 3}, L, 1 << 30, rw).buffer_elems == 4032 + 312 + 256 + 624 + 128);
  GroupModelOptions nb;
  nb.count_bias = false;  // biases 16 + 16 + 32
  CHECK(cost(g, {0, 1, 2, 3}, L, 1 << 30, nb).buffer_elems == 4032 - 64 + 1680);
  // Singletons: relu alone holds one row (256) and moves 4096 in + 4096 out.
  CHECK(cost(g, {1}, L).buffer_elems == 256);
  CHECK(cost(g, {1}, L).dram_elems == 8192);
  // Sum of singleton F_D: 7312 + 8192 + 7440 + 3616 = 26560 > 8128.
  int64_t singles = 0;
  for (int v = 0; v < 4; ++v) singles += cost(g, {v}, L).dram_elems;
  CHECK(singles == 26560);

  // BRR. Cumulative strides 1,1,2,2; one last node (n3), s = 2, H_m = 8. One step backwards:
  // n3 1 row; n2 (1x1 consumer) 1; relu (3x3/2 consumer) (1-1)*2+3 = 3; n0 3 (in place relu).
  // Footprint: n0 16*3*16 = 768, n2 16*1*8 = 128, n3 32*1*8 = 256, x rows min(2+3,16) = 5:
  // 5*16*8 = 640. Sum 1792 (k = 32 covers every channel count, so both parities agree).
  auto b = cost(g, {0, 1, 2, 3}, B);
  CHECK(b.supported);
  CHECK(b.buffer_elems == 1792);
  CHECK(b.dram_elems == 4032 + 4096);  // weights fit beside the footprint: fetched once
  // Two steps: n3 2, n2 2, relu 1*2+3 = 5, n0 5, x 4+3 = 7 rows: 1280 + 256 + 512 + 896 = 2944,
  // so add_one_line = 1152. beta = 4096 elements (8 KiB): 4032 + 1792 > 4096, so the weights are
  // streamed per tile of (4096 - 1792) / 1152 + 1 = 3 rows: ceil(8 / 3) = 3 tiles.
  auto t = cost(g, {0, 1, 2, 3}, B, 8192);
  CHECK(t.buffer_elems == 1792);
  CHECK(t.valid(8192));
  CHECK(t.dram_elems == 3 * 4032 + 4096);
  // k = 8: parity 1 keeps n0 partial (8*3*16 = 384), n2 full (128), n3 partial (8*8 = 64):
  // 384 + 128 + 64 + 640 = 1216; parity 0 gives 768 + 64 + 256 + 640 = 1728.
  GroupModelOptions k8;
  k8.brr_partition = 8;
  CHECK(cost(g, {0, 1, 2, 3}, B, 1 << 30, k8).buffer_elems == 1216);
}

TEST_CASE("get models: residual block, skip buffer") {
  const OpGraph g = residual();
  // W = 3 * (16*16*9 + 16) = 6960. Rows: x 3*10*16 = 480; n0->n1 8*16 = 128; n1 read by 3x3
  // (480) and add (128): 480; n2->n3 128; n3->n4 480; n4->n5 128; n5->n6 128. Sum 1952.
  // Skip n1 -> {n2, n5}: the conv path has two 3x3 windows, lag 2 rows: (2+1)*8*16 = 384.
  auto c = cost(g, iota(0, 7), L);
  CHECK(c.buffer_elems == 6960 + 1952 + 384);
  CHECK(c.dram_elems == 6960 + 1024 + 1024);
  // Without n0, n1 (the skip source) is external: the same 384, rows 480+128+480+128 = 1216.
  auto d = cost(g, {2, 3, 4, 5}, L);
  CHECK(d.buffer_elems == 4640 + 1216 + 384);
  CHECK(d.dram_elems == 4640 + 1024 + 1024);
  // skip_to_dram: no skip buffer; n1 (1024 elements) is written and read back at the join.
  // From outside (group {2..5}) it is read once more than the group reads it anyway.
  GroupModelOptions sd;
  sd.skip_to_dram = true;
  CHECK(cost(g, iota(0, 7), L, 1 << 30, sd).buffer_elems == 6960 + 1952);
  CHECK(cost(g, iota(0, 7), L, 1 << 30, sd).dram_elems == 9008 + 2 * 1024);
  CHECK(cost(g, {2, 3, 4, 5}, L, 1 << 30, sd).buffer_elems == 4640 + 1216);
  CHECK(cost(g, {2, 3, 4, 5}, L, 1 << 30, sd).dram_elems == 4640 + 2048 + 1024);
  // Main path only (no join): no skip buffer; n1 is read once, n4 is written.
  CHECK(cost(g, {2, 3, 4}, L).buffer_elems == 4640 + 480 + 128 + 480);

  // BRR, strides 1, last node n6, s = 1. One step: n6 1, n5 1, n4 1, n3 3, n2 3,
  // n1 max(3+2, 1) = 5, n0 5. Footprint n0 16*5*8 = 640, n2 16*3*8 = 384, n4 128, n5 128,
  // x rows min(4+3, 8) = 7: 7*8*16 = 896. Sum 2176.
  auto b = cost(g, iota(0, 7), B);
  CHECK(b.supported);
  CHECK(b.buffer_elems == 2176);
  CHECK(b.dram_elems == 6960 + 2048);
  // Two steps: 768 + 512 + 256 + 256 + 8*8*16 = 2816, add_one_line 640. beta 8000 elements:
  // 6960 + 2176 > 8000, tile (8000-2176)/640 + 1 = 10 rows >= 8: one tile.
  CHECK(cost(g, iota(0, 7), B, 16000).dram_elems == 6960 + 2048);
  // beta 3000 elements: (3000 - 2176) / 640 + 1 = 2 rows: 4 tiles.
  CHECK(cost(g, iota(0, 7), B, 6000).dram_elems == 4 * 6960 + 2048);
  // An Add with its in-place ReLU is one real op: BRR's first-node rule does not apply.
  CHECK(cost(g, {5, 6}, B).supported);
}

TEST_CASE("get models: concat branch (fire module) and BRR's first-node rule") {
  const OpGraph g = concat_branch();
  // n0 maxpool 3x3/2 (8,16,16) -> (8,7,7). W = 36 + 40 + 296 = 372.
  // Rows: n0 out read by 1x1: 7*8 = 56; n1 -> relu 28; relu read by 1x1 (28) and 3x3 pad 1
  // (3*9*4 = 108): 108; n3 -> concat 56; n4 -> concat 56. Sum 304.
  // Skip relu -> {n3, n4} meeting at the concat: lag 1 (one 3x3): (1+1)*7*4 = 56.
  auto c = cost(g, {1, 2, 3, 4, 5}, L);
  CHECK(c.buffer_elems == 372 + 304 + 56);
  CHECK(c.dram_elems == 372 + 392 + 784);
  // With the pool: x rows 3*16*8 = 384 replace nothing (the pool output row 56 stays).
  auto d = cost(g, iota(0, 6), L);
  CHECK(d.buffer_elems == 372 + 384 + 304 + 56);
  CHECK(d.dram_elems == 372 + 2048 + 784);
  // BRR: a group whose first op is a pool is unsupported (Optimus); the pool alone is fine.
  CHECK_FALSE(cost(g, iota(0, 6), B).supported);
  CHECK(cost(g, {0}, B).supported);
  // BRR {1..5}: one step: n5 1, n4 1, n3 1, relu max(1, 3) = 3, n1 3. n1 4*3*7 = 84,
  // n3 8*7 = 56, n4 56, concat 16*7 = 112, pool rows for the 1x1: 3*7*8 = 168. Sum 476.
  auto b = cost(g, {1, 2, 3, 4, 5}, B);
  CHECK(b.supported);
  CHECK(b.buffer_elems == 476);
}

TEST_CASE("get models: squeeze-excite") {
  const OpGraph g = squeeze_excite();
  // W = 272 + 68 + 80 = 420. Rows: x 128; n0 read by GAP and Mul: 128; GAP accumulators 16;
  // (16,1,1) rows 16, 4, 4, 16, 16. Sum 328. The Mul waits for the whole-map GAP path: the
  // whole n0 output is buffered, 16*8*8 = 1024.
  auto c = cost(g, iota(0, 7), L);
  CHECK(c.buffer_elems == 420 + 328 + 1024);
  CHECK(c.dram_elems == 420 + 1024 + 1024);
  // SE without its source conv (W = 68 + 80 = 148): n0 is external, read twice inside, still
  // buffered whole.
  CHECK(cost(g, iota(1, 7), L).buffer_elems == 148 + 128 + 16 + 56 + 1024);
  // BRR does not run squeeze-excite.
  CHECK_FALSE(cost(g, iota(0, 7), B).supported);
  CHECK_FALSE(cost(g, iota(0, 7), B).valid(int64_t{1} << 30));
  CHECK(cost(g, {2, 3, 4}, B).supported);
}

TEST_CASE("get models: VGG16 conv1_2 is unfuseable at 128 KB under LBDF (note §3.2)") {
  const OpGraph g = load_op_graph(test::shared_data("get/onnx/vgg16.onnx"));
  GroupModelOptions nb;
  nb.count_bias = false;
  // 64*64*3*3 + 3*(224+2)*64 = 36,864 + 43,392 = 80,256 elements = 156.75 KiB at 2 B.
  auto c = cost(g, {2}, L, 128 * 1024, nb);
  CHECK(c.buffer_elems == 80256);
  CHECK(c.buffer_bytes == 160512);
  CHECK_FALSE(c.valid(128 * 1024));
  CHECK(c.valid(256 * 1024));
  // With the bias (the default): 80,320.
  CHECK(cost(g, {2}, L).buffer_elems == 80320);
  const auto f = fuseable_nodes(g, L, 128 * 1024, {});
  CHECK_FALSE(f[2]);
  CHECK(f[1]);  // its input ReLU: one row, 224*64
}

TEST_CASE("get models: plan checks name the failing rule") {
  const OpGraph g = residual();
  CHECK(check_plan(g, {{0, 1}, {2, 3, 4}, {5, 6}}).ok);
  CHECK(check_plan(g, {{0, 1}, {1, 2}}).rule == "disjoint");
  CHECK(check_plan(g, {{0, 2}}).rule == "connected");
  CHECK(check_plan(g, {{2, 1}}).rule == "range");
  CHECK(check_plan(g, {{7}}).rule == "range");
  // {1, 5} feeds {2, 3, 4} (n1 -> n2), which feeds {1, 5} (n4 -> n5).
  auto cyc = check_plan(g, {{1, 5}, {2, 3, 4}});
  CHECK(cyc.rule == "acyclic");
  CHECK(cyc.detail.find("0, 1") != std::string::npos);
  // The same cycle through an unassigned node: {1, 5} and n2..n4 left out.
  CHECK(check_plan(g, {{1, 5}}).rule == "acyclic");

  GroupWorkspace ws(g);
  const PartitionPlan plan = {{0, 1}, {2, 3, 4}, {5, 6}};
  auto pc = plan_cost(g, plan, L, 1 << 20, {}, ws);
  int64_t sum = 0, mbu = 0;
  for (const auto& grp : plan) {
    auto c = cost(g, grp, L);
    sum += c.dram_bytes;
    mbu = std::max(mbu, c.buffer_bytes);
  }
  CHECK(pc.dram_bytes == sum);
  CHECK(pc.mbu_bytes == mbu);
  CHECK(pc.valid);
  // 9296 elements = 18,592 bytes: invalid at 16 KiB, and so is the plan.
  auto whole = plan_cost(g, {iota(0, 7)}, L, 16 * 1024, {}, ws);
  CHECK(whole.invalid_groups == 1);
  CHECK_FALSE(whole.valid);

  CHECK(group_key(std::vector<int>{1, 2, 5}) == group_key(std::vector<int>{1, 2, 5}));
  CHECK(group_key(std::vector<int>{1, 2, 5}) != group_key(std::vector<int>{1, 2, 6}));
  CHECK(group_key(std::vector<int>{1, 2}) != group_key(std::vector<int>{3}));
  CHECK(fusion_scheme_from_string("brr") == B);
  CHECK_THROWS_AS(fusion_scheme_from_string("lbfd"), InputError);
}

TEST_CASE("get models: invariants on random connected groups of real networks") {
  std::mt19937_64 rng(7);
  for (const char* net : {"mobilenet_v2", "resnet18", "efficientnet_b0"}) {
    CAPTURE(net);
    const OpGraph g = load_op_graph(test::shared_data(std::string("get/onnx/") + net + ".onnx"));
    GroupWorkspace ws(g);
    std::vector<int64_t> single_d(g.size());
    for (int v = 0; v < g.size(); ++v) {
      const int one[1] = {v};
      single_d[v] = group_cost(g, one, L, 1 << 20, {}, ws).dram_elems;
    }
    for (int trial = 0; trial < 200; ++trial) {
      // Grow a connected group from a random seed through random neighbours.
      std::set<int> grp{static_cast<int>(rng() % g.size())};
      const int target = 1 + static_cast<int>(rng() % 24);
      for (int step = 0; step < 200 && static_cast<int>(grp.size()) < target; ++step) {
        auto it = grp.begin();
        std::advance(it, rng() % grp.size());
        auto nb = (rng() & 1) ? g.succs(*it) : g.preds(*it);
        if (!nb.empty()) grp.insert(nb[rng() % nb.size()]);
      }
      std::vector<int> v(grp.begin(), grp.end());
      const auto lb = group_cost(g, v, L, 1 << 20, {}, ws);
      int64_t sum = 0;
      for (int u : v) sum += single_d[u];
      // Fusing never adds DRAM traffic under LBDF: the union of inputs and outputs is smaller.
      CHECK(lb.dram_elems <= sum);
      CHECK(lb.dram_elems >= lb.weight_elems);
      CHECK(lb.buffer_elems >= lb.weight_elems);
      // The buffer of a group holds at least what each member needs alone.
      for (int u : v) {
        const int one[1] = {u};
        CHECK(lb.buffer_elems >= group_cost(g, one, L, 1 << 20, {}, ws).buffer_elems);
      }
      const auto br = group_cost(g, v, B, 256 * 1024, {}, ws);
      CHECK(br.dram_elems >= br.weight_elems);
      // The workspace is reusable: the same call gives the same answer.
      CHECK(group_cost(g, v, L, 1 << 20, {}, ws).buffer_elems == lb.buffer_elems);
    }
  }
}

TEST_CASE("get models: valid plans of MobileNetV2 cost no more DRAM than all singletons (LBDF)") {
  // Plans from random topological intervals of the fuseable ops, each split into weakly connected
  // components: check_plan accepts them, and their DRAM is at most the all-singletons plan's.
  const OpGraph g = load_op_graph(test::shared_data("get/onnx/mobilenet_v2.onnx"));
  const int64_t beta = 128 * 1024;
  const auto f = fuseable_nodes(g, L, beta, {});
  GroupWorkspace ws(g);
  const PlanCost single = plan_cost(g, singleton_plan(f), L, beta, {}, ws);
  CHECK(single.valid);
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 50; ++trial) {
    PartitionPlan plan;
    int v = 0;
    while (v < g.size()) {
      const int end = std::min(g.size(), v + 1 + static_cast<int>(rng() % 6));
      // Components of the fuseable nodes in [v, end).
      std::vector<int> comp(g.size(), -1);
      for (int u = v; u < end; ++u) {
        if (!f[u] || comp[u] >= 0) continue;
        std::vector<int> stack{u}, grp;
        comp[u] = u;
        while (!stack.empty()) {
          const int x = stack.back();
          stack.pop_back();
          grp.push_back(x);
          for (auto nb : {g.preds(x), g.succs(x)})
            for (int y : nb)
              if (y >= v && y < end && f[y] && comp[y] < 0) {
                comp[y] = u;
                stack.push_back(y);
              }
        }
        std::sort(grp.begin(), grp.end());
        plan.push_back(grp);
      }
      v = end;
    }
    REQUIRE(check_plan(g, plan).ok);
    const PlanCost pc = plan_cost(g, plan, L, beta, {}, ws);
    CHECK(pc.dram_bytes <= single.dram_bytes);
    if (pc.valid) CHECK(pc.mbu_bytes < beta);
  }
}
