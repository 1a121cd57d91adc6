#pragma once
// A fingerprint of the cost model's semantics, recorded with every journaled result so that a
// study resumed by another mapfuse build never mixes two cost models in one file
// (docs/results.md, "Resume and versions").
#include <string>

namespace mapfuse {

// 16 hex digits: FNV-1a over the embedded architecture presets' text and over the exact energy
// and cycles of a fixed battery of evaluations (a strided conv with halos, a depthwise conv and a
// matmul, each under seeded random mappings, on the first core of every preset). Any change to
// the model's arithmetic or to a preset that alters one of those results in its last bit changes
// it. Computed once per process (a few milliseconds).
const std::string& model_fingerprint();

}  // namespace mapfuse
