// Per-tile costs from mapfuse's own mapper (docs/stream.md, "Per-tile cost"). One core:
//   OMP_NUM_THREADS=1 build/bench/mapfuse_bench_tile_cost
// ResNet18Fused: Stream's ResNet-18 ONNX (ReLUs as layers) tiled as Stream's tpu_like quad-core
// runs (one CT per output row, K split over 4 cores, stacks [(0..10), (11..21)], the rest layer by
// layer; 3866 CTs) on tpu_like_quad_core with Stream's fixed allocation
// (shared/data/stream/derived/mapping_tpu_like_quad_core_fixed_k4.yaml): convs, Gemm and ReLUs
// on core = their inter-core group, pools on pooling_4, adds on simd_5.
// Counters: CTs, unique keys, mapping problems, mapper calls, mappings evaluated, CTs with off-chip operands.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "engine/arch/arch_toml.hpp"
#include "engine/cost/tile_cost.hpp"
#include "engine/workload/onnx_import.hpp"

using namespace mapfuse;

namespace {

void ResNet18Fused(benchmark::State& state) {
  OnnxOptions oo;
  oo.fold_unary = false;
  const Workload w =
      import_onnx(std::string(MAPFUSE_SHARED_DATA) + "/stream/classic_cb9dfc52/examples/workload/resnet18.onnx", oo);
  const Architecture a = load_architecture("tpu_like_quad_core");
  TilingOptions opt;
  opt.layers = stream_tiling(w, 4);
  std::vector<int> s0, s1;
  for (int i = 0; i <= 10; ++i) s0.push_back(i);
  for (int i = 11; i <= 21; ++i) s1.push_back(i);
  opt.stacks = layer_stacks_manual(w, {s0, s1});
  const TileSet ts = generate_tiles(w, opt);
  std::vector<int> core(ts.tiles.size());
  const int pool = a.node_index("pooling_4"), simd = a.node_index("simd_5");
  for (size_t t = 0; t < ts.tiles.size(); ++t) {
    const Einsum& e = w.einsums[static_cast<size_t>(ts.tiles[t].layer)];
    if (e.op == OpKind::Pool)
      core[t] = pool;
    else if (e.op == OpKind::Elementwise && e.tensors.size() > 2)
      core[t] = simd;
    else
      core[t] = ts.tiles[t].group;
  }
  TileCostStats st;
  std::vector<TileCost> costs;
  for (auto _ : state) {
    costs = map_tile_costs(w, ts, a, core, {}, &st);
    benchmark::DoNotOptimize(costs.data());
  }
  int64_t offchip = 0;
  for (const TileCost& c : costs) offchip += c.any_offchip();
  state.counters["CTs"] = static_cast<double>(st.tiles);
  state.counters["unique_keys"] = static_cast<double>(st.unique_keys);
  state.counters["mapper_problems"] = static_cast<double>(st.mapper_problems);
  state.counters["mapper_calls"] = static_cast<double>(st.mapper_calls);
  state.counters["mappings"] = static_cast<double>(st.mappings_evaluated);
  state.counters["offchip_CTs"] = static_cast<double>(offchip);
}
BENCHMARK(ResNet18Fused)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
