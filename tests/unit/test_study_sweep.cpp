// Architecture sweeps in studies (partitioners/study, engine/arch/arch_sweep), grouping of
// identical layers into one unit, and the sweep parts of the report (results/report).
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <algorithm>
#include <map>
#include <set>

#include "engine/arch/arch_sweep.hpp"
#include "engine/arch/arch_toml.hpp"
#include "engine/common/error.hpp"
#include "partitioners/study.hpp"
#include "results/report.hpp"
#include "test_support.hpp"

using namespace mapfuse;

namespace {

const std::string kSweepStudy = R"(name = "sw"
[[workload]]
spec = "resnet18"
layers = ["conv1", "fc"]
[[architecture]]
spec = "gemmini_default"
name = "gemmini"
[architecture.sweep]
pe = [8, 32]
scratchpad_kib = [64, 128, 512]
accumulator_kib = [16, 128]
[method]
name = "exhaustive"
)";

// Layers by name; "a*" layers share one shape, the others are all different.
std::vector<StudyLayer> fake_layers(const StudyWorkload& w) {
  std::vector<StudyLayer> out;
  for (const std::string& n : w.layers) out.push_back({n, n[0] == 'a' ? "shape-a" : "shape-" + n, n == "c" ? 500.0 : 7.0});
  return out;
}

// The error of parsing `text` (the test fails when there is none).
InputError parse_error(const std::string& text) { return test::study_error(text, "study.toml"); }

std::string replace(const std::string& s, const std::string& from, const std::string& to) {
  return test::replace_once(s, from, to);
}

}  // namespace

TEST_CASE("study sweep: points are the product of the axes, named in the order written") {
  const Study s = parse_study(kSweepStudy, "sw.toml");
  REQUIRE(s.architectures.size() == 1);
  const StudyArchitecture& a = s.architectures[0];
  REQUIRE(a.sweep.size() == 3);
  CHECK(a.sweep[0].key == "pe");
  CHECK(a.sweep[1].key == "scratchpad_kib");
  CHECK(a.sweep[2].key == "accumulator_kib");
  CHECK(a.sweep[0].where.line == 9);
  REQUIRE(a.points.size() == 2 * 3 * 2);
  CHECK(a.points[0].name == "gemmini_pe8_sp64_acc16");
  CHECK(a.points[1].name == "gemmini_pe8_sp64_acc128");  // the last axis varies fastest
  CHECK(a.points[2].name == "gemmini_pe8_sp128_acc16");
  CHECK(a.points[11].name == "gemmini_pe32_sp512_acc128");
  std::set<std::string> names;
  for (const auto& p : a.points) names.insert(p.name);
  CHECK(names.size() == 12);
  CHECK(a.points[7].params == std::vector<std::pair<std::string, double>>{{"pe", 32}, {"scratchpad_kib", 64}, {"accumulator_kib", 128}});
}

TEST_CASE("study sweep: each point's architecture has the swept values (DOSA's Gemmini parameterisation)") {
  const Study s = parse_study(kSweepStudy, "sw.toml");
  const ArchitecturePoint& p = s.architectures[0].points[7];  // pe 32, sp 64 KiB, acc 128 KiB
  REQUIRE(p.name == "gemmini_pe32_sp64_acc128");
  const Architecture a = parse_architecture(p.toml, p.name);
  CHECK(a.name == p.name);
  const Core& c = a.cores.at(0);
  const Level& sp = c.levels.at(c.level_index("Scratchpad"));
  const Level& acc = c.levels.at(c.level_index("Accumulator"));
  CHECK(sp.fanout.x == 32);
  CHECK(acc.fanout.y == 32);
  CHECK(c.compute.instances == 32 * 32);
  CHECK(sp.shared_bandwidth == 64);  // 2 x PE-array side
  CHECK(sp.entries == 64 * 1024);    // 8-bit words
  CHECK(sp.read_pj == doctest::Approx(0.49 + 0.02513 * 64).epsilon(1e-12));
  CHECK(acc.instances == 32);
  CHECK(acc.entries == 128 * 1024 / 4 / 32);  // 32-bit words, per column
  CHECK(acc.read_pj == doctest::Approx(1.94 + 0.1005 * 4.0).epsilon(1e-12));  // 4 KiB per column
  // Everything not swept is the base's.
  const Architecture base = load_architecture("gemmini_default");
  const Core& b = base.cores[0];
  CHECK(c.levels.size() == b.levels.size());
  CHECK(c.dram().read_pj == b.dram().read_pj);
  CHECK(acc.shared_bandwidth == b.levels[b.level_index("Accumulator")].shared_bandwidth);
}

