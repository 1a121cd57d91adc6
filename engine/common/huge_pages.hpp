#pragma once
// A hint that a large, freshly reserved buffer be backed by transparent huge pages. Where the
// kernel grants them only on request (THP "madvise", Debian's default), first-touch page faults
// can dominate building big flat arrays: at 10^6 computation tiles they were 60-80 % of the CPU
// time (docs/stream.md, "Computation tiles"). A hint only: without Linux or THP nothing changes.
#include <cstddef>
#include <cstdint>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace mapfuse {

inline void advise_huge_pages(const void* data, size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  if (bytes < 2 * kHuge) return;  // too small to hold a whole aligned huge page worth the call
  const uintptr_t lo = (reinterpret_cast<uintptr_t>(data) + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t hi = (reinterpret_cast<uintptr_t>(data) + bytes) & ~(kHuge - 1);
  if (hi > lo) madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);
#else
  (void)data;
  (void)bytes;
#endif
}

template <typename Vec>
void advise_huge_pages(const Vec& v) {
  advise_huge_pages(v.data(), v.capacity() * sizeof(typename Vec::value_type));
}

}  // namespace mapfuse
