// Stream schedule studies with searched allocations: [[schedule]] entries with allocation = ga or
// waco, their knobs and seeds, cut into "schedule" units (partitioners/study), and the report's
// tables per method and per architecture (results/report).
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "engine/arch/arch_toml.hpp"
#include "engine/common/error.hpp"
#include "partitioners/study.hpp"
#include "results/hdf5_writer.hpp"
#include "results/report.hpp"
#include "test_support.hpp"

using namespace mapfuse;

namespace {

const std::string kStudy = R"(name = "fig13"
[[schedule]]
workloads = ["resnet18.onnx"]
architectures = ["stream_t3_4c_4ws"]
allocation = "ga"
generations = 4
population = 6
seeds = [1, 2, 3]
[[schedule]]
workloads = ["resnet18.onnx"]
architectures = ["stream_t3_4c_4ws"]
allocation = "waco"
max_parallelism = 1
time_limit = 5
[[schedule]]
workloads = ["resnet18.onnx"]
architectures = ["stream_t3_4c_4ws", "stream_t3_4c_2ws"]
modes = ["fused", "lbl"]
allocation = "waco"
[[schedule]]
workloads = ["resnet18.onnx"]
architectures = ["stream_t3_4c_4ws"]
allocation = "greedy"
)";

std::vector<StudyLayer> no_layers(const StudyWorkload&) { return {}; }

const UnitColumn& column(const WorkUnit& u, const std::string& name) {
  const UnitColumn* c = find_column(u.columns, name);
  REQUIRE_MESSAGE(c, name);
  return *c;
}

UnitResult done(const std::string& workload, const std::string& arch, const std::string& mode, const std::string& method,
                double cycles, double energy, double search_s, int64_t seed = -1) {
  UnitResult r;
  r.kind = "schedule";
  r.unit_id = workload + arch + mode + method + std::to_string(seed);
  r.label = schedule_label(workload, mode, arch, method, seed >= 0 ? std::optional<uint64_t>(seed) : std::nullopt);
  r.columns = {UnitColumn::of_text("workload", workload), UnitColumn::of_text("arch", arch),
               UnitColumn::of_text("method", method), UnitColumn::of_text("mode", mode)};
  if (seed >= 0) r.columns.push_back(UnitColumn::of_integer("seed", seed));
  r.cycles = cycles;
  r.energy_pj = energy;
  r.edp = cycles * energy;
  r.metrics = {{"search_seconds", search_s}, {"tile_cost_seconds", 1.0}};
  return r;
}

}  // namespace

TEST_CASE("stream study: [[schedule]] entries with ga and waco give one unit per (workload, arch, mode, method, seed)") {
  const Study s = parse_study(kStudy, "fig13.toml");
  REQUIRE(s.schedule.size() == 4);
  CHECK(s.schedule[0].method == "ga");
  CHECK(s.schedule[0].seeds == std::vector<uint64_t>{1, 2, 3});
  CHECK(s.schedule[1].method == "waco_p1");
  CHECK(s.schedule[1].time_limit_s == 5);
  CHECK(s.schedule[2].method == "waco");
  CHECK(s.schedule[2].max_parallelism == 0);
  CHECK(s.schedule[3].method == "greedy");
  const std::vector<WorkUnit> units = partition_study(s, &no_layers);
  // ga: 3 seeds; waco p=1: 1 (default seed); waco: 2 archs x 2 modes; greedy: 1, without a seed.
  REQUIRE(units.size() == 3 + 1 + 4 + 1);
  std::set<std::string> ids, labels;
  std::map<std::string, int> by_method;
  for (const WorkUnit& u : units) {
    CHECK(u.kind == "schedule");
    CHECK(ids.insert(u.id).second);
    CHECK(labels.insert(u.label).second);
    ++by_method[column(u, "method").text];
  }
  CHECK(by_method == std::map<std::string, int>{{"ga", 3}, {"waco_p1", 1}, {"waco", 4}, {"greedy", 1}});
  // The knobs reach the payload (and the id), the seed the label and a column.
  const WorkUnit& ga2 = units[1];
  CHECK(ga2.label == "schedule resnet18 fused @ stream_t3_4c_4ws ga seed 2");
  CHECK(column(ga2, "seed").integer == 2);
  const nlohmann::json p = nlohmann::json::parse(ga2.payload);
  CHECK(p.at("allocation") == "ga");
  CHECK(p.at("ga").at("generations") == 4);
  CHECK(p.at("ga").at("population") == 6);
  CHECK(p.at("ga").at("seed") == 2);
  CHECK_FALSE(p.contains("waco"));
  const nlohmann::json w = nlohmann::json::parse(units[3].payload);
  CHECK(units[3].label == "schedule resnet18 fused @ stream_t3_4c_4ws waco_p1 seed 1");
  CHECK(w.at("waco").at("max_parallelism") == 1);
  CHECK(w.at("waco").at("time_limit_s") == 5.0);
  CHECK(w.at("waco").at("seed") == 1);
  // A deterministic allocation has no seed: the label and columns of a plain schedule unit.
  CHECK(units.back().label == "schedule resnet18 fused @ stream_t3_4c_4ws");
  CHECK(find_column(units.back().columns, "seed") == nullptr);
  CHECK(nlohmann::json::parse(units.back().payload).count("ga") == 0);
  // A method name override, and the same study twice gives the same units.
  const Study named = parse_study(test::replace_once(kStudy, "time_limit = 5\n", "time_limit = 5\nmethod = \"waco_p1_5s\"\n"), "f.toml");
  CHECK(partition_study(named, &no_layers)[3].label == "schedule resnet18 fused @ stream_t3_4c_4ws waco_p1_5s seed 1");
  const std::vector<WorkUnit> again = partition_study(parse_study(kStudy, "fig13.toml"), &no_layers);
  REQUIRE(again.size() == units.size());
  for (size_t i = 0; i < units.size(); ++i) CHECK(again[i].id == units[i].id);
}