namespace {

// Built field by field: GCC 12 at -O3 takes a braced SourceLocation{} in an aggregate for an
// uninitialised string (-Wmaybe-uninitialized, an error in CI).
ArchParameter param(const std::string& key, double value, const std::string& path) {
  ArchParameter p;
  p.key = key;
  p.value = value;
  p.key_path = path;
  return p;
}

}  // namespace

TEST_CASE("study sweep: pe alone keeps the accumulator's total capacity; level fields are literal") {
  Architecture base = load_architecture("gemmini_default");
  const Architecture a = apply_parameters(base, {param("pe", 64, "pe")});
  const Level& acc = a.cores[0].levels[a.cores[0].level_index("Accumulator")];
  CHECK(acc.instances == 64);
  CHECK(acc.entries * acc.instances == 64 * 1024 / 4);  // still 64 KiB in all
  const Architecture b = apply_parameters(base, {param("Scratchpad.block_size", 8, "k"), param("DRAM.shared_bandwidth", 16, "k"),
                                                 param("Accumulator.size_kb", 1, "k")});
  const Core& c = b.cores[0];
  CHECK(c.levels[c.level_index("Scratchpad")].block_size == 8);
  CHECK(c.dram().shared_bandwidth == 16);
  CHECK(c.levels[c.level_index("Accumulator")].entries == 256);  // 1 KiB of 32-bit words per instance
  CHECK(c.levels[c.level_index("Accumulator")].instances == 16);
}

TEST_CASE("study sweep: unit ids are stable and change exactly with the point") {
  const Study s = parse_study(kSweepStudy, "sw.toml");
  const auto u1 = partition_study(s, &fake_layers);
  const auto u2 = partition_study(parse_study(kSweepStudy, "sw.toml"), &fake_layers);
  REQUIRE(u1.size() == 12 * 2);
  std::set<std::string> ids;
  for (size_t i = 0; i < u1.size(); ++i) {
    CHECK(u1[i].id == u2[i].id);
    ids.insert(u1[i].id);
  }
  CHECK(ids.size() == u1.size());
  // Another accumulator value: the acc16 points keep their ids, the others change.
  const auto u3 = partition_study(parse_study(replace(kSweepStudy, "[16, 128]", "[16, 96]"), "sw.toml"), &fake_layers);
  REQUIRE(u3.size() == u1.size());
  for (size_t i = 0; i < u1.size(); ++i) {
    INFO(u1[i].label);
    CHECK((u1[i].id == u3[i].id) == (u1[i].label.find("_acc16") != std::string::npos));
  }
  CHECK(u1[0].label == "resnet18/conv1 @ gemmini_pe8_sp64_acc16");
  CHECK(u1[0].payload.find("\"arch_toml\"") != std::string::npos);
}

TEST_CASE("study sweep: identical layers share a unit (exhaustive), not for random or when disabled") {
  std::string text = R"(name = "g"
[[workload]]
spec = "net"
layers = ["a1", "b", "a2", "c", "a3"]
[[architecture]]
spec = "gemmini_default"
[method]
name = "exhaustive"
)";
  auto units = partition_study(parse_study(text, "g.toml"), &fake_layers);
  REQUIRE(units.size() == 3);
  CHECK(units[0].label == "net/{a1,a2,a3} @ gemmini_default");
  CHECK(units[1].label == "net/b @ gemmini_default");
  CHECK(units[2].label == "net/c @ gemmini_default");
  CHECK(units[0].payload.find(R"("layer":"a1","layers":["a1","a2","a3"])") != std::string::npos);
  // Cost hints are the layers' mapspace sizes, so the big layer is dispatched first.
  CHECK(units[0].cost_hint == 7.0);
  CHECK(units[2].cost_hint == 500.0);
  std::vector<WorkUnit> dispatched = units;
  order_for_dispatch(dispatched);
  CHECK(dispatched.front().label == "net/c @ gemmini_default");

  auto no_group = partition_study(parse_study(text + "group_identical = false\n", "g.toml"), &fake_layers);
  CHECK(no_group.size() == 5);
  auto random = partition_study(parse_study(replace(text, "exhaustive", "random") + "seeds = [1, 2]\n", "g.toml"), &fake_layers);
  CHECK(random.size() == 10);
  CHECK(random[0].label == "net/a1 @ gemmini_default seed 1");
}

