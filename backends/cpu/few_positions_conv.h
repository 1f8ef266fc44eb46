// A 2-D convolution at stride 1 with few output positions an image (a
// ResNet's last stages at 32x32: 4x4 and 2x2 images, [16, 64, 4, 4] (*)
// [64, 64, 3, 3], and the 2x2 stage's weight gradient) computed directly,
// the filters in the vector lanes: a
// task takes an image, sixteen filters (two registers) and up to six output
// positions, and for every tap (channel, p, q) loads the sixteen filters'
// weights once and multiplies them by each position's input value,
// broadcast, into twelve sums. The weights are packed once a run, tap by
// tap; the input is read where it lies in a zero-padded copy. The unfolded
// product it replaces ([64, 576] x [576, 256] over all images) spent as
// long unfolding as multiplying and ran at 50-60 GFLOP/s on this machine's
// EPYC.
#pragma once

#include <tbb/task_arena.h>

#include <cstdint>
#include <vector>

#include "direct_kernel.h"

namespace lazylab::cpu {

class FewPositionsConv : public DirectKernel {
 public:
  // Whether this build has the kernel (AVX and FMA) and it takes the shape
  // (stride and dilation 1, an output; groups of 1 are the caller's to
  // check). Strided and dilated ones (ResNet-18's downsampling and their
  // weight gradients) measured faster alone but slowed its training step
  // (6 of 8 alternating runs), so they are not taken.
  static bool takes(const DirectShape& shape);

  explicit FewPositionsConv(const DirectShape& shape);
  void run(const float* x, const float* w, float* out, tbb::task_arena* arena) override;

 private:
  void pack_weights(const float* w, tbb::task_arena* arena);
  void run_task(const float* padded, int64_t task, float* out) const;

  DirectShape s_;
  int64_t taps_, blocks_, position_blocks_;
  PaddedInput padded_;
  std::vector<float> packed_;        // [blocks, taps, 16]: sixteen filters' tap side by side, 0 past the last
  std::vector<int64_t> tap_starts_;  // tap (channel, p, q)'s float in an image's padded planes, from a window's corner
  std::vector<int64_t> corners_;     // output position's window corner in a padded plane
};

}  // namespace lazylab::cpu
