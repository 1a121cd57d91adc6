// The relaxed FADiff model (engine/cost/relaxed.hpp).
//
// Throughput: forward + backward (loss and its full gradient) of VGG-16 on Large Gemmini, one thread:
//   build/bench/mapfuse_bench_relaxed --benchmark_filter=VGG16 --benchmark_repetitions=5
// Agreement with the exact model on random valid single-layer mappings (docs/validation.md):
//   build/bench/mapfuse_bench_relaxed --report [samples]
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/arch/arch_toml.hpp"
#include "engine/cost/relaxed.hpp"
#include "engine/cost/relaxed_check.hpp"
#include "engine/workload/zoo.hpp"

using namespace mapfuse;

namespace {

struct Setup {
  RelaxedNetwork net;
  std::vector<double> x;
};

// VGG-16 on fadiff_large at a consistent point: a random valid-structure mapping per layer, every
// sigma 0.5 (so every fusion term is live).
const Setup& vgg16_large() {
  static const Setup s = [] {
    const Core core = load_architecture("fadiff_large").cores.at(0);
    Setup st{make_relaxed_network(zoo_workload("vgg16"), core), {}};
    st.x = relaxed_trivial_point(st.net);
    std::mt19937_64 rng(1);
    for (size_t v = 0; v < st.net.layers.size(); ++v)
      factors_from_mapping(st.net.layers[v], random_relaxed_mapping(st.net.layers[v], rng),
                           st.x.data() + st.net.var_begin[v]);
    for (size_t e = 0; e < st.net.edges.size(); ++e) st.x[st.net.sigma(static_cast<int>(e))] = 0.5;
    return st;
  }();
  return s;
}

void BM_RelaxedVGG16Large_ForwardBackward(benchmark::State& state) {
  const Setup& s = vgg16_large();
  RelaxedWorkspace ws(s.net);
  std::vector<double> g(s.net.n_vars);
  const LossWeights w{1, 1e12, 1e6, 1e6};
  for (auto _ : state) {
    benchmark::DoNotOptimize(relaxed_loss(s.net, s.x, w, ws, nullptr, g));
    benchmark::ClobberMemory();
  }
  state.counters["grads/s"] = benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["layers"] = static_cast<double>(s.net.layers.size());
  state.counters["vars"] = static_cast<double>(s.net.n_vars);
}
BENCHMARK(BM_RelaxedVGG16Large_ForwardBackward);

void BM_RelaxedVGG16Large_Forward(benchmark::State& state) {
  const Setup& s = vgg16_large();
  RelaxedWorkspace ws(s.net);
  const LossWeights w{1, 1e12, 1e6, 1e6};
  for (auto _ : state) benchmark::DoNotOptimize(relaxed_loss(s.net, s.x, w, ws));
  state.counters["evals/s"] = benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_RelaxedVGG16Large_Forward);

int report(int samples) {
  const char* archs[] = {"fadiff_large", "gemmini_default"};
  struct Layer {
    const char* net;
    const char* name;
  };
  const Layer layers[] = {{"resnet18", "conv1"},          {"resnet18", "layer1.0.conv1"}, {"resnet18", "layer2.0.conv1"},
                          {"resnet18", "layer2.0.downsample"}, {"resnet18", "layer3.0.conv2"}, {"resnet18", "layer4.0.conv1"},
                          {"resnet18", "fc"},             {"vgg16", "conv1"},             {"vgg16", "conv2"},
                          {"vgg16", "conv5"},             {"vgg16", "conv8"},             {"vgg16", "conv11"},
                          {"vgg16", "conv13"},            {"vgg16", "fc1"},               {"vgg16", "fc3"}};
  for (ReuseModel reuse : {ReuseModel::LoopOrder, ReuseModel::Ideal}) {
    std::printf("\nreuse model: %s, %d random valid mappings per layer (seed 1)\n",
                reuse == ReuseModel::LoopOrder ? "LoopOrder" : "Ideal (Eq. 6 literally)", samples);
    std::printf("%-8s %-20s %-16s %7s %7s %7s %7s %8s %7s %7s %7s %7s %8s\n", "net", "layer", "arch", "lat_tau",
                "lat_rho", "en_tau", "en_rho", "acc_all", "acc_L0", "acc_L1", "acc_L2", "acc_L3", "en_err");
    double sum[6] = {};
    int n = 0;
    for (const char* arch : archs) {
      const Core core = load_architecture(arch).cores.at(0);
      for (const Layer& l : layers) {
        const Workload w = zoo_workload(l.net);
        const Einsum& e = w.einsums[w.einsum_index(l.name)];
        const RelaxedAgreement a = compare_relaxed_exact(e, core, samples, 1, reuse);
        std::printf("%-8s %-20s %-16s %7.4f %7.4f %7.4f %7.4f %7.2f%% %6.2f%% %6.2f%% %6.2f%% %6.2f%% %7.3f%%\n", l.net,
                    l.name, arch, a.latency_tau, a.latency_rho, a.energy_tau, a.energy_rho, 100 * a.access_accuracy,
                    100 * a.level_accuracy[0], 100 * a.level_accuracy[1], 100 * a.level_accuracy[2],
                    100 * a.level_accuracy[3], 100 * a.energy_mean_error);
        const double v[6] = {a.latency_tau, a.latency_rho, a.energy_tau, a.energy_rho, a.access_accuracy,
                             a.energy_mean_error};
        for (int i = 0; i < 6; ++i) sum[i] += v[i];
        ++n;
      }
    }
    std::printf("mean over %d (layer, arch): latency tau %.4f rho %.4f, energy tau %.4f rho %.4f, access accuracy %.2f%%, "
                "energy mean error %.3f%%\n",
                n, sum[0] / n, sum[1] / n, sum[2] / n, sum[3] / n, 100 * sum[4] / n, 100 * sum[5] / n);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--report") == 0) return report(argc > 2 ? std::atoi(argv[2]) : 500);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
