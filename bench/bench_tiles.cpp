// Computation-tile graphs (docs/stream.md, "Computation tiles" / "Measured"): CT generation and
// R-tree dependency search. One core:
//   build/bench/mapfuse_bench_tiles
// ResNet18Fused: Stream's ResNet-18 ONNX (ReLUs as layers) with Stream's tiling of the tpu_like
// quad-core runs (one CT per output row, K split over 4 cores) and its stacks [(0..10), (11..21)],
// the rest layer by layer: Stream classic made 3866 CNs of it.
// Fsrcnn1M: FSRCNN (540x960, 8 convs, one fused stack) in 2x2-pixel CTs: about 10^6 CTs (the
// paper's "up to 10^6 CTs", whose R-tree search took 6 s).
// Counters: CTs, edges, CTs per second, peak RSS (MiB).
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <numeric>
#include <string>
#include <vector>

#include "engine/workload/onnx_import.hpp"
#include "engine/workload/tile_graph.hpp"

using namespace mapfuse;

namespace {

double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

Workload stream_onnx(const std::string& rel) {
  OnnxOptions o;
  o.fold_unary = false;
  return import_onnx(std::string(MAPFUSE_SHARED_DATA) + "/" + rel, o);
}

void report(benchmark::State& state, const TileGraph& g) {
  state.counters["CTs"] = static_cast<double>(g.tiles.tiles.size());
  state.counters["edges"] = static_cast<double>(g.edges.size());
  state.counters["edge_capacity"] = static_cast<double>(g.edges.capacity());
  state.counters["CTs_per_s"] =
      benchmark::Counter(static_cast<double>(g.tiles.tiles.size()), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["peak_rss_MiB"] = peak_rss_mib();
}

void ResNet18Fused(benchmark::State& state) {
  const Workload w = stream_onnx("stream/classic_cb9dfc52/examples/workload/resnet18.onnx");
  TilingOptions opt;
  opt.layers = stream_tiling(w, 4);
  std::vector<int> a, b;
  for (int i = 0; i <= 10; ++i) a.push_back(i);
  for (int i = 11; i <= 21; ++i) b.push_back(i);
  opt.stacks = layer_stacks_manual(w, {a, b});
  TileGraph g;
  for (auto _ : state) {
    g = build_tile_graph(w, opt);
    benchmark::DoNotOptimize(g.edges.data());
  }
  report(state, g);
}
BENCHMARK(ResNet18Fused)->Unit(benchmark::kMillisecond);

void Fsrcnn1M(benchmark::State& state) {
  const Workload w = stream_onnx("stream/classic_cb9dfc52/examples/workload/fsrcnn.onnx");
  TilingOptions opt;
  opt.layers = pixel_tiling(w, 2, 2);
  std::vector<int> all(w.einsums.size());
  std::iota(all.begin(), all.end(), 0);
  opt.stacks = layer_stacks_manual(w, {all});
  // Arg 0: the whole graph (CTs + R-tree edges); 1: the CTs only (generate_tiles). The pairwise
  // search is not run here: at 1.3*10^5 producer CTs per layer it would take hours.
  const bool tiles_only = state.range(0) == 1;
  TileGraph g;
  for (auto _ : state) {
    g = TileGraph{};  // not timed against the next build's peak memory
    if (tiles_only) {
      g.tiles = generate_tiles(w, opt);
    } else {
      g = build_tile_graph(w, opt);
    }
    benchmark::DoNotOptimize(g.edges.data());
  }
  report(state, g);
}
BENCHMARK(Fsrcnn1M)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->Iterations(3);

}  // namespace

BENCHMARK_MAIN();
