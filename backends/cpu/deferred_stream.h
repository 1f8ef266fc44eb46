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
#include "stream_store.h"

namespace lazylab::cpu {

// out[i] = in[i] / divisor, past the caches.
inline void stream_quotient(float* out, const float* in, float divisor, int64_t n) {
  int64_t head = unaligned_head(out, n);
  divide_each(out, in, divisor, head, 0, store_vector);
  divide_each(out, in, divisor, n, head, stream_vector);
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
