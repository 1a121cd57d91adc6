#pragma once
// A hint that a large, freshly reserved buffer be backed by transparent huge pages. Where the
// kernel grants them only on request (THP "madvise", Debian's default), first-touch page faults
// can dominate building big flat arrays: at 10^6 computation tiles they were 60-80 % of the CPU
// time (docs/stream.md, "Computation tiles"). A hint only: without Linux or THP nothing changes.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory_resource>
#include <new>

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

// Maps [data, data + bytes) in writable now, in one call (Linux >= 5.14, MADV_POPULATE_WRITE),
// instead of one page fault at each first touch: in this VM a fault is an exception round trip
// through the hypervisor, and where the kernel has no free huge page it is one per 4 KiB.
// Writing 7*10^6 tile edges took ~16k such faults. A hint only: elsewhere nothing changes.
inline void populate_pages(const void* data, size_t bytes) {
#if defined(__linux__) && defined(MADV_POPULATE_WRITE)
  constexpr uintptr_t kPage = 4096;
  const uintptr_t lo = reinterpret_cast<uintptr_t>(data) & ~(kPage - 1);
  const uintptr_t hi = (reinterpret_cast<uintptr_t>(data) + bytes + kPage - 1) & ~(kPage - 1);
  if (bytes >= (size_t{1} << 20) && hi > lo)  // below, a few faults cost less than the call
    madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_POPULATE_WRITE);
#else
  (void)data;
  (void)bytes;
#endif
}

template <typename Vec>
void advise_huge_pages(const Vec& v) {
  advise_huge_pages(v.data(), v.capacity() * sizeof(typename Vec::value_type));
}

// An upstream for std::pmr::monotonic_buffer_resource whose blocks are huge-page aligned and
// advised: a 10^6-CT graph's R-trees allocate ~10^5 nodes each, and from the malloc heap every one
// of their 4 KiB pages faulted again for each tree (docs/stream.md, "Measured").
class HugePageResource final : public std::pmr::memory_resource {
  static constexpr size_t kHuge = size_t{2} << 20;
  // Small blocks keep their alignment (no huge page to gain).
  static size_t alignment(size_t bytes, size_t align) { return bytes >= 2 * kHuge ? std::max(align, kHuge) : align; }
  void* do_allocate(size_t bytes, size_t align) override {
    void* p = ::operator new(bytes, std::align_val_t{alignment(bytes, align)});
    advise_huge_pages(p, bytes);
    return p;
  }
  void do_deallocate(void* p, size_t bytes, size_t align) override {
    ::operator delete(p, bytes, std::align_val_t{alignment(bytes, align)});
  }
  bool do_is_equal(const std::pmr::memory_resource& o) const noexcept override { return this == &o; }
};

}  // namespace mapfuse
