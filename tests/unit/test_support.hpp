#pragma once
// Paths to reference data for tests, and presets loaded once.
#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <doctest/doctest.h>

#include "engine/arch/arch_toml.hpp"
#include "engine/common/error.hpp"
#include "engine/workload/workload.hpp"
#include "partitioners/study.hpp"

namespace mapfuse::test {

inline std::string shared_data(const std::string& rel) {
  const char* env = std::getenv("MAPFUSE_SHARED_DATA");
  return std::string(env ? env : MAPFUSE_SHARED_DATA) + "/" + rel;
}

// A preset's first core, loaded once per test binary.
inline const Core& preset_core(const std::string& name) {
  static std::map<std::string, Core> cache;
  auto it = cache.find(name);
  if (it == cache.end()) it = cache.emplace(name, load_architecture(name).cores.at(0)).first;
  return it->second;
}

// A chain of matmuls T_{i+1}[m,n] = T_i[m,k] W_i[k,n]; nk[i] = (N_i, K_i) with K_{i+1} = N_i.
inline Workload matmul_chain(int64_t M, const std::vector<std::pair<int64_t, int64_t>>& nk) {
  Workload w;
  w.name = "chain";
  for (size_t i = 0; i < nk.size(); ++i)
    w.einsums.push_back(make_matmul("MM" + std::to_string(i), M, nk[i].first, nk[i].second, "T" + std::to_string(i),
                                    "W" + std::to_string(i), "T" + std::to_string(i + 1)));
  finalize(w);
  return w;
}

// GPT-3's projection and its consumer in miniature: V[b,m,h,e] = I[b,m,d] * WV[h,e,d], then
// Z[b,m,g] = V[b,m,h,e] * WZ[h,e,g]. Five ranks each, with two pairs of equivalent ranks
// ((b,m) and (h,e): engine/search/rank_merge.hpp).
inline Workload projection_chain(int64_t B, int64_t M, int64_t H, int64_t E, int64_t D, int64_t G) {
  Workload w;
  w.name = "projection_chain";
  auto T_ = [](std::string name, TensorRole role, std::vector<int> dims) {
    TensorAccess t{std::move(name), role, {}, 8};
    for (int d : dims) t.dims.push_back({{d, 1}});
    return t;
  };
  Einsum v;
  v.name = "V";
  v.op = OpKind::Mac;
  v.ranks = {{"B", B}, {"M", M}, {"H", H}, {"E", E}, {"D", D}};
  v.tensors = {T_("I", TensorRole::Input, {0, 1, 4}), T_("WV", TensorRole::Weight, {2, 3, 4}),
               T_("V", TensorRole::Output, {0, 1, 2, 3})};
  Einsum z;
  z.name = "Z";
  z.op = OpKind::Mac;
  z.ranks = {{"B", B}, {"M", M}, {"H", H}, {"E", E}, {"G", G}};
  z.tensors = {T_("V", TensorRole::Input, {0, 1, 2, 3}), T_("WZ", TensorRole::Weight, {2, 3, 4}),
               T_("Z", TensorRole::Output, {0, 1, 4})};
  w.einsums = {v, z};
  finalize(w);
  return w;
}

inline std::string source_dir(const std::string& rel) { return std::string(MAPFUSE_SOURCE_DIR) + "/" + rel; }

// The error of parsing a study text (the test fails when there is none).
inline InputError study_error(const std::string& text, const std::string& file) {
  try {
    parse_study(text, file);
  } catch (const InputError& e) {
    return e;
  }
  FAIL("expected an InputError");
  return InputError("unreachable");
}

// `s` with the first `from` replaced by `to` (the test fails when `from` is absent).
inline std::string replace_once(std::string s, const std::string& from, const std::string& to) {
  const size_t at = s.find(from);
  REQUIRE(at != std::string::npos);
  return s.replace(at, from.size(), to);
}

}  // namespace mapfuse::test