TEST_CASE("stream study: mapper_gap reaches the payload only when set; a negative one is an error") {
  const std::string base = "name = \"g\"\n[[schedule]]\nworkloads = [\"resnet18\"]\narchitectures = [\"tpu_like_quad_core\"]\n";
  const std::vector<WorkUnit> exact = partition_study(parse_study(base, "g.toml"), &no_layers);
  const std::vector<WorkUnit> zero = partition_study(parse_study(base + "mapper_gap = 0\n", "g.toml"), &no_layers);
  const std::vector<WorkUnit> gap = partition_study(parse_study(base + "mapper_gap = 0.001\n", "g.toml"), &no_layers);
  REQUIRE(exact.size() == 1);
  REQUIRE(gap.size() == 1);
  CHECK(exact[0].payload.find("mapper_gap") == std::string::npos);  // exact studies keep their ids
  CHECK(zero[0].id == exact[0].id);
  CHECK(nlohmann::json::parse(gap[0].payload).at("mapper_gap").get<double>() == 0.001);
  CHECK(gap[0].id != exact[0].id);
  CHECK_THROWS_WITH_AS(parse_study(base + "mapper_gap = -1\n", "g.toml"), doctest::Contains("mapper_gap"), InputError);
}

TEST_CASE("stream study: mapper_work reaches the payload only when set; a negative one is an error") {
  const std::string base = "name = \"g\"\n[[schedule]]\nworkloads = [\"resnet18\"]\narchitectures = [\"tpu_like_quad_core\"]\n";
  const std::vector<WorkUnit> exact = partition_study(parse_study(base, "g.toml"), &no_layers);
  const std::vector<WorkUnit> zero = partition_study(parse_study(base + "mapper_work = 0\n", "g.toml"), &no_layers);
  const std::vector<WorkUnit> work = partition_study(parse_study(base + "mapper_work = 5000000\n", "g.toml"), &no_layers);
  REQUIRE(exact.size() == 1);
  REQUIRE(work.size() == 1);
  CHECK(exact[0].payload.find("mapper_work") == std::string::npos);
  CHECK(zero[0].id == exact[0].id);
  CHECK(nlohmann::json::parse(work[0].payload).at("mapper_work").get<int64_t>() == 5000000);
  CHECK(work[0].id != exact[0].id);
  CHECK_THROWS_WITH_AS(parse_study(base + "mapper_work = -1\n", "g.toml"), doctest::Contains("mapper_work"), InputError);
  CHECK_THROWS_WITH_AS(parse_study(base + "mapper_work = 0.5\n", "g.toml"), doctest::Contains("mapper_work"), InputError);
}

