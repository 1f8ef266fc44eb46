// The cpu backend's copy past the caches (backends/cpu/stream_store.h:
// non-temporal stores, no read of each target line first), built here with
// the backend's vector ISA. The copy ceiling is measured with it: glibc's
// memcpy moved a quarter to a third less on the development machine (66-91
// against 97-110 GB/s, two threads, in one minute), so a floor taken from
// memcpy was one that the kernels beat.
#pragma once

#include <cstddef>

namespace lazylab {

void stream_copy(float* out, const float* in, size_t n);

}  // namespace lazylab
