// Output written to memory with non-temporal stores: past the caches,
// without reading it in first (no read-for-ownership) and without evicting
// the inputs the next step reads. A segment's streamed output can be
// deferred: copied a piece at a time while the next segment computes, so
// that the core's compute and the memory's writes overlap instead of taking
// turns.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "float_math.h"

namespace lazylab::cpu {

inline void stream_copy(float* out, const float* in, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__) || defined(__AVX2__)
  for (; i < n && reinterpret_cast<uintptr_t>(out + i) % sizeof(Vec) != 0; ++i) out[i] = in[i];
  for (; i + kLanes <= n; i += kLanes) {
    Vec v;
    std::memcpy(&v, in + i, sizeof v);
#if defined(__AVX512F__)
    _mm512_stream_ps(out + i, std::bit_cast<__m512>(v));
#else
    _mm256_stream_ps(out + i, std::bit_cast<__m256>(v));
#endif
  }
#endif
  for (; i < n; ++i) out[i] = in[i];
}

// Non-temporal stores are weakly ordered: fenced before a chunk's end is
// published to the thread that joins it.
inline void stream_fence() {
#if defined(__AVX512F__) || defined(__AVX2__)
  _mm_sfence();
#endif
}

class DeferredStream {
 public:
  // Copies `source` (which must stay valid until finished) to `destination`
  // from now on; an earlier copy not yet done is finished first.
  void start(float* destination, const float* source, int64_t n) {
    finish();
    destination_ = destination;
    source_ = source;
    n_ = n;
    done_ = 0;
  }

  int64_t left() const { return n_ - done_; }

  // Copies about the next `elements`, ending where the destination is
  // vector-aligned so that every later piece stores whole aligned vectors.
  void copy(int64_t elements) {
    if (elements <= 0 || done_ >= n_) return;
    int64_t end = std::min(n_, done_ + elements);
    auto aligned_end = [&](int64_t e) { return reinterpret_cast<uintptr_t>(destination_ + e) % sizeof(Vec) == 0; };
    while (end < n_ && !aligned_end(end)) ++end;
    stream_copy(destination_ + done_, source_ + done_, end - done_);
    done_ = end;
  }

  void finish() { copy(left()); }

 private:
  float* destination_ = nullptr;
  const float* source_ = nullptr;
  int64_t n_ = 0, done_ = 0;
};

}  // namespace lazylab::cpu
