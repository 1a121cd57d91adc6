// Multi-core architectures: the TOML form, topology generators and paths, the Stream Table 3
// presets, Stream's hardware YAML, bad input, and the mapper keeping to each core's dataflow.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "engine/arch/arch_toml.hpp"
#include "engine/arch/stream_yaml.hpp"
#include "engine/arch/topology.hpp"
#include "engine/common/error.hpp"
#include "engine/search/exhaustive.hpp"
#include "test_support.hpp"

using namespace mapfuse;

namespace {

const char* kCore = R"(
[core.compute]
energy_pj = 1
[[core.level]]
name = "buf"
size_kb = 64
energy_pj = 2
fanout = { x = 4, x_ranks = ["K"] }
[[core.level]]
name = "reg"
entries = 4
energy_pj = 0.1
)";

std::string system_toml(const std::string& topology, int cores = 64) {
  return "name = \"sys\"\n[offchip]\nname = \"DRAM\"\nenergy_pj = 100\n[[offchip.port]]\nbits_per_cycle = 64\n"
         "[[core]]\nname = \"pe\"\ncount = " + std::to_string(cores) + "\n" + kCore + topology;
}

// The links of a path chain from `from` to `to`: each leaves where the previous one arrived.
void check_chain(const Architecture& a, int from, int to) {
  const std::vector<int>& p = a.path(from, to);
  int at = from;
  for (size_t i = 0; i < p.size(); ++i) {
    const Link& k = a.links[p[i]];
    const int next = !k.bus ? k.nodes[1] : i + 1 == p.size() ? to : a.links[p[i + 1]].nodes[0];
    REQUIRE(k.connects(at, next));
    at = next;
  }
  CHECK(at == to);
}

