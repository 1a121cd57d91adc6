// Stream's Table 2 silicon-validation targets (docs/validation.md, "Stream Table 2"): the presets
// hold the figures the Stream paper (§4.3) and the chips' papers state, the workloads the layer
// shapes of the segments, and the allocations load onto them.
#include <doctest/doctest.h>

#include "engine/arch/arch_toml.hpp"
#include "engine/search/stream/allocation.hpp"
#include "engine/workload/load.hpp"
#include "engine/workload/tile_graph.hpp"
#include "test_support.hpp"

using namespace mapfuse;

namespace {

const Level& level(const Core& c, const char* name) { return c.levels.at(static_cast<size_t>(c.level_index(name))); }

std::string val(const std::string& f) { return test::source_dir("experiments/stream_validation/" + f); }

// Every CT of the workload (Stream's row tiling, K split in `parts`) lands on a core of the file.
void check_allocation(const Workload& w, const Architecture& a, const std::string& file, int parts) {
  TilingOptions t;
  t.layers = stream_tiling(w, parts);
  const TileGraph g = build_tile_graph(w, t);
  const std::vector<int> cores = allocate_tiles(load_allocation(file), w, g.tiles, a);
  REQUIRE(cores.size() == g.tiles.tiles.size());
  for (size_t i = 0; i < cores.size(); ++i) {
    CHECK(cores[i] >= 0);
    CHECK(cores[i] < static_cast<int>(a.cores.size()));
  }
}

}  // namespace

TEST_CASE("stream validation: DepFiN preset is one OX|K core with 512 kB W, 1 MB act, 64-bit off-chip") {
  const Architecture a = load_architecture("stream_val_depfin");
  REQUIRE(a.cores.size() == 1);
  const Core& c = a.cores[0];
  CHECK(c.compute.instances == 64 * 32);
  CHECK(level(c, "W_mem").capacity_kb() == 512);
  CHECK(level(c, "Act_mem").capacity_kb() == 1024);
  CHECK(level(c, "Act_mem").fanout.x == 32);   // K
  CHECK(level(c, "out_buf").fanout.y == 64);   // OX
  REQUIRE(a.links.size() == 1);
  CHECK(a.links[0].port);
  CHECK(a.links[0].bits_per_cycle == 64);

  const Workload w = load_workload(test::shared_data("stream/classic_cb9dfc52/examples/workload/fsrcnn.onnx"));
  CHECK(w.einsums.size() == 8);
  // 540 x 960 output pixels; per pixel 5*5*1*56 + 56*12 + 4 * 9*12*12 + 12*56 + 9*56*16 MACs
  CHECK(w.operations() == int64_t(540) * 960 * (5 * 5 * 56 + 56 * 12 + 4 * 9 * 12 * 12 + 12 * 56 + 9 * 56 * 16));
  check_allocation(w, a, val("depfin_fsrcnn_allocation.toml"), 1);
}

TEST_CASE("stream validation: 4x4 AiMC preset is 16 CIMUs of 1152 x 32 weights on a 128-bit mesh") {
  const Architecture a = load_architecture("stream_val_aimc4x4");
  REQUIRE(a.cores.size() == 16);
  int ports = 0, mesh = 0;
  for (const Link& l : a.links) {
    CHECK(l.bits_per_cycle == 128);
    if (l.port) {
      ++ports;
      CHECK(l.nodes.size() == 5u);  // the memory and one mesh row
    } else {
      ++mesh;
    }
  }
  CHECK(ports == 4);
  CHECK(mesh == 2 * (4 * 3 + 4 * 3));
  // corner to corner: 3 + 3 mesh hops, never through the off-chip ports
  CHECK(a.path(a.node_index("cimu0"), a.node_index("cimu15")).size() == 6u);
  for (const Core& c : a.cores) {
    CHECK(c.compute.instances == 1152 * 32);
    CHECK(level(c, "array").capacity_kb() == 36);  // 1152 x 32 8-bit weights
    CHECK(level(c, "Act_buf").read_bandwidth == 144);  // 1152 rows, 1 bit per cycle
  }

  const Workload w = load_workload(val("resnet50_segment.toml"));
  CHECK(w.operations() == 2 * int64_t(28) * 28 * 512 * 128 + int64_t(28) * 28 * 128 * 128 * 9 + 512 * 28 * 28);
  check_allocation(w, a, val("aimc4x4_resnet50_allocation.toml"), 4);
  check_allocation(w, a, val("aimc4x4_resnet50_allocation_columns.toml"), 4);
}

TEST_CASE("stream validation: DIANA preset is a 16x16 digital, a 1152x512 AiMC and a SIMD core") {
  const Architecture a = load_architecture("stream_val_diana");
  REQUIRE(a.cores.size() == 3);
  const Core& d = a.cores.at(static_cast<size_t>(a.node_index("digital")));
  const Core& m = a.cores.at(static_cast<size_t>(a.node_index("aimc")));
  const Core& s = a.cores.at(static_cast<size_t>(a.node_index("simd")));
  CHECK(d.compute.instances == 16 * 16);
  CHECK(m.compute.instances == 1152 * 512);
  CHECK(level(m, "array").capacity_kb() == 576);
  for (const Core* c : {&d, &m, &s}) CHECK(level(*c, "L1").capacity_kb() == 256);  // the shared L1
  CHECK(s.can_run(OpKind::Elementwise));
  CHECK_FALSE(m.can_run(OpKind::Elementwise));
  CHECK(d.can_run(OpKind::Pool));

  const Workload w = load_workload(val("resnet18_first_layers.toml"));
  CHECK(w.operations() == int64_t(112) * 112 * 64 * 3 * 49 + int64_t(56) * 56 * 64 * 9 +
                              2 * int64_t(56) * 56 * 64 * 64 * 9 + 56 * 56 * 64);
  check_allocation(w, a, val("diana_resnet18_allocation.toml"), 1);
}