// Two layers of the fake network, exhaustive: the [method] keys under test are appended.
const std::string kTwoLayerExhaustive = R"(name = "g"
[[workload]]
spec = "net"
layers = ["a1", "b"]
[[architecture]]
spec = "gemmini_default"
[method]
name = "exhaustive"
)";

TEST_CASE("study sweep: pareto = false asks the exhaustive units for branch and bound; the default keeps the units as they were") {
  const std::string& text = kTwoLayerExhaustive;
  const auto with_front = partition_study(parse_study(text, "g.toml"), &fake_layers);
  const auto explicit_front = partition_study(parse_study(text + "pareto = true\n", "g.toml"), &fake_layers);
  const auto bound = partition_study(parse_study(text + "pareto = false\n", "g.toml"), &fake_layers);
  REQUIRE(with_front.size() == 2);
  REQUIRE(bound.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    // The default writes no key, so the payloads and ids of existing studies (and their journals) stay.
    CHECK(with_front[i].payload.find("pareto") == std::string::npos);
    CHECK(explicit_front[i].id == with_front[i].id);
    CHECK(bound[i].payload.find(R"("pareto":false)") != std::string::npos);
    CHECK(bound[i].id != with_front[i].id);
  }
  CHECK_THROWS_AS(parse_study(text + "pareto = \"no\"\n", "g.toml"), InputError);
}

TEST_CASE("study sweep: gap asks branch and bound for a mapping within the gap; it needs pareto = false") {
  const std::string text = kTwoLayerExhaustive + "pareto = false\n";
  const auto exact = partition_study(parse_study(text, "g.toml"), &fake_layers);
  const auto zero = partition_study(parse_study(text + "gap = 0\n", "g.toml"), &fake_layers);
  const auto gap = partition_study(parse_study(text + "gap = 0.01\n", "g.toml"), &fake_layers);
  REQUIRE(gap.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    CHECK(exact[i].payload.find("gap") == std::string::npos);  // exact studies keep their ids
    CHECK(zero[i].id == exact[i].id);
    CHECK(gap[i].payload.find(R"("gap":0.01)") != std::string::npos);
    CHECK(gap[i].id != exact[i].id);
  }
  CHECK_THROWS_AS(parse_study(text + "gap = -0.5\n", "g.toml"), InputError);
  // A front needs every mapping: no gap with it.
  CHECK_THROWS_WITH_AS(parse_study(kTwoLayerExhaustive + "pareto = true\ngap = 0.01\n", "g.toml"),
                       doctest::Contains("pareto = false"), InputError);
}

TEST_CASE("study sweep: layers named by per-layer constraints are not grouped") {
  const std::string text = R"(name = "g"
[[workload]]
spec = "net"
layers = ["a1", "a2", "a3"]
[[architecture]]
spec = "gemmini_default"
constraints = "CONSTRAINTS"
[method]
name = "exhaustive"
)";
  // A constraint file beside the test's build: one constraint for layer a2 only.
  const std::string file = std::filesystem::temp_directory_path() / "mapfuse_test_layer_constraint.toml";
  { std::ofstream(file) << "[[constraint]]\nlevel = \"Scratchpad\"\nlayer = \"a2\"\nspatial_x = [\"K\"]\n"; }
  const Study s = parse_study(replace(text, "CONSTRAINTS", file), "g.toml");
  CHECK(s.architectures[0].constrained_layers == std::vector<std::string>{"a2"});
  const auto units = partition_study(s, &fake_layers);
  REQUIRE(units.size() == 2);
  CHECK(units[0].label == "net/{a1,a3} @ gemmini_default");
  CHECK(units[1].label == "net/a2 @ gemmini_default");
  std::filesystem::remove(file);
}

