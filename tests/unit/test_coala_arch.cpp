// engine/cost/coala_arch.hpp: COALA's cores, links and paths from a multi-core architecture, and a
// schedule on them checked by hand (a 2 x 2 mesh's two-hop path, a bus).
#include <doctest/doctest.h>

#include <limits>

#include "engine/arch/arch_toml.hpp"
#include "engine/common/error.hpp"
#include "engine/cost/coala_arch.hpp"

using namespace mapfuse;
using namespace mapfuse::coala;

namespace {

// Four cores (16 KiB activation buffer for inputs and outputs: 8-bit words, 4 words per cycle, 1 / 2 pJ per word), a
// DRAM (100 / 120 pJ per word, 8 words per cycle) on one 64-bit port, and `topology`.
std::string quad(const std::string& topology) {
  return "name = \"q\"\n[offchip]\nname = \"DRAM\"\nread_pj = 100\nwrite_pj = 120\nread_bandwidth = 8\n"
         "[[offchip.port]]\nbits_per_cycle = 64\npj_per_bit = 3\n"
         "[[core]]\nname = \"pe\"\ncount = 4\n[core.compute]\nenergy_pj = 1\n"
         "[[core.level]]\nname = \"act\"\nsize_kb = 16\nread_pj = 1\nwrite_pj = 2\nread_bandwidth = 4\nkeeps = [\"input\", \"output\"]\n"
         "fanout = { x = 4 }\n"
         "[[core.level]]\nname = \"reg\"\nentries = 2\nenergy_pj = 0.1\nkeeps = [\"weight\"]\n" +
         topology;
}

TileSpec tile(int layer, int core, int64_t priority, double runtime, int output, std::vector<int> inputs) {
  return TileSpec{.layer = layer, .core = core, .priority = priority, .runtime_cc = runtime, .output = output,
                  .inputs = std::move(inputs)};
}

// CT 0 on core `from` makes 256 bits that CT 1 on core `to` reads.
Schedule producer_consumer(const Architecture& a, int from, int to) {
  Problem p;
  set_hardware(p, a);
  p.tensors.push_back({256, 0, true, false, {1}});
  p.tensors.push_back({8, 1, true, false, {}});
  p.tiles = {tile(0, from, 0, 10, 0, {}), tile(1, to, 1, 5, 1, {0})};
  p.edges = {{0, 1}};
  return schedule(p, Options::for_semantics(Semantics::Mapfuse));
}

}  // namespace

TEST_CASE("coala_arch: a 2 x 2 mesh: cores, DRAM, links and two-hop paths") {
  const Architecture a = parse_architecture(
      quad("[topology]\nkind = \"mesh\"\nrows = 2\ncols = 2\nlink_bits_per_cycle = 32\nlink_pj_per_bit = 0.5\n"), "q.toml");
  Problem p;
  set_hardware(p, a);
  REQUIRE(p.cores.size() == 5);
  CHECK(p.cores[4].offchip);
  CHECK(p.cores[4].name == "DRAM");
  CHECK(p.cores[4].capacity_bits == std::numeric_limits<double>::max());
  for (int c = 0; c < 4; ++c) {
    CHECK(!p.cores[c].offchip);
    // weights in `reg` (2 words x 4 instances), activations in `act` (16 KiB)
    CHECK(p.cores[c].capacity_bits == 16 * 1024 * 8 + 2 * 8 * 4);
    CHECK(p.cores[c].port_bw_min_bits == 8);
    CHECK(p.cores[c].port_bw_max_bits == 32);
    CHECK(p.cores[c].read_energy_pj == 4);  // 1 pJ per word x 4 words per access
    CHECK(p.cores[c].write_energy_pj == 8);
  }
  CHECK(p.cores[4].port_bw_max_bits == 64);
  CHECK(p.cores[4].read_energy_pj == 800);
  // port + 2 (2*1 + 2*1) = 8 mesh links
  REQUIRE(p.links.size() == 9);
  CHECK(p.links[0].bandwidth_bits_per_cc == 64);
  CHECK(p.links[0].energy_pj_per_cc == 3 * 64);
  CHECK(p.links[1].energy_pj_per_cc == 0.5 * 32);
  // pe0 -> pe3 (diagonal): two hops, right then down; the reverse up then left
  auto names = [&](int f, int t) {
    std::vector<std::string> v;
    for (int l : p.path(f, t)) v.push_back(p.links[l].name);
    return v;
  };
  CHECK(names(0, 3) == std::vector<std::string>{"mesh:pe0->pe1", "mesh:pe1->pe3"});
  CHECK(names(3, 0) == std::vector<std::string>{"mesh:pe3->pe1", "mesh:pe1->pe0"});
  CHECK(names(1, 2).size() == 2);
  CHECK(names(0, 1) == std::vector<std::string>{"mesh:pe0->pe1"});
  CHECK(names(4, 3) == std::vector<std::string>{"DRAM.port0"});
  CHECK(names(2, 4) == std::vector<std::string>{"DRAM.port0"});

  // 256 bits from pe0 to pe3 over two 32-bit links: [10, 18); CT 1 runs [18, 23)
  const Schedule s = producer_consumer(a, 0, 3);
  CHECK(s.tiles[0].start == 0);
  CHECK(s.tiles[0].end == 10);
  const Transfer* t = nullptr;
  for (const Transfer& x : s.transfers)
    if (x.tensor == 0 && x.receiver == 3) t = &x;
  REQUIRE(t);
  CHECK(t->sender == 0);
  CHECK(t->start == 10);
  CHECK(t->end == 18);
  CHECK(t->cause == TransferCause::CoreToCore);
  // 0.5 pJ per bit on each of two links; 32 words read (1 pJ) and written (2 pJ)
  CHECK(t->link_energy_pj == doctest::Approx(2 * 0.5 * 256));
  CHECK(t->memory_energy_pj == doctest::Approx(32 * 1 + 32 * 2));
  CHECK(s.tiles[1].start == 18);
  CHECK(s.tiles[1].end == 23);
  CHECK(s.latency_cc == 23);
  // neighbours: one hop, [10, 18) too (the same 32-bit rate), half the link energy
  const Schedule s1 = producer_consumer(a, 0, 1);
  CHECK(s1.tiles[1].start == 18);
  CHECK(s1.energy.link[1] == doctest::Approx(0.5 * 256));
}

TEST_CASE("coala_arch: a bus: every core pair one hop on one shared link; not for a single core") {
  const Architecture a =
      parse_architecture(quad("[topology]\nkind = \"bus\"\nlink_bits_per_cycle = 128\nlink_pj_per_cycle = 4\n"), "b.toml");
  Problem p;
  set_hardware(p, a);
  REQUIRE(p.links.size() == 2);
  CHECK(p.links[1].energy_pj_per_cc == 4);
  for (int f = 0; f < 4; ++f)
    for (int t = 0; t < 4; ++t)
      if (f != t) CHECK(p.path(f, t) == std::vector<int>{1});
  // 256 bits at 128 b/cc: [10, 12); 4 pJ per busy cycle
  const Schedule s = producer_consumer(a, 2, 1);
  CHECK(s.tiles[1].start == 12);
  CHECK(s.energy.link[1] == doctest::Approx(2 * 4));
  CHECK_THROWS_AS(set_hardware(p, load_architecture("gemmini_default")), InputError);
}
