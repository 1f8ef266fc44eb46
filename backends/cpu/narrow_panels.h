// Whole 16-bit operands widened into f32 panels, and f32 results narrowed
// back, in blocks on the backend's threads: how products and convolutions
// of bf16 and f16 run on OpenBLAS's sgemm (Debian's OpenBLAS 0.3.21 has no
// sbgemm) and on the f32 convolutions.
#pragma once

#include <algorithm>
#include <cstdint>

#include "narrow_floats.h"
#include "parallel.h"

namespace lazylab::cpu {

namespace narrow_detail {
constexpr int64_t kPanelBlock = int64_t{1} << 16;  // values a task converts

template <class Convert>
void in_blocks(tbb::task_arena* arena, int64_t n, const Convert& convert) {
  each_in_parallel(arena, (n + kPanelBlock - 1) / kPanelBlock, [&](int64_t first, int64_t end) {
    for (int64_t block = first; block < end; ++block) {
      int64_t at = block * kPanelBlock;
      convert(at, std::min(kPanelBlock, n - at));
    }
  });
}
}  // namespace narrow_detail

inline void widen_panel(tbb::task_arena* arena, uint32_t dtype, const uint16_t* from, float* to, int64_t n) {
  narrow_detail::in_blocks(arena, n, [&](int64_t at, int64_t count) { widen(dtype, from + at, to + at, count); });
}

inline void narrow_panel(tbb::task_arena* arena, uint32_t dtype, const float* from, uint16_t* to, int64_t n) {
  narrow_detail::in_blocks(arena, n, [&](int64_t at, int64_t count) { narrow(dtype, from + at, to + at, count); });
}

// Floats of Memory::panels rounded up to a 64-byte line.
constexpr int64_t whole_lines(int64_t floats) { return (floats + 15) / 16 * 16; }

}  // namespace lazylab::cpu
