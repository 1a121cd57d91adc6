#pragma once
// The FADiff tests' small network, shared by test_fadiff.cpp and test_get_cross.cpp.
#include <string>

#include "engine/workload/workload.hpp"

namespace mapfuse::test {

// Three convs in a chain (x -> a -> b -> c); `third` names the last one.
inline Workload conv_chain3(const std::string& third = "c3") {
  Workload w;
  w.name = "chain3";
  ConvShape s{.N = 1, .K = 32, .C = 16, .P = 14, .Q = 14, .R = 3, .S = 3};
  w.einsums.push_back(make_conv("c1", s, "x", "w1", "a"));
  s.C = 32;
  s.K = 64;
  w.einsums.push_back(make_conv("c2", s, "a", "w2", "b"));
  ConvShape s3{.N = 1, .K = 16, .C = 64, .P = 7, .Q = 7, .R = 1, .S = 1, .Wstride = 2, .Hstride = 2};
  w.einsums.push_back(make_conv(third, s3, "b", "w3", "c"));
  finalize(w);
  return w;
}

}  // namespace mapfuse::test
