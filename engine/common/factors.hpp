#pragma once
// Integer factorisation shared by the mappers and samplers (tile factors are products of a rank
// size's prime factors).
#include <cstdint>
#include <vector>

namespace mapfuse {

// Prime factorisation (ascending, with multiplicity).
inline std::vector<int64_t> prime_factors(int64_t n) {
  std::vector<int64_t> f;
  for (int64_t p = 2; p * p <= n; ++p)
    while (n % p == 0) f.push_back(p), n /= p;
  if (n > 1) f.push_back(n);
  return f;
}

}  // namespace mapfuse
