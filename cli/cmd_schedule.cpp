// `mapfuse schedule --replay-stream DIR`: Stream's own dumped schedule (inputs and outputs, see
// shared/data/stream/derived/coala/README.md) rescheduled by COALA (engine/cost/coala.hpp) and
// compared CN by CN (docs/stream.md, "COALA scheduler").
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>

#include "cli/commands.hpp"
#include "cli/schedule_record.hpp"
#include "engine/common/error.hpp"
#include "engine/cost/coala.hpp"
#include "engine/validation/stream_replay.hpp"

namespace mapfuse::cli {
namespace {

coala::Options parse_options(const std::string& semantics, const std::vector<std::string>& sets) {
  coala::Semantics s;
  if (semantics == "stream") {
    s = coala::Semantics::Stream;
  } else if (semantics == "mapfuse") {
    s = coala::Semantics::Mapfuse;
  } else {
    throw InputError({}, "--semantics",
                     "unknown semantics '" + semantics + "'; expected stream or mapfuse" +
                         did_you_mean(semantics, {"stream", "mapfuse"}));
  }
  coala::Options o = coala::Options::for_semantics(s);
  const std::vector<std::pair<std::string, bool*>> switches = {
      {"dedup_only_equal_start", &o.dedup_only_equal_start},
      {"sync_cores_at_layer_start", &o.sync_cores_at_layer_start},
      {"constant_priority_overcount", &o.constant_priority_overcount},
      {"input_headstart", &o.input_headstart}};
  for (const auto& kv : sets) {
    const auto eq = kv.find('=');
    const std::string k = kv.substr(0, eq), v = eq == std::string::npos ? "" : kv.substr(eq + 1);
    std::vector<std::string> names;
    bool* target = nullptr;
    for (const auto& [name, p] : switches) {
      names.push_back(name);
      if (name == k) target = p;
    }
    if (!target) throw InputError({}, "--set", "unknown switch '" + k + "'" + did_you_mean(k, names));
    if (v != "0" && v != "1") throw InputError({}, "--set " + k, "expected " + k + "=0 or " + k + "=1");
    *target = v == "1";
  }
  return o;
}

}  // namespace

Command add_schedule_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("schedule", "COALA list scheduling of computation tiles on a multi-core "
                                             "accelerator (Stream); --replay-stream checks it against Stream's own schedule");
  struct Options {
    std::string replay, semantics = "stream", output;
    std::vector<std::string> sets;
    bool json = false;
    int show = 20;
  };
  auto o = std::make_shared<Options>();
  cmd->add_option("--replay-stream", o->replay, "a folder dumped from Stream (cns.csv, edges.csv, cost_lut.csv, "
                                                "transfers.csv, totals.json)")
      ->required();
  cmd->add_option("--semantics", o->semantics, "stream (Stream classic cb9dfc52, quirks included) or mapfuse")
      ->capture_default_str();
  cmd->add_option("--set", o->sets, "override one switch of the semantics: NAME=0|1 (dedup_only_equal_start, "
                                    "sync_cores_at_layer_start, constant_priority_overcount, input_headstart)");
  cmd->add_option("--show", o->show, "per-CN differences to print")->capture_default_str();
  cmd->add_flag("--json", o->json, "print the result as JSON");
  cmd->add_option("--output", o->output, "also write the schedule to this HDF5 file (docs/results.md, \"Schedule files\"; "
                                         "`mapfuse report FILE --plots DIR` draws it)");
  return {cmd, [o]() {
            const coala::Options opt = parse_options(o->semantics, o->sets);
            const StreamReplay replay = load_stream_replay(o->replay);
            const auto t0 = std::chrono::steady_clock::now();
            const coala::Schedule s = coala::schedule(replay.problem, opt);
            const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            const ReplayComparison c = compare_replay(replay, s);
            const bool strict = o->semantics == "stream" && o->sets.empty();
            if (!o->output.empty()) {  // named after the folder
              std::string name = std::filesystem::path(o->replay + "/.").lexically_normal().parent_path().filename().string();
              if (name.empty() || name == "." || name == "..") name = "schedule";
              write_schedule_h5(o->output, {schedule_record(name, o->semantics, replay.folder, replay.problem, s)});
            }
            if (o->json) {
              nlohmann::json j;
              j["folder"] = replay.folder;
              j["semantics"] = o->semantics;
              j["latency_cc"] = s.latency_cc;
              j["energy_pj"] = s.energy.total();
              j["expected_latency_cc"] = replay.expected_latency_cc;
              j["expected_energy_pj"] = replay.expected_energy_pj;
              j["latency_match"] = c.latency_match;
              j["energy_match"] = c.energy_match;
              j["cns"] = c.cns;
              j["cn_mismatches"] = c.cn_mismatches;
              j["pick_mismatches"] = c.pick_mismatches;
              j["transfers"] = c.transfers;
              j["expected_transfers"] = c.expected_transfers;
              j["transfer_mismatches"] = c.transfer_mismatches;
              j["schedule_seconds"] = seconds;
              for (const auto& [k, v] : s.energy.stream_breakdown()) j["energy_breakdown_pj"][k] = v;
              j["peak_memory_bits"] = s.peak_memory_bits;
              j["differences"] = nlohmann::json::array();
              for (size_t i = 0; i < c.diffs.size() && int(i) < o->show; ++i) {
                const auto& d = c.diffs[i];
                auto num = [](double v) { return std::isnan(v) ? nlohmann::json() : nlohmann::json(v); };
                j["differences"].push_back({{"cn", fmt::format("L{}S{}", d.layer, d.sub)}, {"start", d.start},
                                            {"end", d.end}, {"expected_start", d.expected_start},
                                            {"expected_end", d.expected_end}, {"preds_end", d.preds_end},
                                            {"ready", d.ready}, {"after_inputs", d.after_inputs},
                                            {"expected_preds_end", num(d.expected_preds_end)},
                                            {"expected_ready", num(d.expected_ready)},
                                            {"expected_after_inputs", num(d.expected_after_inputs)}});
              }
              std::cout << j.dump(1) << "\n";
            } else {
              fmt::print("{}: {} CNs, {} transfers and blocks, semantics {}, scheduled in {:.1f} ms\n", replay.folder,
                         c.cns, c.transfers, o->semantics, seconds * 1e3);
              fmt::print("latency  {:.10g} cc (Stream {:.10g}) {}\n", s.latency_cc, replay.expected_latency_cc,
                         c.latency_match ? "match" : "DIFFERS");
              fmt::print("energy   {:.12g} pJ (Stream {:.12g}) {}\n", s.energy.total(), replay.expected_energy_pj,
                         c.energy_match ? "match" : "DIFFERS");
              for (const auto& [k, v] : s.energy.stream_breakdown()) fmt::print("  {:<46} {:.12g}\n", k, v);
              fmt::print("CNs whose start or end differ: {} of {} (picked in a different order: {})\n",
                         c.cn_mismatches, c.cns, c.pick_mismatches);
              if (c.expected_transfers)
                fmt::print("transfer rows differing from transfers.csv: {} of {} (first at row {})\n",
                           c.transfer_mismatches, c.expected_transfers, c.first_transfer_mismatch);
              if (c.first_transfer_mismatch >= 0 && size_t(c.first_transfer_mismatch) < c.transfers &&
                  size_t(c.first_transfer_mismatch) < c.expected_transfers) {
                const auto& g = c.first_transfer_got;
                const auto& e = c.first_transfer_expected;
                fmt::print("  row {}: COALA {} of tensor {} {}->{} for tile {} [{:.10g}, {:.10g}) searched from {:.10g}, "
                           "occupies links {}; Stream {} [{:.10g}, {:.10g}) new {}\n",
                           c.first_transfer_mismatch, coala::to_string(g.cause), g.tensor, g.sender, g.receiver, g.tile,
                           g.start, g.end, g.search_from, g.occupies_links, e.block ? "block" : "transfer", e.start,
                           e.end, e.new_event);
              }
              for (size_t i = 0; i < c.diffs.size() && int(i) < o->show; ++i) {
                const auto& d = c.diffs[i];
                fmt::print("  L{}S{}: start {:.10g} end {:.10g} (preds end {:.10g}, ready {:.10g}, after inputs {:.10g}); "
                           "Stream {:.10g} .. {:.10g} (preds end {:.10g}, ready {:.10g}, after inputs {:.10g})\n",
                           d.layer, d.sub, d.start, d.end, d.preds_end, d.ready, d.after_inputs, d.expected_start,
                           d.expected_end, d.expected_preds_end, d.expected_ready, d.expected_after_inputs);
              }
            }
            return strict && !c.ok() ? 1 : 0;
          }};
}

}  // namespace mapfuse::cli