TEST_CASE("study sweep: inline architectures, dotted level keys, names without loading") {
  const std::string text = R"(name = "inl"
[[workload]]
spec = "mm"
[[architecture]]
name = "tiny"
[architecture.compute]
energy_pj = 0.5
[[architecture.level]]
name = "DRAM"
energy_pj = 100
[[architecture.level]]
name = "Buffer"
entries = 16
energy_pj = 1
[architecture.sweep]
Buffer.entries = [16, 64]
"DRAM.shared_bandwidth" = [1, 4]
[method]
name = "exhaustive"
)";
  const Study s = parse_study(text, "inl.toml");
  const auto& pts = s.architectures.at(0).points;
  REQUIRE(pts.size() == 4);
  CHECK(pts[0].name == "tiny_buffer_entries16_dram_shared_bandwidth1");
  CHECK(pts[3].name == "tiny_buffer_entries64_dram_shared_bandwidth4");
  const Architecture a = parse_architecture(pts[3].toml, "p");
  CHECK(a.cores[0].levels[0].entries == 64);
  CHECK(a.cores[0].dram().shared_bandwidth == 4);
  // Without loading, the names and parameters are the same (reports of finished studies).
  const Study n = parse_study(replace(kSweepStudy, "gemmini_default", "gone/missing.toml"), "sw.toml", false);
  REQUIRE(n.architectures[0].points.size() == 12);
  CHECK(n.architectures[0].points[11].name == "gemmini_pe32_sp512_acc128");
  CHECK(n.architectures[0].points[11].toml.empty());
}

TEST_CASE("study sweep: bad sweeps are InputErrors with file, line and key") {
  InputError e = parse_error(replace(kSweepStudy, "pe = [8, 32]", "pe = []"));
  CHECK(e.where().file == "study.toml");
  CHECK(e.where().line == 9);
  CHECK(e.key() == "architecture[0].sweep.pe");
  CHECK(e.message().find("empty") != std::string::npos);

  e = parse_error(replace(kSweepStudy, "pe = [8, 32]", "pes = [8, 32]"));
  CHECK(e.where().line == 9);
  CHECK(e.key() == "architecture[0].sweep.pes");
  CHECK(e.message().find("did you mean 'pe'") != std::string::npos);

  e = parse_error(replace(kSweepStudy, "scratchpad_kib = [64, 128, 512]", "scratchpad_kib = [64, 0, 512]"));
  CHECK(e.where().line == 10);
  CHECK(e.key() == "architecture[0].sweep.scratchpad_kib");
  CHECK(e.message().find("not positive") != std::string::npos);

  e = parse_error(replace(kSweepStudy, "accumulator_kib = [16, 128]", "accumulator_kib = [16, -4]"));
  CHECK(e.where().line == 11);

  e = parse_error(replace(kSweepStudy, "pe = [8, 32]", "pe = [8, 2.5]"));  // fan-outs are integers
  CHECK(e.where().line == 9);
  CHECK(e.message().find("integer") != std::string::npos);

  e = parse_error(replace(kSweepStudy, "pe = [8, 32]", "Scratchpd.size_kb = [8, 32]"));  // level checked on the base
  CHECK(e.where().line == 9);
  CHECK(e.message().find("did you mean 'Scratchpad'") != std::string::npos);

  e = parse_error(replace(kSweepStudy, "pe = [8, 32]", "Scratchpad.size_kbb = [8, 32]"));
  CHECK(e.where().line == 9);
  CHECK(e.message().find("did you mean 'size_kb'") != std::string::npos);

  e = parse_error(replace(kSweepStudy, "pe = [8, 32]", "pe = [8, 8]"));
  CHECK(e.message().find("repeats") != std::string::npos);

  e = parse_error(replace(kSweepStudy, "pe = [8, 32]", "pe = 8"));
  CHECK(e.where().line == 9);

  e = parse_error(replace(kSweepStudy, "[architecture.sweep]\npe = [8, 32]\nscratchpad_kib = [64, 128, 512]\naccumulator_kib = [16, 128]\n",
                          "[architecture.sweep]\n"));
  CHECK(e.key() == "architecture[0].sweep");
  CHECK(e.message().find("no axes") != std::string::npos);

  // Two entries whose points would have the same names.
  e = parse_error(kSweepStudy + "[[architecture]]\nspec = \"gemmini_default\"\nname = \"gemmini_pe8_sp64_acc16\"\n");
  CHECK(e.where().line == 16);
  CHECK(e.message().find("also a point of architecture[0]") != std::string::npos);

  // A spec that is neither a preset nor a file: the line of `spec`.
  e = parse_error(replace(kSweepStudy, "spec = \"gemmini_default\"", "spec = \"gemini_default\""));
  CHECK(e.where().line == 6);
  CHECK(e.message().find("did you mean 'gemmini_default'") != std::string::npos);

  // pe needs a Scratchpad and an Accumulator.
  e = parse_error(replace(kSweepStudy, "spec = \"gemmini_default\"", "spec = \"timeloop_conv1d_2level\""));
  CHECK(e.where().line == 9);
  CHECK(e.message().find("no level 'Scratchpad'") != std::string::npos);

  // An accumulator too small for the columns.
  e = parse_error(replace(kSweepStudy, "accumulator_kib = [16, 128]", "accumulator_kib = [16, 0.001]"));
  CHECK(e.where().line == 11);
  CHECK(e.message().find("less than one") != std::string::npos);

  // An inline architecture's own errors keep the study's lines.
  e = parse_error("name = \"x\"\n[[workload]]\nspec = \"mm\"\n[[architecture]]\nname = \"t\"\n[architecture.compute]\nenergy_pj = 1\n"
                  "[[architecture.level]]\nname = \"DRAM\"\nentries = 0\n");
  CHECK(e.where().line == 10);
  CHECK(e.key() == "architecture[0].level[0].entries");
}

