#include "direct_kernel.h"

#include <algorithm>

#include "parallel.h"

namespace lazylab::cpu {

DirectShape direct_shape(const windows::WindowShape& w) {
  DirectShape shape{w.images, w.channels, w.height, w.width,  w.filters, w.kernel[0], w.kernel[1],
                    w.pad[0], w.pad[1],   w.pad[2], w.pad[3], w.out_h,   w.out_w};
  for (int d = 0; d < 2; ++d) shape.stride[d] = w.stride[d], shape.dilation[d] = w.dilation[d];
  return shape;
}

PaddedInput::PaddedInput(const DirectShape& shape)
    : s_(shape), planes_(static_cast<size_t>(shape.images * shape.channels * shape.padded_h() * shape.padded_w())) {}

const float* PaddedInput::fill(const float* x, tbb::task_arena* arena) {
  int64_t padded_w = s_.padded_w(), plane_size = s_.padded_h() * padded_w;
  each_in_parallel(arena, s_.images * s_.channels, [&](int64_t first, int64_t end) {
    for (int64_t plane = first; plane < end; ++plane) {
      const float* from = x + plane * s_.height * s_.width;
      float* to = planes_.data() + plane * plane_size + s_.pad_top * padded_w + s_.pad_left;
      for (int64_t y = 0; y < s_.height; ++y)
        std::copy(from + y * s_.width, from + (y + 1) * s_.width, to + y * padded_w);
    }
  });
  return planes_.data();
}

}  // namespace lazylab::cpu
