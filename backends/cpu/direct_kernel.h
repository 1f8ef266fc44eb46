// What the cpu's direct convolutions (direct_conv.h, large_kernel_conv.h,
// few_positions_conv.h) share: the shape of a convolution (groups of 1),
// their interface, and the input copied into zero-bordered planes, so that
// no window tests a border.
#pragma once

#include <tbb/task_arena.h>

#include <cstdint>
#include <vector>

#include "lazylab/window_shape.hpp"

// Their vector code needs AVX and FMA at build time; without them every
// kind's takes() refuses and ConvPlan unfolds instead.
#if defined(__AVX__) && defined(__FMA__)
#define LAZYLAB_DIRECT_KERNELS 1
#endif

namespace lazylab::cpu {

struct DirectShape {
  int64_t images, channels, height, width;  // x
  int64_t filters, kernel_h, kernel_w;      // w
  int64_t pad_top, pad_left, pad_bottom, pad_right;
  int64_t out_h, out_w;
  int64_t stride[2] = {1, 1}, dilation[2] = {1, 1};

  bool unit_stride() const { return stride[0] == 1 && stride[1] == 1 && dilation[0] == 1 && dilation[1] == 1; }
  int64_t padded_h() const { return height + pad_top + pad_bottom; }
  int64_t padded_w() const { return width + pad_left + pad_right; }
};

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// A window op's geometry (a convolution's, groups of 1, or a pool's) as the
// direct kernels take it.
DirectShape direct_shape(const windows::WindowShape& window);

// A convolution computed without unfolding or OpenBLAS. Each kind says, by
// a static takes(const DirectShape&), which shapes it computes.
class DirectKernel {
 public:
  virtual ~DirectKernel() = default;
  // out [images, filters, out_h, out_w] = x [images, channels, H, W] (*) w.
  virtual void run(const float* x, const float* w, float* out, tbb::task_arena* arena) = 0;
};

// x [images, channels, H, W] in the middle of [images, channels, padded_h,
// padded_w] planes whose borders stay the zeros they were made with.
class PaddedInput {
 public:
  explicit PaddedInput(const DirectShape& shape);
  // Copies x in (the planes on the arena's threads) and returns the copy.
  const float* fill(const float* x, tbb::task_arena* arena);

 private:
  DirectShape s_;
  std::vector<float> planes_;
};

}  // namespace lazylab::cpu
