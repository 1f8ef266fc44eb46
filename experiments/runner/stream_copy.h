// A copy that writes its target with non-temporal stores (past the caches,
// without reading each line in first), as the cpu backend's kernels write
// their outputs. The copy ceiling is measured with it: glibc's memcpy moved
// a quarter to a third less than this copy on the development machine (65-91
// against 99-112 GB/s, two threads, in one minute), so a floor taken from
// memcpy was one that kernels beat.
#pragma once

#include <cstddef>

namespace lazylab {

void stream_copy(float* out, const float* in, size_t n);

}  // namespace lazylab
