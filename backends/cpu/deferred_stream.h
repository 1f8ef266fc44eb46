// Output written to memory with non-temporal stores: past the caches,
// without reading it in first (no read-for-ownership) and without evicting
// the inputs the next step reads. A segment's streamed output can be
// deferred: copied a piece at a time while the next segment computes, so
// that the core's compute and the memory's writes overlap instead of taking
// turns. The copy can divide as it goes (softmax's normalisation), so that
// the quotient is not stored once in cache and then copied.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>

#include "float_math.h"
#include "scalar_division.h"

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

// out[i] = in[i] / divisor, past the caches.
inline void stream_quotient(float* out, const float* in, float divisor, int64_t n) {
  int64_t head = unaligned_head(out, n);
  divide_each(out, in, divisor, head, 0, store_vector);
  divide_each(out, in, divisor, n, head, stream_vector);
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
  // from now on, divided by `divisor` if given; an earlier copy not yet done
  // is finished first.
  void start(float* destination, const float* source, int64_t n, std::optional<float> divisor = std::nullopt) {
    finish();
    destination_ = destination;
    source_ = source;
    n_ = n;
    done_ = 0;
    divisor_ = divisor;
  }

  int64_t left() const { return n_ - done_; }

  // Copies about the next `elements`, ending where the destination is
  // vector-aligned so that every later piece stores whole aligned vectors.
  void copy(int64_t elements) {
    if (elements <= 0 || done_ >= n_) return;
    int64_t end = std::min(n_, done_ + elements);
    auto aligned_end = [&](int64_t e) { return reinterpret_cast<uintptr_t>(destination_ + e) % sizeof(Vec) == 0; };
    while (end < n_ && !aligned_end(end)) ++end;
    if (divisor_)
      stream_quotient(destination_ + done_, source_ + done_, *divisor_, end - done_);
    else
      stream_copy(destination_ + done_, source_ + done_, end - done_);
    done_ = end;
  }

  void finish() { copy(left()); }

 private:
  float* destination_ = nullptr;
  const float* source_ = nullptr;
  int64_t n_ = 0, done_ = 0;
  std::optional<float> divisor_;
};

}  // namespace lazylab::cpu
