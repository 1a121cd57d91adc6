#include "engine/validation/model_fingerprint.hpp"

#include <fmt/format.h>

#include <random>
#include <vector>

#include "engine/arch/arch_toml.hpp"
#include "engine/common/embedded.hpp"
#include "engine/common/hash.hpp"
#include "engine/cost/model.hpp"
#include "engine/cost/plan.hpp"
#include "engine/search/random_mapping.hpp"
#include "engine/workload/einsum.hpp"

namespace mapfuse {
namespace {

std::vector<Einsum> probe_einsums() {
  ConvShape strided;  // halos from p*stride + r, two ranks of size > fan-outs
  strided.N = 1, strided.K = 32, strided.C = 16, strided.P = 14, strided.Q = 14, strided.R = 3, strided.S = 3;
  strided.Wstride = strided.Hstride = 2;
  ConvShape depthwise;
  depthwise.K = depthwise.C = 24, depthwise.P = depthwise.Q = 28;
  depthwise.R = depthwise.S = 3;
  return {make_conv("probe_conv", strided), make_depthwise_conv("probe_depthwise", depthwise, "I", "W", "O"),
          make_matmul("probe_matmul", 64, 96, 128)};
}

std::string compute() {
  uint64_t h = kFnvOffset;
  for (const EmbeddedFile& f : embedded_arch_presets()) {
    h = fnv1a(f.name, h);
    h = fnv1a(f.text, h);
  }
  const std::vector<Einsum> einsums = probe_einsums();
  for (const std::string& name : arch_preset_names()) {
    const Architecture arch = load_architecture(name);
    for (const Einsum& e : einsums) {
      const Core& core = core_for(arch.cores.at(0), e);
      const EvalPlan plan = compile_plan(e, core);
      std::mt19937_64 rng(fnv1a(name + "/" + e.name));
      for (int i = 0; i < 8; ++i) {
        const CostResult r = evaluate(plan, flatten(random_mapping(e, core, rng)));
        h = fnv1a(static_cast<double>(static_cast<int>(r.invalid)), h);
        h = fnv1a(r.energy_pj, h);
        h = fnv1a(r.cycles, h);
      }
    }
  }
  return fmt::format("{:016x}", h);
}

}  // namespace

const std::string& model_fingerprint() {
  static const std::string fp = compute();
  return fp;
}

}  // namespace mapfuse