TEST_CASE("stream study: max_nodes (waco) reaches the payload only when set") {
  const std::string base = "name = \"g\"\n[[schedule]]\nworkloads = [\"resnet18\"]\narchitectures = [\"tpu_like_quad_core\"]\n"
                           "allocation = \"waco\"\n";
  const std::vector<WorkUnit> plain = partition_study(parse_study(base, "g.toml"), &no_layers);
  const std::vector<WorkUnit> limited = partition_study(parse_study(base + "max_nodes = 500\n", "g.toml"), &no_layers);
  REQUIRE(plain.size() == 1);
  REQUIRE(limited.size() == 1);
  CHECK(plain[0].payload.find("max_nodes") == std::string::npos);
  CHECK(nlohmann::json::parse(limited[0].payload).at("waco").at("max_nodes").get<int64_t>() == 500);
  CHECK(limited[0].id != plain[0].id);
  CHECK_THROWS_WITH_AS(parse_study(base + "max_nodes = -1\n", "g.toml"), doctest::Contains("max_nodes"), InputError);
  // A knob of WACO on another allocation is an error.
  const std::string greedy = "name = \"g\"\n[[schedule]]\nworkloads = [\"resnet18\"]\narchitectures = [\"tpu_like_quad_core\"]\n";
  CHECK_THROWS_WITH_AS(parse_study(greedy + "max_nodes = 5\n", "g.toml"), doctest::Contains("max_nodes"), InputError);
}

TEST_CASE("stream study: bad allocation keys name the file, the line and the key") {
  auto check = [](const std::string& text, int line, const std::string& key, const std::string& what) {
    const InputError e = test::study_error(text, "fig13.toml");
    CHECK(e.where().file == "fig13.toml");
    CHECK_MESSAGE(e.where().line == line, e.what());
    CHECK_MESSAGE(std::string(e.what()).find(key) != std::string::npos, e.what());
    CHECK_MESSAGE(std::string(e.what()).find(what) != std::string::npos, e.what());
  };
  auto edit = [](const std::string& from, const std::string& to) { return test::replace_once(kStudy, from, to); };
  check(edit("allocation = \"ga\"", "allocation = \"gaa\""), 5, "allocation", "did you mean 'ga'");
  check(edit("allocation = \"greedy\"", "allocation = \"wacko\""), 23, "allocation", "did you mean 'waco'");
  check(edit("time_limit = 5", "time_limit = 0"), 14, "time_limit", "positive number of seconds");
  check(edit("generations = 4", "generations = -1"), 6, "generations", "integer from 0");
  check(edit("population = 6", "population = 1"), 7, "population", "integer from 2");
  check(edit("max_parallelism = 1", "max_parallelism = -2"), 13, "max_parallelism", "integer from 0");
  // A knob of another method, seeds of a deterministic allocation, a repeated seed, a typo.
  check(edit("max_parallelism = 1", "generations = 3"), 13, "generations", "a knob of allocation = \"ga\"");
  check(edit("population = 6", "time_limit = 6"), 7, "time_limit", "a knob of allocation = \"waco\"");
  check(edit("allocation = \"greedy\"", "allocation = \"greedy\"\nseeds = [1]"), 24, "seeds", "deterministic");
  check(edit("seeds = [1, 2, 3]", "seeds = [1, 2, 1]"), 8, "seeds", "listed twice");
  check(edit("seeds = [1, 2, 3]", "seeds = [1, 2, 3]\ngeneration = 2"), 9, "generation", "did you mean 'generations'");
  check(edit("time_limit = 5", "time_limit = 5\nmethod = \"waco p1\""), 15, "method", "no spaces");
}

