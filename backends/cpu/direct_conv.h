// A 2-D convolution at stride 1 computed directly, for the small images
// where an unfolded product per image runs far below the machine's rate
// (ResNet-18 at 32x32: [16, 144] x [144, 256] an image). Each task takes an
// image and six filters and walks the output a tile of two AVX registers
// (16 positions) at a time: for every channel and tap it loads the two runs
// of input and multiplies them by the six filters' tap, broadcast, into
// twelve sums. The input is read from a zero-padded copy (so no tap tests a
// border) and the weights from a copy packed tap by tap, six filters side
// by side; nothing is unfolded, and OpenBLAS does not pack what im2col has
// just written.
#pragma once

#include <tbb/task_arena.h>

#include <cstdint>
#include <vector>

#include "direct_kernel.h"

namespace lazylab::cpu {

class DirectConv : public DirectKernel {
 public:
  // Whether this build has the kernel (AVX and FMA) and it takes the shape:
  // stride and dilation 1, rows of whole registers (out_w a multiple of 8);
  // groups of 1 are the caller's to check.
  static bool takes(const DirectShape& shape);

  explicit DirectConv(const DirectShape& shape);
  void run(const float* x, const float* w, float* out, tbb::task_arena* arena) override;

 private:
  void pack_weights(const float* w);
  void run_block(const float* padded, int64_t image, int64_t block, float* out) const;

  DirectShape s_;
  int64_t padded_h_, padded_w_, blocks_;
  PaddedInput padded_;
  std::vector<float> packed_;  // [blocks, channels * kh * kw, 6]: six filters' tap side by side
};

}  // namespace lazylab::cpu