TEST_CASE("report: grouped units count once per layer in network totals; best sweep point") {
  StudyFile f;
  auto unit = [](std::string label, double e, double c) {
    UnitResult r;
    r.kind = "map_layer";
    r.unit_id = label;
    r.label = std::move(label);
    r.energy_pj = e;
    r.cycles = c;
    r.edp = e * c;
    return r;
  };
  f.results = {unit("net/{a1,a2,a3} @ g_pe8", 10, 100), unit("net/b @ g_pe8", 5, 50),
               unit("net/{a1,a2,a3} @ g_pe16", 8, 60), unit("net/b @ g_pe16", 4, 40),
               unit("net/{a1,a2,a3} @ g_pe32", 1, 1)};  // pe32 lacks b (failed): left out of the best
  LayerLabel l;
  REQUIRE(parse_layer_label("net/{a1,a2,a3} @ g_pe8", l));
  CHECK(l.layers == std::vector<std::string>{"a1", "a2", "a3"});
  REQUIRE(parse_layer_label("net/x,y @ g seed 3", l));  // no braces: one layer, whatever its name
  CHECK(l.layers == std::vector<std::string>{"x,y"});
  CHECK(l.seed == "3");

  const auto totals = network_totals(f);
  REQUIRE(totals.size() == 3);  // sorted by (workload, arch, seed)
  CHECK(totals[2].arch == "g_pe8");
  CHECK(totals[2].layers == 4);
  CHECK(totals[2].energy_pj == 35);
  CHECK(totals[2].cycles == 350);
  CHECK(totals[2].edp() == 35 * 350);

  const std::vector<SweepPointInfo> sweep = {{"g_pe8", "g", {{"pe", 8}}}, {"g_pe16", "g", {{"pe", 16}}}, {"g_pe32", "g", {{"pe", 32}}}};
  const std::string csv = sweep_csv(f, sweep);
  CHECK(csv ==
        "family,workload,seed,arch,params,layers,complete,best,energy_pj,cycles,edp\n"
        "g,net,,g_pe8,pe=8,4,1,0,35,350,12250\n"
        "g,net,,g_pe16,pe=16,4,1,1,28,220,6160\n"
        "g,net,,g_pe32,pe=32,3,0,0,3,3,9\n");
  const std::string md = report_markdown(f, sweep);
  CHECK(md.find("| g | net | - | g_pe16 | pe=16 | 4 | 28 | 220 | 6160 | 2 |") != std::string::npos);
}