TEST_CASE("stream study: the report's tables per method and per architecture") {
  StudyFile f;
  f.meta.name = "t";
  // GA over three seeds (EDP 200, 150, 300), WACO p=1 (EDP 160), greedy (EDP 400) on 4c_4ws fused;
  // on 4c_2ws only WACO p=1 (EDP 90) and one failed greedy unit.
  f.results = {done("resnet18", "stream_t3_4c_4ws", "fused", "ga", 10, 20, 8.0, 1),
               done("resnet18", "stream_t3_4c_4ws", "fused", "ga", 10, 15, 10.0, 2),
               done("resnet18", "stream_t3_4c_4ws", "fused", "ga", 20, 15, 12.0, 3),
               done("resnet18", "stream_t3_4c_4ws", "fused", "waco_p1", 16, 10, 0.5, 1),
               done("resnet18", "stream_t3_4c_4ws", "fused", "greedy", 20, 20, 0.0),
               done("resnet18", "stream_t3_4c_2ws", "fused", "waco_p1", 9, 10, 0.25, 1),
               done("resnet18", "stream_t3_4c_2ws", "fused", "greedy", 1, 1, 0.0)};
  f.results.back().status = UnitResult::Status::Failed;
  const std::string m = schedule_methods_markdown(f);
  // ga: best 150 (seed 2: 10 cc, 15 pJ), geomean (200*150*300)^(1/3) = 208.0, mean search 10 s,
  // 150 / 150 = 1x (the group's best); waco_p1 160 / 150 = 1.067x; greedy 400 / 150 = 2.667x.
  CHECK_MESSAGE(m.find("| resnet18 | stream_t3_4c_4ws | fused | ga | 3/3 | 150 | 208 | 10 | 15 | 10.000 | 1.00 | 1.000x |") !=
                    std::string::npos,
                m);
  CHECK_MESSAGE(m.find("| waco_p1 | 1/1 | 160 | 160 | 16 | 10 | 0.500 | 1.00 | 1.067x |") != std::string::npos, m);
  CHECK_MESSAGE(m.find("| greedy | 1/1 | 400 | 400 | 20 | 20 | 0.000 | 1.00 | 2.667x |") != std::string::npos, m);
  CHECK_MESSAGE(m.find("| stream_t3_4c_2ws | fused | greedy | 0/1 | failed |") != std::string::npos, m);
  const std::string a = schedule_arch_markdown(f);
  // Columns in name order (4c_2ws before 4c_4ws); the row's least in bold, the failed cell x.
  CHECK_MESSAGE(a.find("| workload | mode | method | stream_t3_4c_2ws | stream_t3_4c_4ws | best architecture | best EDP |") !=
                    std::string::npos,
                a);
  CHECK_MESSAGE(a.find("| resnet18 | fused | ga | - | **150** | stream_t3_4c_4ws | 150 |") != std::string::npos, a);
  CHECK_MESSAGE(a.find("| resnet18 | fused | greedy | x | **400** | stream_t3_4c_4ws | 400 |") != std::string::npos, a);
  CHECK_MESSAGE(a.find("| resnet18 | fused | waco_p1 | **90** | 160 | stream_t3_4c_2ws | 90 |") != std::string::npos, a);
  CHECK_MESSAGE(a.find("| resnet18 | stream_t3_4c_2ws | fused | waco_p1 | 90 | 9 | 10 |") != std::string::npos, a);
  // One architecture and one method per group: no table.
  StudyFile one;
  one.results = {f.results[3]};
  CHECK(schedule_methods_markdown(one).empty());
  CHECK(schedule_arch_markdown(one).empty());
}

