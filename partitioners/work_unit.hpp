#pragma once
// A study is cut into work units: independent pieces (one layer's mapper run on one hardware
// point, one optimizer run, ...) that any rank can compute. Plain data: the cluster moves them
// without knowing what they compute.
#include <cstdint>
#include <string>
#include <vector>

namespace mapfuse {

struct WorkUnit {
  std::string id;          // stable hash of the unit's content (hex): a resumed run recognises it
  std::string kind;        // what computes it, e.g. "map_layer"
  std::string label;       // for people: "resnet18/conv1 @ pe16_sp256_acc64"
  double cost_hint = 1.0;  // relative expected cost; executors start the largest first
  std::string payload;     // the parameters its computation needs (JSON text)
};

// Stable 64-bit FNV-1a hash of a text, as 16 hex digits (the same on every platform and run).
std::string stable_id(const std::string& content);

// Units in the order executors hand them out: largest cost hint first, ties by id.
void order_for_dispatch(std::vector<WorkUnit>& units);

}  // namespace mapfuse
