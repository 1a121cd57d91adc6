#pragma once
// The GET-fusion test networks (shared/data/get/onnx), each loaded once per test binary and named
// by its file stem.
#include <map>
#include <string>

#include "engine/workload/op_graph.hpp"
#include "tests/unit/test_support.hpp"

namespace mapfuse::test {

inline const OpGraph& get_network(const std::string& name) {
  static std::map<std::string, OpGraph> cache;
  auto it = cache.find(name);
  if (it == cache.end()) {
    it = cache.emplace(name, load_op_graph(shared_data("get/onnx/" + name + ".onnx"))).first;
    it->second.name = name;
  }
  return it->second;
}

}  // namespace mapfuse::test
