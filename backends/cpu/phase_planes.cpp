#include "phase_planes.h"

#include <algorithm>

#include "vector_lanes.h"

namespace lazylab::cpu {
namespace {

// line[j] = source[j * stride + shift] for the j in [0, count) whose index
// lies in [0, width); the others are left as they are. At strides 1 and 2
// 16 at a time, the ends masked (rows of 14 to 112 floats: a call to
// memmove a row, or a float at a time, cost more than the convolution that
// read them).
void deal_columns(const float* source, int64_t width, int64_t stride, int64_t shift, int64_t count, float* line) {
  int64_t j = std::min(count, shift >= 0 ? 0 : ceil_div(-shift, stride));
  const int64_t end = std::min(count, width - shift <= 0 ? 0 : ceil_div(width - shift, stride));
#if defined(__AVX512F__)
  if (stride == 1) {
    for (; j < end; j += 16) {
      __mmask16 lanes = first_lanes(end - j);
      _mm512_mask_storeu_ps(line + j, lanes, _mm512_maskz_loadu_ps(lanes, source + j + shift));
    }
    return;
  }
  if (stride == 2) {  // 32 floats in, every other one out
    const __m512i evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    for (; j < end; j += 16) {
      const int64_t at = j * 2 + shift;  // >= 0: j starts where the indices do
      const __m512 low = _mm512_maskz_loadu_ps(first_lanes(width - at), source + at);
      const __m512 high =
          width - at > 16 ? _mm512_maskz_loadu_ps(first_lanes(width - at - 16), source + at + 16) : _mm512_setzero_ps();
      _mm512_mask_storeu_ps(line + j, first_lanes(end - j), _mm512_permutex2var_ps(low, evens, high));
    }
    return;
  }
#endif
  for (; j < end; ++j) line[j] = source[j * stride + shift];
}

}  // namespace

PhasePlanes::PhasePlanes(const DirectShape& shape)
    : s_(shape),
      height_(ceil_div(shape.padded_h(), shape.stride[0])),
      width_(ceil_div(shape.padded_w(), shape.stride[1])) {
  const int64_t sh = s_.stride[0], sw = s_.stride[1];
  std::vector<int64_t> slot_of(static_cast<size_t>(sh * sw), -1);
  for (int64_t p = 0; p < s_.kernel_h; ++p)
    for (int64_t q = 0; q < s_.kernel_w; ++q) {
      int64_t row = p * s_.dilation[0], column = q * s_.dilation[1];
      int64_t& slot = slot_of[static_cast<size_t>(row % sh * sw + column % sw)];
      if (slot < 0) {
        slot = static_cast<int64_t>(slots_.size());
        slots_.emplace_back(row % sh, column % sw);
      }
      window_.push_back(slot * plane() + row / sh * width_ + column / sw);
      farthest_ = std::max(farthest_, window_.back());
    }
}

void PhasePlanes::deal(const float* channel, float* to) const {
  const int64_t sh = s_.stride[0], sw = s_.stride[1];
  for (size_t slot = 0; slot < slots_.size(); ++slot) {
    auto [a, b] = slots_[slot];
    float* planes = to + static_cast<int64_t>(slot) * plane();
    // Plane rows i whose padded row i * sh + a is the input's row y.
    for (int64_t i = 0; i < height_; ++i) {
      int64_t y = i * sh + a - s_.pad_top;
      if (y >= 0 && y < s_.height)
        deal_columns(channel + y * s_.width, s_.width, sw, b - s_.pad_left, width_, planes + i * width_);
    }
  }
}

}  // namespace lazylab::cpu
