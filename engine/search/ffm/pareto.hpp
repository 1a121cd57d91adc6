#pragma once
// Pareto pruning on minimised criteria: keeps an item unless another kept item is <= in every
// criterion (of equal items the first is kept). FFM prunes with it inside compatibility groups.
#include <algorithm>
#include <cstddef>
#include <numeric>
#include <vector>

namespace mapfuse::ffm {

// crit(i, k): criterion k of item i. Returns the indices of the front in lexicographic order of
// the criteria. O(n log n + n * front * K).
template <class Crit>
std::vector<size_t> pareto_front(size_t n, size_t K, const Crit& crit) {
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    for (size_t k = 0; k < K; ++k) {
      const double x = crit(a, k), y = crit(b, k);
      if (x != y) return x < y;
    }
    return false;
  });
  std::vector<size_t> front;
  for (size_t i : order) {
    bool dominated = false;
    for (size_t j : front) {
      bool le = true;
      for (size_t k = 0; k < K && le; ++k) le = crit(j, k) <= crit(i, k);
      if (le) {
        dominated = true;
        break;
      }
    }
    if (!dominated) front.push_back(i);
  }
  return front;
}

}  // namespace mapfuse::ffm
