// COALA (engine/cost/coala.hpp): one schedule of Stream's ResNet-18 layer-by-layer and 2conv fused
// replays (docs/stream.md), and scheduler throughput in CTs per second on synthetic fused graphs of
// 10^4 to 10^6 CTs (K split over four cores, one CT per output row, every CT reading three rows of
// all four producers: many core-to-core transfers and broadcast duplicates on one shared bus).
#include <benchmark/benchmark.h>

#include <string>

#include "engine/cost/coala.hpp"
#include "engine/validation/stream_replay.hpp"

using namespace mapfuse;
using namespace mapfuse::coala;

namespace {

std::string coala_data(const std::string& run) {
  return std::string(MAPFUSE_SOURCE_DIR) + "/../shared/data/stream/derived/coala/" + run;
}

void BM_StreamReplay(benchmark::State& state, const char* run) {
  const StreamReplay r = load_stream_replay(coala_data(run));
  const Options o = Options::for_semantics(Semantics::Stream);
  for (auto _ : state) benchmark::DoNotOptimize(schedule(r.problem, o).latency_cc);
  state.counters["CTs/s"] =
      benchmark::Counter(double(r.problem.tiles.size()), benchmark::Counter::kIsIterationInvariantRate);
}

// `layers` layers of `rows` rows, each row K-split over cores 0-3; DRAM is core 4.
Problem synthetic(int layers, int rows) {
  Problem p;
  for (int c = 0; c < 4; ++c) p.cores.push_back({"core" + std::to_string(c), 1e12, 416.16, 378.4, 64, 2048, false});
  p.cores.push_back({"dram", 1e13, 1000, 1000, 64, 64, true});
  p.links = {{"bus", 128, 0}};
  p.paths.assign(25, {0});
  for (int c = 0; c < 5; ++c) p.paths[size_t(c * 5 + c)] = {};
  auto id = [&](int l, int r, int k) { return (l * rows + r) * 4 + k; };
  p.tiles.resize(size_t(layers) * size_t(rows) * 4);
  std::vector<int> weights(size_t(layers) * 4);
  for (int l = 0; l < layers; ++l)
    for (int k = 0; k < 4; ++k) {
      weights[size_t(l * 4 + k)] = int(p.tensors.size());
      p.tensors.push_back({1152, id(l, 0, k), false, true, {}});
    }
  int64_t prio = 0;
  for (int r = 0; r < rows; ++r)
    for (int l = 0; l < layers; ++l)
      for (int k = 0; k < 4; ++k) {
        TileSpec& t = p.tiles[size_t(id(l, r, k))];
        t.layer = l;
        t.sub = r * 4 + k;
        t.core = k;
        t.priority = prio++;
        t.runtime_cc = 514;
        t.onchip_energy_pj = 7767.8;
        t.bw_fraction = 0.25;
        t.output = int(p.tensors.size());
        p.tensors.push_back({896, id(l, r, k), true, false, {}});
        const int w = weights[size_t(l * 4 + k)];
        p.tensors[size_t(w)].consumers.push_back(id(l, r, k));
        t.inputs.push_back(w);
        if (r > 0) p.edges.emplace_back(id(l, r - 1, k), id(l, r, k));
      }
  for (int l = 1; l < layers; ++l)
    for (int r = 0; r < rows; ++r)
      for (int k = 0; k < 4; ++k)
        for (int pr = std::max(0, r - 1); pr <= std::min(rows - 1, r + 1); ++pr)
          for (int pk = 0; pk < 4; ++pk) {
            const int prod = id(l - 1, pr, pk), cons = id(l, r, k);
            p.edges.emplace_back(prod, cons);
            p.tiles[size_t(cons)].inputs.push_back(p.tiles[size_t(prod)].output);
            p.tensors[size_t(p.tiles[size_t(prod)].output)].consumers.push_back(cons);
          }
  return p;
}

void BM_Synthetic(benchmark::State& state) {
  const Problem p = synthetic(int(state.range(0)), int(state.range(1)));
  const Options o = Options::for_semantics(state.range(2) ? Semantics::Mapfuse : Semantics::Stream);
  size_t transfers = 0;
  for (auto _ : state) {
    const Schedule s = schedule(p, o);
    transfers = s.transfers.size();
    benchmark::DoNotOptimize(s.latency_cc);
  }
  state.SetLabel(std::to_string(p.tiles.size()) + " CTs, " + (state.range(2) ? "mapfuse" : "stream"));
  state.counters["CTs/s"] = benchmark::Counter(double(p.tiles.size()), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["transfers"] = double(transfers);
}

}  // namespace

BENCHMARK_CAPTURE(BM_StreamReplay, resnet18_lbl, "resnet18_lbl_fixed_k4")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_StreamReplay, conv2_fused, "2conv_fused_fixed_k4")->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Synthetic)
    ->Args({11, 88, 0})
    ->Args({10, 250, 0})
    ->Args({25, 1000, 0})
    ->Args({25, 1000, 1})
    ->Args({25, 10000, 0})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

BENCHMARK_MAIN();