TEST_CASE("stream study: an array of stacks sweeps the cut points (a joint exploration), lbl runs once") {
  const std::string text = R"(name = "joint"
[[schedule]]
workloads = ["resnet18.onnx"]
architectures = ["stream_t3_4c_4ws", "stream_t3_4c_2ws"]
modes = ["fused", "lbl"]
allocation = "waco"
stacks = ["auto", "auto:0.5", "auto:2"]
[[schedule]]
workloads = ["resnet18.onnx"]
architectures = ["stream_t3_4c_4ws"]
allocation = "waco"
stacks = "auto:0.5"
)";
  const Study s = parse_study(text, "joint.toml");
  REQUIRE(s.schedule.size() == 2);
  CHECK(s.schedule[0].stacks_swept);
  CHECK(s.schedule[0].stacks == std::vector<std::string>{"auto", "auto:0.5", "auto:2"});
  CHECK_FALSE(s.schedule[1].stacks_swept);
  const std::vector<WorkUnit> units = partition_study(s, &no_layers);
  // 2 archs x (3 fused cut points + 1 lbl); the second entry's unit equals the sweep's auto:0.5 on
  // 4c_4ws in payload, so it runs once.
  REQUIRE(units.size() == 2 * (3 + 1));
  std::set<std::string> ids, labels;
  std::map<std::string, int> by_stacks;
  for (const WorkUnit& u : units) {
    CHECK(ids.insert(u.id).second);
    CHECK(labels.insert(u.label).second);
    ++by_stacks[column(u, "stacks").text];
    const nlohmann::json p = nlohmann::json::parse(u.payload);
    if (column(u, "mode").text == "lbl") CHECK(p.at("stacks") == "auto");
    else CHECK(p.at("stacks") == column(u, "stacks").text);
  }
  CHECK(by_stacks == std::map<std::string, int>{{"auto", 2}, {"auto:0.5", 2}, {"auto:2", 2}, {"lbl", 2}});
  CHECK(labels.count("schedule resnet18 fused auto:0.5 @ stream_t3_4c_2ws waco seed 1"));
  CHECK(labels.count("schedule resnet18 lbl @ stream_t3_4c_2ws waco seed 1"));
  // A single string stays a plain entry: same payload keys, no column, the label of before.
  const std::vector<WorkUnit> plain = partition_study(parse_study(kStudy, "fig13.toml"), &no_layers);
  CHECK(find_column(plain.back().columns, "stacks") == nullptr);
  CHECK(nlohmann::json::parse(plain.back().payload).at("stacks") == "auto");
  // A bad value names the key and the accepted forms.
  try {
    (void)parse_study(test::replace_once(text, "\"auto:2\"]", "\"auto:0\"]"), "joint.toml");
    FAIL("expected an InputError");
  } catch (const InputError& e) {
    CHECK(e.key() == "schedule[0].stacks");
    CHECK(std::string(e.what()).find("auto:F") != std::string::npos);
  }

  // The report: each cut point is a mode of its own, and the best point per workload is joint
  // over architectures, cut points and methods.
  StudyFile f;
  f.meta.name = "joint";
  auto with_stacks = [](UnitResult r, const std::string& stacks) {
    r.columns.push_back(UnitColumn::of_text("stacks", stacks));
    r.unit_id += stacks;
    return r;
  };
  f.results = {with_stacks(done("resnet18", "stream_t3_4c_4ws", "fused", "waco", 10, 10, 1.0, 1), "auto"),
               with_stacks(done("resnet18", "stream_t3_4c_4ws", "fused", "waco", 8, 10, 1.0, 1), "auto:0.5"),
               with_stacks(done("resnet18", "stream_t3_4c_2ws", "fused", "waco", 9, 10, 1.0, 1), "auto"),
               with_stacks(done("resnet18", "stream_t3_4c_2ws", "fused", "waco", 7, 10, 1.0, 1), "auto:2"),
               with_stacks(done("resnet18", "stream_t3_4c_2ws", "lbl", "waco", 30, 10, 1.0, 1), "lbl")};
  const std::string a = schedule_arch_markdown(f);
  CHECK_MESSAGE(a.find("| resnet18 | fused auto | waco | **90** | 100 | stream_t3_4c_2ws | 90 |") != std::string::npos, a);
  CHECK_MESSAGE(a.find("| resnet18 | fused auto:0.5 | waco | - | **80** | stream_t3_4c_4ws | 80 |") != std::string::npos, a);
  CHECK_MESSAGE(a.find("| resnet18 | lbl | waco | **300** | - | stream_t3_4c_2ws | 300 |") != std::string::npos, a);
  CHECK_MESSAGE(a.find("| resnet18 | stream_t3_4c_2ws | fused auto:2 | waco | 70 | 7 | 10 |") != std::string::npos, a);
}

TEST_CASE("stream study: the Fig. 13-16 and joint studies parse, their systems load, and they cut into the units described") {
  // experiments/stream_fig13.toml: GA x 3 seeds twice (K in four groups and not split), WACO p = 1 x 3, WACO x 3, greedy; Fig. 14: 3
  // workloads x 2 modes; Fig. 15: 5 x 19 systems x 2 (ResNet-18, FSRCNN, MobileNetV2, Xception, MobileBERT);
  // Fig. 16: the same 5 workloads x 19 x 2 budgets x 2 modes; the joint exploration: 3 workloads x
  // 5 quad-core systems x (5 cut points fused + layer by layer).
  const std::vector<std::pair<std::string, size_t>> studies = {
      {"stream_fig13", 13}, {"stream_fig14", 6}, {"stream_fig15", 190}, {"stream_fig16", 380}, {"stream_joint", 90}};
  for (const auto& [name, count] : studies) {
    CAPTURE(name);
    const Study s = load_study(test::source_dir("experiments/" + name + ".toml"));
    const std::vector<WorkUnit> units = partition_study(s, &no_layers);
    CHECK(units.size() == count);
    std::set<std::string> archs;
    for (const StudySchedule& e : s.schedule)
      for (const std::string& a : e.architectures) archs.insert(a);
    for (const std::string& a : archs) {
      CAPTURE(a);
      const Architecture arch = load_architecture(a);
      // Every system has the pooling and SIMD cores beside its MAC cores (ResNet-18's pools and adds).
      int pool = 0, simd = 0;
      for (const Core& c : arch.cores) pool += c.can_run(OpKind::Pool), simd += c.can_run(OpKind::Elementwise);
      CHECK(pool == 1);
      CHECK(simd == 1);
    }
  }
}