TEST_CASE("study sweep: units carry their parameters as columns; one study may mix method families") {
  const std::string text = R"(name = "cols"
[[workload]]
spec = "net"
layers = ["a1", "b", "a2", "c", "a3"]
[[architecture]]
spec = "gemmini_default"
name = "g"
[architecture.sweep]
pe = [8, 16]
Scratchpad.size_kb = [64]
[method]
name = ["exhaustive", "fadiff", "ffm"]
seeds = [7]
)";
  const std::vector<WorkUnit> units = partition_study(parse_study(text, "cols.toml"), &fake_layers);
  auto text_of = [](const WorkUnit& u, const char* name) {
    const UnitColumn* c = find_column(u.columns, name);
    REQUIRE(c);
    REQUIRE(c->type == UnitColumn::Type::Text);
    return c->text;
  };
  auto number = [](const WorkUnit& u, const char* name) -> double {
    const UnitColumn* c = find_column(u.columns, name);
    if (!c) return -99;
    return c->type == UnitColumn::Type::Real ? c->real : static_cast<double>(c->integer);
  };
  // 2 points x (3 exhaustive groups + 1 fadiff seed + 5 ffm generation units).
  REQUIRE(units.size() == 2 * (3 + 1 + 5));
  int map = 0, net = 0, gen = 0;
  for (const WorkUnit& u : units) {
    CHECK(text_of(u, "workload") == "net");
    const bool pe8 = u.label.find("g_pe8_") != std::string::npos;
    CHECK(text_of(u, "arch").starts_with(pe8 ? "g_pe8_" : "g_pe16_"));
    CHECK(number(u, "pe") == (pe8 ? 8 : 16));
    CHECK(number(u, "Scratchpad.size_kb") == 64);
    if (u.kind == "map_layer") {
      ++map;
      CHECK(text_of(u, "method") == "exhaustive");
      CHECK(number(u, "seed") == -99);  // exhaustive has no seed
      if (u.label.starts_with("net/{a1,a2,a3}")) {
        CHECK(text_of(u, "einsum") == "a1,a2,a3");
        CHECK(number(u, "einsum_count") == 3);
        CHECK(number(u, "einsum_index") == 0);
      } else if (u.label.starts_with("net/c ")) {
        CHECK(number(u, "einsum_index") == 3);  // network position, not the group's
      }
    } else if (u.kind == "optimize_network") {
      ++net;
      CHECK(text_of(u, "method") == "fadiff");
      CHECK(text_of(u, "einsum").empty());
      CHECK(number(u, "seed") == 7);
    } else if (u.kind == "ffm_pmappings") {
      ++gen;
      CHECK(text_of(u, "method") == "ffm");
      CHECK(text_of(u, "einsum") == std::vector<std::string>{"a1", "b", "a2", "c", "a3"}[static_cast<size_t>(number(u, "einsum_index"))]);
    }
  }
  CHECK(map == 6);
  CHECK(net == 2);
  CHECK(gen == 10);
  // Alone, each family's units (and ids) are the same as in the mixed study.
  const auto alone = partition_study(parse_study(replace(text, R"(["exhaustive", "fadiff", "ffm"])", R"("fadiff")"), "cols.toml"),
                                     &fake_layers);
  REQUIRE(alone.size() == 2);
  CHECK(std::count_if(units.begin(), units.end(), [&](const WorkUnit& u) { return u.id == alone[0].id; }) == 1);
  CHECK_THROWS_AS(parse_study(replace(text, R"(["exhaustive", "fadiff", "ffm"])", R"(["exhaustive", "random"])"), "cols.toml"),
                  InputError);
}

