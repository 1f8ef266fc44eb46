// Stores past the caches (non-temporal): written to memory without reading
// each line in first and without evicting what the caches hold. The cpu
// kernels write their large outputs so, and measure the host's copy ceiling
// with the same copy (host_ceilings.h).
#pragma once

#include <algorithm>
#include <cstdint>

#include "float_math.h"

namespace lazylab::cpu {

// A vector stored past the caches; `out` vector-aligned.
inline void stream_vector(float* out, Vec v) {
#if defined(__AVX512F__)
  _mm512_stream_ps(out, std::bit_cast<__m512>(v));
#elif defined(__AVX2__)
  _mm256_stream_ps(out, std::bit_cast<__m256>(v));
#else
  store_vector(out, v);
#endif
}

// Elements of `out` before the first vector-aligned one, at most n.
inline int64_t unaligned_head(const float* out, int64_t n) {
  int64_t misaligned = static_cast<int64_t>(reinterpret_cast<uintptr_t>(out) % sizeof(Vec));
  int64_t head = misaligned == 0 ? 0 : static_cast<int64_t>((sizeof(Vec) - misaligned) / sizeof(float));
  return std::min(n, head);
}

inline void stream_copy(float* out, const float* in, int64_t n) {
  int64_t i = unaligned_head(out, n);
  std::copy(in, in + i, out);
  for (; i + kLanes <= n; i += kLanes) stream_vector(out + i, load_vector(in + i));
  std::copy(in + i, in + n, out + i);
}

// Non-temporal stores are weakly ordered: fenced before a chunk's end is
// published to the thread that joins it.
inline void stream_fence() {
#if defined(__AVX512F__) || defined(__AVX2__)
  _mm_sfence();
#endif
}

}  // namespace lazylab::cpu
