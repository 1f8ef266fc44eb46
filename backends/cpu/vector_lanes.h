#pragma once
// Masks of an AVX-512 register's leading lanes: the partial registers at
// the ends of rows and runs (transposes, attention products, convolutions,
// pools, phase planes).
#if defined(__AVX512F__)
#include <immintrin.h>

#include <cstdint>

namespace lazylab::cpu {

// The first `count` lanes of 16 (none when count <= 0, all past 16).
inline __mmask16 first_lanes(int64_t count) {
  if (count <= 0) return 0;
  return count >= 16 ? __mmask16{0xFFFF} : static_cast<__mmask16>((1u << count) - 1);
}

}  // namespace lazylab::cpu
#endif
