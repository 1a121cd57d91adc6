#pragma once
// FNV-1a, 64-bit: a stable hash of bytes (the same on every platform and run), for ids and
// fingerprints that are written to files and compared across runs and machines.
#include <cstdint>
#include <cstring>
#include <string_view>

namespace mapfuse {

inline constexpr uint64_t kFnvOffset = 1469598103934665603ULL;

inline uint64_t fnv1a(const void* data, std::size_t n, uint64_t h = kFnvOffset) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ULL;
  }
  return h;
}
inline uint64_t fnv1a(std::string_view s, uint64_t h = kFnvOffset) { return fnv1a(s.data(), s.size(), h); }
// A double by its bit pattern: a fingerprint must change when a result changes in its last bit.
inline uint64_t fnv1a(double v, uint64_t h) {
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof bits);
  return fnv1a(&bits, sizeof bits, h);
}

}  // namespace mapfuse