TEST_CASE("study: ffm_unfused is FFM with fusion off, beside ffm whose units keep their ids") {
  const std::string text = R"(name = "unf"
[[workload]]
spec = "net"
layers = ["a1", "b", "c"]
[[architecture]]
spec = "gemmini_default"
[method]
name = ["ffm", "ffm_unfused"]
must_fuse = "others"
nested_loops = 1
)";
  const std::vector<WorkUnit> both = partition_study(parse_study(text, "unf.toml"), &fake_layers);
  const std::vector<WorkUnit> ffm = partition_study(parse_study(replace(text, R"(["ffm", "ffm_unfused"])", R"("ffm")"), "unf.toml"),
                                                    &fake_layers);
  REQUIRE(both.size() == 6);
  REQUIRE(ffm.size() == 3);
  std::set<std::string> ids;
  for (const WorkUnit& u : both) ids.insert(u.id);
  CHECK(ids.size() == 6);
  for (const WorkUnit& u : ffm) CHECK(ids.count(u.id) == 1);  // the ffm units are unchanged
  int unfused = 0;
  for (const WorkUnit& u : both) {
    CHECK(u.kind == "ffm_pmappings");
    const bool off = u.label.find(" ffm_unfused slice ") != std::string::npos;
    const UnitColumn* m = find_column(u.columns, "method");
    REQUIRE(m);
    CHECK(m->text == (off ? "ffm_unfused" : "ffm"));
    if (!off) continue;
    ++unfused;
    // Every Einsum alone: none of the study's fusion decisions or nested loops apply.
    CHECK(u.payload.find(R"("fusion":false)") != std::string::npos);
    CHECK(u.payload.find(R"("must_fuse_others":false)") != std::string::npos);
    CHECK(u.payload.find(R"("must_fuse":[])") != std::string::npos);
    CHECK(u.payload.find("nested_loops") == std::string::npos);
    CHECK(u.payload.find(R"("method":"ffm_unfused")") != std::string::npos);
  }
  CHECK(unfused == 3);
  CHECK(ffm_join_label("net", "gemmini_default", "ffm_unfused") == "net @ gemmini_default ffm_unfused");
}

