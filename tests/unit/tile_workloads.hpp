#pragma once
// Small workloads for the computation-tile tests (test_tiles.cpp, test_tile_cost.cpp).
#include <string>
#include <utility>
#include <vector>

#include "engine/workload/workload.hpp"

namespace mapfuse::test {

// out[n,c,h,w] = in[n,c,h,w]: an element-wise producer so that the next layer's input is produced
// (the tiler applies padding offsets only to produced tensors).
inline Einsum source(const std::string& in, const std::string& out, int64_t C, int64_t H, int64_t W) {
  Einsum e;
  e.name = "src_" + out;
  e.op = OpKind::Elementwise;
  e.ranks = {{"N", 1}, {"C", C}, {"H", H}, {"W", W}};
  const std::vector<Projection> id = {{{0, 1}}, {{1, 1}}, {{2, 1}}, {{3, 1}}};
  e.tensors = {{in, TensorRole::Input, id, 8}, {out, TensorRole::Output, id, 8}};
  return e;
}

// A k x k conv with stride and padding; its weights are `name`.w, its output `name`.
inline Einsum conv(const std::string& name, const std::string& in, int64_t C, int64_t K, int64_t P, int64_t Q,
                   int64_t k, int64_t stride, int64_t pad) {
  ConvShape s;
  s.C = C;
  s.K = K;
  s.P = P;
  s.Q = Q;
  s.R = s.S = k;
  s.Wstride = s.Hstride = stride;
  s.Wpad = s.Hpad = pad;
  return make_conv(name, s, in, name + ".w", name);
}

inline Workload finalized(std::vector<Einsum> es) {
  Workload w;
  w.name = "t";
  w.einsums = std::move(es);
  finalize(w);
  return w;
}

}  // namespace mapfuse::test
