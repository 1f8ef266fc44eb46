#include "stream_copy.h"

#include <algorithm>
#include <cstdint>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

namespace lazylab {
namespace {

#if defined(__AVX512F__)
constexpr size_t kVectorFloats = 16;
void stream_vector(float* out, const float* in) { _mm512_stream_ps(out, _mm512_loadu_ps(in)); }
#elif defined(__AVX__)
constexpr size_t kVectorFloats = 8;
void stream_vector(float* out, const float* in) { _mm256_stream_ps(out, _mm256_loadu_ps(in)); }
#elif defined(__SSE2__)
constexpr size_t kVectorFloats = 4;
void stream_vector(float* out, const float* in) { _mm_stream_ps(out, _mm_loadu_ps(in)); }
#else
constexpr size_t kVectorFloats = 1;
void stream_vector(float* out, const float* in) { *out = *in; }
#endif

}  // namespace

void stream_copy(float* out, const float* in, size_t n) {
  constexpr size_t kVectorBytes = kVectorFloats * sizeof(float);
  size_t misaligned = reinterpret_cast<uintptr_t>(out) % kVectorBytes;
  size_t head = std::min(n, misaligned == 0 ? 0 : (kVectorBytes - misaligned) / sizeof(float));
  std::copy(in, in + head, out);  // a non-float-aligned `out` never aligns: plain stores to the end
  size_t i = head;
  if (reinterpret_cast<uintptr_t>(out + i) % kVectorBytes == 0)
    for (; i + kVectorFloats <= n; i += kVectorFloats) stream_vector(out + i, in + i);
  std::copy(in + i, in + n, out + i);
#if defined(__SSE2__)
  _mm_sfence();  // the streamed lines are written before the caller's thread is joined
#endif
}

}  // namespace lazylab