std::string input_error(const std::string& toml) {
  try {
    parse_architecture(toml, "bad.toml");
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

int64_t pes(const Core& c) { return c.compute.instances; }

}  // namespace

TEST_CASE("multicore arch: mesh, torus, pairs and bus generators, paths by hand") {
  // 64 cores in an 8 x 8 mesh: three lines of topology
  const Architecture mesh =
      parse_architecture(system_toml("[topology]\nkind = \"mesh\"\nrows = 8\ncols = 8\nlink_bits_per_cycle = 256\n"), "m.toml");
  REQUIRE(mesh.cores.size() == 64);
  CHECK(mesh.cores[63].name == "pe63");
  CHECK(mesh.offchip == 64);
  // the DRAM port first, then 2 (8*7 + 8*7) = 224 directed links
  CHECK(mesh.links.size() == 1 + 224);
  CHECK(mesh.links[0].port);
  // core to core: Manhattan distance (corner to corner 14); the port carries no core-to-core traffic
  CHECK(mesh.path(0, 63).size() == 14);
  CHECK(mesh.path(63, 0).size() == 14);
  CHECK(mesh.path(9, 18).size() == 2);
  CHECK(mesh.path(64, 63) == std::vector<int>{0});  // DRAM -> any core: its port
  CHECK(mesh.path(27, 64) == std::vector<int>{0});
  // tie-break: among the 2 shortest paths 0 -> 9 (right then down, or down then right) the one
  // with the smaller first link index: links are made row by row, right before down
  const auto& p09 = mesh.path(0, 9);
  REQUIRE(p09.size() == 2);
  CHECK(mesh.links[p09[0]].name == "mesh:pe0->pe1");
  CHECK(mesh.links[p09[1]].name == "mesh:pe1->pe9");
  for (int s : {0, 7, 27, 64})
    for (int t : {0, 5, 36, 63, 64})
      if (s != t) check_chain(mesh, s, t);

  // a port serving one core only: DRAM -> pe63 goes through pe0
  auto toml_one_port = [](const std::string& topo) {
    return std::string("name = \"sys\"\n[offchip]\nname = \"DRAM\"\nenergy_pj = 100\n[[offchip.port]]\nbits_per_cycle = 64\n"
                       "cores = [\"pe0\"]\n[[core]]\nname = \"pe\"\ncount = 64\n") +
           kCore + topo;
  };
  const Architecture m2 =
      parse_architecture(toml_one_port("[topology]\nkind = \"mesh\"\nrows = 8\ncols = 8\nlink_bits_per_cycle = 256\n"), "m2.toml");
  CHECK(m2.path(64, 63).size() == 15);
  CHECK(m2.path(63, 64).size() == 15);
  check_chain(m2, 64, 63);

  const Architecture torus =
      parse_architecture(toml_one_port("[topology]\nkind = \"torus\"\nrows = 8\ncols = 8\nlink_bits_per_cycle = 256\n"), "t.toml");
  CHECK(torus.links.size() == 4 * 64 + 1);
  CHECK(torus.path(0, 63).size() == 2);   // wrap both ways
  CHECK(torus.path(0, 36).size() == 8);   // (4, 4): the farthest node
  CHECK(torus.path(9, 18).size() == 2);

  const Architecture pairs = parse_architecture(
      system_toml("[topology]\nkind = \"pairs\"\nlink_bits_per_cycle = 32\nlink_pj_per_bit = 0.5\n", 5), "p.toml");
  CHECK(pairs.links.size() == 5 * 4 + 1);
  CHECK(pairs.path(1, 3).size() == 1);
  CHECK(pairs.links[pairs.path(1, 3)[0]].pj_per_bit == 0.5);

  const Architecture bus =
      parse_architecture(system_toml("[topology]\nkind = \"bus\"\nlink_bits_per_cycle = 256\n", 4), "b.toml");
  CHECK(bus.links.size() == 2);
  CHECK(bus.path(0, 3) == std::vector<int>{1});  // the bus (the port carries only DRAM traffic)
  CHECK(bus.path(4, 2) == std::vector<int>{0});  // DRAM -> core: the port
  CHECK(bus.path(2, 2).empty());
}

TEST_CASE("multicore arch: explicit links, buses, widest then lowest-index tie-break") {
  const std::string t = std::string("name = \"x\"\n[offchip]\nname = \"DRAM\"\nenergy_pj = 100\n"
                                    "[[core]]\nname = \"a\"\n") + kCore + "[[core]]\nname = \"b\"\n" + kCore +
                        "[[core]]\nname = \"c\"\n" + kCore +
                        "[[link]]\nfrom = \"a\"\nto = \"b\"\nbits_per_cycle = 32\nbidirectional = true\n"
                        "[[link]]\nfrom = \"b\"\nto = \"c\"\nbits_per_cycle = 64\n"
                        "[[link]]\nfrom = \"a\"\nto = \"c\"\nbits_per_cycle = 16\n"
                        "[[bus]]\nname = \"mem\"\nnodes = [\"DRAM\", \"a\", \"c\"]\nbits_per_cycle = 128\npj_per_cycle = 2\n";
  const Architecture a = parse_architecture(t, "x.toml");
  // links: 0 a->b, 1 b->a, 2 b->c, 3 a->c, 4 bus
  REQUIRE(a.links.size() == 5);
  CHECK(a.path(0, 2) == std::vector<int>{4});     // a -> c: one hop; the bus (128) is wider than a->c (16)
  CHECK(a.path(1, 2) == std::vector<int>{2});     // b -> c direct
  CHECK(a.path(2, 1) == std::vector<int>{4, 0});  // c -> b: c -bus-> a -> b (no c->b link)
  CHECK(a.path(3, 1) == std::vector<int>{4, 0});  // DRAM -> b through a
  CHECK(a.links[4].pj_per_cycle == 2);
  // same TOML printed and read back: same links and paths
  const Architecture b = parse_architecture(to_toml(a), "x2.toml");
  CHECK(to_toml(b) == to_toml(a));
  CHECK(b.routes == a.routes);
}

TEST_CASE("multicore arch: Stream Table 3 iso-area presets") {
  int systems = 0;
  for (int n : {1, 2, 4, 8})
    for (int ws = 0; ws <= n; ++ws) {
      const std::string name = "stream_t3_" + std::to_string(n) + "c_" + std::to_string(ws) + "ws";
      INFO(name);
      const Architecture a = load_architecture(name);
      ++systems;
      REQUIRE(a.cores.size() == static_cast<size_t>(n));
      int64_t total_pes = 0;
      double onchip_kib = 0;
      int nws = 0;
      for (const Core& c : a.cores) {
        total_pes += pes(c);
        nws += c.name.rfind("ws", 0) == 0;
        CHECK(c.runs == op_bit(OpKind::Mac));
        for (const char* m : {"W_mem", "Act_mem"}) onchip_kib += c.levels.at(c.level_index(m)).capacity_kb();
        CHECK(c.dram().entries == 256LL << 20);
      }
      CHECK(nws == ws);
      // Table 3: OS arrays have 2^12 / n PEs; WS arrays (C x 3 x 3) x K have 9/8 of that
      CHECK(total_pes == 4096 + ws * 512 / n);
      CHECK(onchip_kib == 4096);  // 4 MiB of activation + weight memory
      const MemoryNode& dram = a.memories.at(0);
      CHECK(dram.offchip);
      CHECK(dram.level.read_pj == 81.25);
      // one 128-bit port; a 256-bit bus when there are several cores
      CHECK(a.links.at(0).bus);
      CHECK(a.links[0].bits_per_cycle == 128);
      CHECK(a.links[0].nodes.size() == static_cast<size_t>(n + 1));
      CHECK(a.links.size() == (n > 1 ? 2u : 1u));
      if (n > 1) {
        CHECK(a.links[1].bits_per_cycle == 256);
        CHECK(a.path(0, 1) == std::vector<int>{1});
      }
    }
  CHECK(systems == 19);
  // hand-read: the 1-core WS array, 72 x 64, C 8 | FX 3 | FY 3 on rows, K 64 on columns
  const Core ws = load_architecture("stream_t3_1c_1ws").cores.at(0);
  CHECK(pes(ws) == 72 * 64);
  CHECK(ws.levels.at(ws.level_index("col_out_reg")).instances == 64);
  CHECK(ws.levels.at(ws.level_index("Act_mem")).read_bandwidth == 72);
  CHECK(ws.levels.at(ws.level_index("Act_mem")).read_pj == doctest::Approx(13.19 * 8 / 36));
  const Core os = load_architecture("stream_t3_8c_0ws").cores.at(0);
  CHECK(pes(os) == 16 * 32);
  CHECK(os.levels.at(os.level_index("W_mem")).capacity_kb() == 256);
}

namespace {

std::vector<std::string> stream_hardware_files() {
  std::vector<std::string> files;
  const std::string root = test::shared_data("stream");
  for (const char* tree : {"classic_cb9dfc52", "head_28fb9011"})
    for (const char* sub : {"examples/hardware", "testing/hardware"})
      for (const auto& e : std::filesystem::directory_iterator(root + "/" + tree + "/" + sub))
        if (e.path().extension() == ".yaml") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

TEST_CASE("multicore arch: every Stream hardware file loads; the quad cores as read by hand") {
  const auto files = stream_hardware_files();
  CHECK(files.size() == 27);
  for (const auto& f : files) {
    INFO(f);
    const Architecture a = load_architecture(f);
    CHECK(a.offchip >= 0);
    CHECK(a.routes.size() == static_cast<size_t>(a.node_count() * a.node_count()));
    CHECK(!a.cores.empty());
    // YAML -> TOML -> load: the same system
    const std::string text = to_toml(a);
    const Architecture b = parse_architecture(text, "roundtrip.toml");
    CHECK(to_toml(b) == text);
    CHECK(b.routes == a.routes);
    REQUIRE(b.cores.size() == a.cores.size());
    for (size_t c = 0; c < a.cores.size(); ++c) {
      CHECK(b.cores[c].compute.instances == a.cores[c].compute.instances);
      CHECK(b.cores[c].runs == a.cores[c].runs);
      REQUIRE(b.cores[c].levels.size() == a.cores[c].levels.size());
      for (size_t l = 0; l < a.cores[c].levels.size(); ++l) {
        const Level &x = a.cores[c].levels[l], &y = b.cores[c].levels[l];
        CHECK(x.entries == y.entries);
        CHECK(x.read_pj == y.read_pj);
        CHECK(x.write_pj == y.write_pj);
        CHECK(x.instances == y.instances);
        CHECK(x.may_keep == y.may_keep);
        CHECK(x.fanout.x_ranks == y.fanout.x_ranks);
      }
    }
  }
  const std::string cls = test::shared_data("stream/classic_cb9dfc52/examples/hardware/");
  const Architecture tpu = load_architecture(cls + "tpu_like_quad_core.yaml");
  REQUIRE(tpu.cores.size() == 6);  // 4 tpu_like + pooling + simd; the DRAM controller is a memory
  CHECK(tpu.node_name(tpu.offchip) == "offchip_6");
  for (int c = 0; c < 4; ++c) {
    CHECK(pes(tpu.cores[c]) == 32 * 32);
    CHECK(tpu.cores[c].levels.at(tpu.cores[c].level_index("sram_2MB")).entries == 16777216 / 8);
    CHECK(tpu.cores[c].runs == kAllOps);
  }
  CHECK(pes(tpu.cores[4]) == 3 * 3 * 8);
  CHECK(tpu.cores[4].runs == op_bit(OpKind::Pool));
  CHECK(pes(tpu.cores[5]) == 64);
  CHECK(tpu.cores[5].runs == (op_bit(OpKind::Elementwise) | op_bit(OpKind::Softmax)));
  CHECK(tpu.links.size() == 12 * 2 + 1);
  const Link& bus = tpu.links.back();
  CHECK(bus.bus);
  CHECK(bus.bits_per_cycle == 128);
  CHECK(bus.nodes.size() == 7);
  // Every pair of nodes is one hop over the bus (Stream's result too: its bus overrides the ring)
  for (int s = 0; s < tpu.node_count(); ++s)
    for (int t = 0; t < tpu.node_count(); ++t)
      if (s != t) CHECK(tpu.path(s, t) == std::vector<int>{static_cast<int>(tpu.links.size() - 1)});
  const Level& dram = tpu.memories.at(0).level;
  CHECK(dram.shared_bandwidth == 64 / 8);  // one 64-bit read_write port
  CHECK(dram.read_pj == 1000.0 * 8 / 64);  // 1000 pJ per 64-bit access
  CHECK(tpu.cores[0].dram().read_pj == dram.read_pj);
  // tpu_like: rf_128B weights per PE, rf_2B outputs per column (served D2), sram_2MB over all:
  // K 32 on D1 fans out from the SRAM, C 32 on D2 from the output register
  const Core& t0 = tpu.cores[0];
  CHECK(t0.levels.at(t0.level_index("rf_2B")).instances == 32);
  CHECK(t0.levels.at(t0.level_index("rf_128B")).instances == 1024);
  CHECK(t0.levels.at(t0.level_index("sram_2MB")).fanout.x_ranks == std::vector<std::string>{"K", "N"});
  CHECK(t0.levels.at(t0.level_index("rf_2B")).fanout.x_ranks == std::vector<std::string>{"C", "K"});

  const Architecture eye = load_architecture(cls + "eyeriss_like_quad_core.yaml");
  REQUIRE(eye.cores.size() == 6);
  for (int c = 0; c < 4; ++c) {
    CHECK(pes(eye.cores[c]) == 14 * 12);  // dataflow K 16 | C 16 clipped to the 14 x 12 array
    CHECK(eye.cores[c].levels.at(eye.cores[c].level_index("sram_1M")).entries == 8388608 / 8);
    CHECK(eye.cores[c].levels.at(eye.cores[c].level_index("sram_64KB")).entries == 524288 / 8);
  }
  CHECK(eye.links.size() == 12 * 2 + 1);
  CHECK(eye.links.back().bits_per_cycle == 128);
  CHECK(eye.memories.at(0).level.shared_bandwidth == 8);
}

TEST_CASE("multicore arch: bad input names file, key and what was expected") {
  const std::string head = "name = \"x\"\n[offchip]\nname = \"DRAM\"\nenergy_pj = 100\n[[offchip.port]]\nbits_per_cycle = 64\n";
  const std::string a = std::string("[[core]]\nname = \"a\"\n") + kCore;
  const std::string b = std::string("[[core]]\nname = \"b\"\n") + kCore;
  // a link to a missing core
  std::string e = input_error(head + a + b + "[[link]]\nfrom = \"a\"\nto = \"bb\"\nbits_per_cycle = 8\n");
  CHECK(e.find("bad.toml") != std::string::npos);
  CHECK(e.find("link[0].to") != std::string::npos);
  CHECK(e.find("no core or memory named 'bb'") != std::string::npos);
  CHECK(e.find("did you mean 'b'") != std::string::npos);
  // cores no path connects
  e = input_error(head + a + b + "[[link]]\nfrom = \"a\"\nto = \"b\"\nbits_per_cycle = 8\n");
  CHECK(e.find("no path connects 'b' to 'a'") != std::string::npos);
  CHECK(e.find("bad.toml") != std::string::npos);
  // duplicate core names
  e = input_error(head + a + a + "[topology]\nkind = \"bus\"\nlink_bits_per_cycle = 8\n");
  CHECK(e.find("name 'a' is used twice") != std::string::npos);
  // a core that can run nothing
  e = input_error(head + "[[core]]\nname = \"a\"\nruns = []\n" + kCore + b + "[topology]\nkind = \"bus\"\nlink_bits_per_cycle = 8\n");
  CHECK(e.find("core[0].runs") != std::string::npos);
  CHECK(e.find("can run nothing") != std::string::npos);
  e = input_error(head + "[[core]]\nname = \"a\"\nruns = [\"pools\"]\n" + kCore);
  CHECK(e.find("did you mean 'pool'") != std::string::npos);
  // topology errors
  e = input_error(head + std::string("[[core]]\nname = \"pe\"\ncount = 6\n") + kCore +
                  "[topology]\nkind = \"mesh\"\nrows = 2\ncols = 2\nlink_bits_per_cycle = 8\n");
  CHECK(e.find("2 x 2 does not match the 6 nodes") != std::string::npos);
  e = input_error(head + a + b + "[topology]\nkind = \"ring\"\nlink_bits_per_cycle = 8\n");
  CHECK(e.find("topology.kind") != std::string::npos);
  // no off-chip memory
  e = input_error(std::string("name = \"x\"\n") + a);
  CHECK(e.find("offchip") != std::string::npos);

  // Stream YAML: malformed dataflow, missing keys, malformed YAML
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "mapfuse_test_stream_yaml";
  fs::remove_all(dir);
  fs::create_directories(dir / "cores");
  const std::string cls = test::shared_data("stream/classic_cb9dfc52/examples/hardware/cores/");
  fs::copy_file(cls + "offchip.yaml", dir / "cores" / "offchip.yaml");
  auto write = [&](const fs::path& p, const std::string& text) {
    std::ofstream(p) << text;
    return p.string();
  };
  auto core_yaml = [](const std::string& dataflow) {
    return "name: c\ntype: compute\nmemories:\n  sram:\n    size: 65536\n    r_cost: 1\n    w_cost: 1\n    area: 0\n"
           "    latency: 1\n    operands: [I1, I2, O]\n    ports:\n      - name: rw\n        type: read_write\n"
           "        bandwidth_min: 64\n        bandwidth_max: 64\n        allocation: [I1, tl]\n"
           "    served_dimensions: [D1, D2]\noperational_array:\n  unit_energy: 0.1\n  unit_area: 1\n"
           "  dimensions: [D1, D2]\n  sizes: [4, 4]\n" + dataflow;
  };
  const std::string sys = write(dir / "sys.yaml",
                                "name: s\ncores:\n  0: c.yaml\n  1: offchip.yaml\noffchip_core_id: 1\n"
                                "core_connectivity:\n  - type: bus\n    cores: [0, 1]\n    bandwidth: 64\n");
  auto stream_error = [&](const std::string& core_text) {
    write(dir / "cores" / "c.yaml", core_text);
    try {
      load_architecture(sys);
    } catch (const InputError& x) {
      return std::string(x.what());
    }
    return std::string("no error");
  };
  CHECK(stream_error(core_yaml("dataflows:\n  D1:\n    - K, 4\n  D2:\n    - C, 4\n")) == "no error");
  e = stream_error(core_yaml("dataflows:\n  D1:\n    - K 4\n"));
  CHECK(e.find("c.yaml:") != std::string::npos);
  CHECK(e.find("dataflows.D1") != std::string::npos);
  CHECK(e.find("expected '<loop>, <size>'") != std::string::npos);
  e = stream_error(core_yaml("dataflows:\n  D1:\n    - KK, 4\n"));
  CHECK(e.find("unknown loop dimension 'KK'") != std::string::npos);
  e = stream_error(core_yaml("dataflows:\n  D3:\n    - K, 4\n"));
  CHECK(e.find("dataflows.D3") != std::string::npos);
  e = stream_error(core_yaml("dataflows:\n  D1:\n    - K, 4\n    - C, 2\n"));
  CHECK(e.find("unrolls 8 on a dimension of 4") != std::string::npos);
  e = stream_error(core_yaml("").replace(core_yaml("").find("    r_cost: 1\n"), 14, ""));
  CHECK(e.find("memories.sram.r_cost") != std::string::npos);
  CHECK(e.find("missing required key") != std::string::npos);
  e = stream_error(core_yaml("dataflows: [\n"));
  CHECK(e.find("c.yaml:") != std::string::npos);
  CHECK(e.find("malformed YAML") != std::string::npos);
  write(dir / "cores" / "c.yaml", core_yaml(""));
  write(dir / "sys.yaml", "name: s\ncores:\n  0: c.yaml\n  1: offchip.yaml\noffchip_core_id: 1\n"
                          "core_connectivity:\n  - type: link\n    cores: [0, 7]\n    bandwidth: 64\n");
  e = stream_error(core_yaml(""));
  CHECK(e.find("sys.yaml:") != std::string::npos);
  CHECK(e.find("core_connectivity[0].cores") != std::string::npos);
  CHECK(e.find("core 7 is not listed") != std::string::npos);
  write(dir / "sys.yaml", "name: s\ncores:\n  0: c.yaml\n  1: offchip.yaml\n  2: c.yaml\noffchip_core_id: 1\n"
                          "core_connectivity:\n  - type: link\n    cores: [0, 1]\n    bandwidth: 64\n");
  e = stream_error(core_yaml(""));
  CHECK(e.find("no path connects") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("multicore arch: the mapper keeps to each core's dataflow (stream_t3_2c_1ws)") {
  const Architecture a = load_architecture("stream_t3_2c_1ws");
  REQUIRE(a.cores.size() == 2);
  // small enough for the exhaustive mapper in well under a second per core
  const Einsum ws_conv = make_conv("conv", {.K = 2, .C = 2, .P = 1, .Q = 1, .R = 3, .S = 3});
  const Einsum os_conv = make_conv("conv", {.K = 2, .C = 2, .P = 1, .Q = 2, .R = 1, .S = 1});
  auto spatial_ranks = [&](const Core& core, const Einsum& conv) {
    const MapperResult r = exhaustive_search(conv, core, {}, {.objective = Objective::Edp});
    REQUIRE(r.best);
    std::set<std::string> ranks;
    int64_t used = 1;
    for (const LevelMapping& lm : r.best->levels)
      for (const Loop& l : lm.loops)
        if (l.kind != LoopKind::Temporal) {
          ranks.insert(conv.ranks[l.rank].name);
          used *= l.factor;
        }
    MESSAGE(core.name << ": " << to_text(*r.best, conv, core) << "  (" << used << " PEs)");
    return std::pair{ranks, used};
  };
  const auto [ws, ws_used] = spatial_ranks(a.cores[0], ws_conv);  // WS: C | FX | FY on rows, K on columns
  CHECK(a.cores[0].name == "ws0");
  for (const auto& r : ws) CHECK((r == "C" || r == "S" || r == "R" || r == "K"));
  CHECK(ws_used == 2 * 2 * 3 * 3);  // the whole conv fits the 36 x 64 array: every rank spread fully
  const auto [os, os_used] = spatial_ranks(a.cores[1], os_conv);  // OS: OX (Q) on rows, K on columns
  CHECK(a.cores[1].name == "os0");
  for (const auto& r : os) CHECK((r == "Q" || r == "K"));
  CHECK(os_used == 2 * 2);
}

TEST_CASE("multicore arch: the quad-core presets are Stream's files as converted") {
  const std::string cls = test::shared_data("stream/classic_cb9dfc52/examples/hardware/");
  for (const char* n : {"tpu_like_quad_core", "eyeriss_like_quad_core"}) {
    INFO(n);
    const Architecture preset = load_architecture(n);
    const Architecture yaml = load_architecture(cls + n + ".yaml");
    CHECK(to_toml(preset) == to_toml(yaml));
    CHECK(preset.routes == yaml.routes);
    CHECK(preset.cores.size() == 6);
    CHECK(preset.memories.at(0).level.read_pj == 125);  // 1000 pJ per 64-bit DRAM access
  }
}
