#include <doctest/doctest.h>

#include <stdexcept>

#include "partitioners/work_unit.hpp"
#include "results/unit_result.hpp"

using namespace mapfuse;

TEST_CASE("results: unit results round-trip through JSON") {
  UnitResult r;
  r.unit_id = stable_id("map_layer resnet18 conv1 gemmini_default");
  r.kind = "map_layer";
  r.label = "resnet18/conv1 \"quoted\"\nnewline";
  r.status = UnitResult::Status::Failed;
  r.message = "no valid mapping";
  r.rank = 3;
  r.wall_seconds = 0.25;
  r.energy_pj = 1.5e9;
  r.cycles = 123456;
  r.edp = r.energy_pj * r.cycles;
  r.level_names = {"DRAM", "Scratchpad"};
  r.level_energy_pj = {1e9, 5e8};
  r.level_cycles = {100, 200};
  r.best_mapping = "DRAM[A,B,Z] M=4 | Buffer[B,Z] K=2@x";
  r.trace = {{0.1, 10, 5.0}, {0.2, 20, 4.0}};
  r.pareto = {{1.0, 2.0, "m1"}, {2.0, 1.0, "m2"}};
  const std::string text = to_json(r);
  CHECK(text.find('\n') == std::string::npos);
  const UnitResult b = unit_result_from_json(text);
  CHECK(to_json(b) == text);
  CHECK(b.status == UnitResult::Status::Failed);
  CHECK(b.trace[1].evaluations == 20);
  CHECK(b.pareto[0].mapping == "m1");
  // side_data (tile-cost cache entries for rank 0) only when present, and back as it was.
  CHECK(text.find("side_data") == std::string::npos);
  UnitResult c = r;
  c.side_data = "00ff 1 2 0 0 -\nabcd 3 4 5 1 -\n";
  const UnitResult d = unit_result_from_json(to_json(c));
  CHECK(d.side_data == c.side_data);
  CHECK(to_json(d) == to_json(c));
  CHECK_THROWS_AS(unit_result_from_json("{\"unit_id\": 3}"), std::runtime_error);
  CHECK_THROWS_AS(unit_result_from_json("not json"), std::runtime_error);
}

TEST_CASE("partitioners: stable ids and dispatch order") {
  CHECK(stable_id("abc") == stable_id("abc"));
  CHECK(stable_id("abc") != stable_id("abd"));
  CHECK(stable_id("") == "cbf29ce484222325");  // FNV-1a offset basis: the hash is the published one
  std::vector<WorkUnit> u = {{"b", "k", "", 1.0, ""}, {"a", "k", "", 1.0, ""}, {"c", "k", "", 5.0, ""}};
  order_for_dispatch(u);
  CHECK(u[0].id == "c");
  CHECK(u[1].id == "a");
  CHECK(u[2].id == "b");
}