TEST_CASE("report: the headline divides only prices of the same Einsums on the same model") {
  StudyFile f;
  auto unit = [](std::string kind, std::string label, double e, double c, int einsums, std::string groups) {
    UnitResult r;
    r.kind = std::move(kind);
    r.unit_id = label;
    r.label = std::move(label);
    r.energy_pj = e;
    r.cycles = c;
    r.edp = e * c;
    if (einsums > 0) {
      r.columns.push_back(UnitColumn::of_text("fused_groups", groups));
      r.columns.push_back(UnitColumn::of_integer("einsums_priced", einsums));
    }
    return r;
  };
  // Two MAC layers (exhaustive: 10 x 100 + 5 x 50 -> 15 x 150); the network has 3 Einsums.
  f.results = {unit("map_layer", "net/a @ g", 10, 100, 0, ""), unit("map_layer", "net/b @ g", 5, 50, 0, ""),
               unit("optimize_network", "net @ g fadiff seed 1", 12, 150, 2, "a+b"),
               unit("ffm_join", "net @ g ffm_unfused", 20, 200, 3, "none"),
               unit("ffm_join", "net @ g ffm", 16, 200, 3, "a+b"),
               unit("ffm_baseline", "net @ g ffm_sa seed 1", 18, 200, 3, "none"),
               unit("optimize_network", "other @ g fadiff seed 1", 1, 1, 2, "none")};  // no baseline
  for (int i : {0, 1}) f.results[i].columns.push_back(UnitColumn::of_text("method", "exhaustive"));
  // "other"'s FADiff run with its mappings re-priced unfused (2 pJ x 1 cycle): its own baseline.
  f.results[6].columns.front().text = "a+b";
  f.results[6].columns.push_back(UnitColumn::of_real("unfused_energy_pj", 2));
  f.results[6].columns.push_back(UnitColumn::of_real("unfused_cycles", 1));
  const std::vector<HeadlineRow> h = headline_table(f);
  REQUIRE(h.size() == 7);
  std::map<std::string, HeadlineRow> by;
  for (const HeadlineRow& r : h)
    if (r.workload == "net") by[r.method] = r;
  CHECK(h[0].workload == "net");
  CHECK(h[0].method == "exhaustive");
  CHECK(by.at("exhaustive").einsums == 2);
  CHECK(by.at("exhaustive").edp_vs_layerwise == 1);
  CHECK(by.at("fadiff").baseline == "exhaustive");
  CHECK(by.at("fadiff").edp_vs_layerwise == doctest::Approx(12.0 * 150 / (15 * 150)));
  CHECK(by.at("fadiff").model == "fadiff-exact");
  CHECK(by.at("ffm").baseline == "ffm_unfused");
  CHECK(by.at("ffm").edp_vs_layerwise == doctest::Approx(0.8));
  CHECK(by.at("ffm_sa").edp_vs_layerwise == doctest::Approx(0.9));
  CHECK(by.at("ffm_unfused").edp_vs_layerwise == 1);
  CHECK(by.at("ffm").model == "ffm-fused");
  // net's FADiff unit has no unfused columns (an older file): against the layer mapper instead.
  CHECK(h[5].method == "fadiff_unfused");
  CHECK(h[5].edp == 2);
  CHECK(h[5].fused_groups == "none (fadiff's mappings)");
  CHECK(h[6].method == "fadiff");
  CHECK(h[6].baseline == "fadiff_unfused");
  CHECK(h[6].edp_vs_layerwise == doctest::Approx(0.5));
  // A run that fused nothing gets no unfused row (it would repeat the run).
  f.results[6].columns.front().text = "none";
  CHECK(headline_table(f).size() == 6);
  // FFM priced on a different number of Einsums than its unfused run: no ratio.
  f.results[3].columns.back().integer = 2;
  for (const HeadlineRow& r : headline_table(f))
    if (r.method == "ffm") CHECK(r.edp_vs_layerwise == 0);
  const std::string md = report_markdown(f);
  CHECK(md.find("| net | g | ffm_sa | 1 | 3 | ffm-fused | 18 | 200 | 3600 | - | none |") != std::string::npos);
}

TEST_CASE("report: the headline summarises a long list of fused groups") {
  UnitResult r;
  r.kind = "ffm_join";
  r.unit_id = r.label = "net @ g ffm";
  r.energy_pj = 2;
  r.cycles = 3;
  r.edp = 6;
  std::string groups;
  for (int i = 0; i < 20; ++i) groups += fmt::format("{}layer{}.a+layer{}.b", i ? "; " : "", i, i);  // 20 groups, 40 Einsums
  r.columns = {UnitColumn::of_text("fused_groups", groups), UnitColumn::of_integer("einsums_priced", 40)};
  StudyFile f;
  f.results = {r};
  const std::string md = report_markdown(f);
  CHECK(md.find("| 20 groups of 40 Einsums: layer0.a+layer0.b; ... (all: --csv, fused_groups) |") != std::string::npos);
  CHECK(headline_table(f).at(0).fused_groups == groups);  // the row keeps them all
}

TEST_CASE("study: every study shipped in experiments/ parses, its architectures and constraints included") {
  // A study file is read only when someone runs it, often hours into a session: a typo in a key or a
  // path to a renamed preset must fail here instead.
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(test::source_dir("experiments"))) {
    if (entry.path().extension() != ".toml") continue;
    CAPTURE(entry.path().string());
    ++files;
    Study s;
    CHECK_NOTHROW(s = load_study(entry.path().string()));
    CHECK(!s.name.empty());
    CHECK(s.name == entry.path().stem().string());  // the default output is out/<name>.h5
    // A schedule study reads its architecture files when its units run: their files must exist.
    for (const StudySchedule& e : s.schedule)
      for (const std::string& a : e.architectures) {
        if (!a.ends_with(".toml")) continue;  // a preset name
        CAPTURE(a);
        const std::filesystem::path p(a);
        CHECK((std::filesystem::exists(p) || std::filesystem::exists(entry.path().parent_path() / p)));
      }
  }
  CHECK(files >= 25);
}
