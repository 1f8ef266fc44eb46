// A 2-D convolution at stride 1 with few output positions an image (a
// ResNet's last stages at 32x32: 4x4 and 2x2 images, [16, 64, 4, 4] (*)
// [64, 64, 3, 3], and the 2x2 stage's weight gradient) computed directly,
// the filters in the vector lanes: a task takes sixteen filters (two
// registers) and up to six rows, and for every tap (channel, p, q) loads
// the sixteen filters' weights once and multiplies them by each row's input
// value, broadcast, into twelve sums. The weights are packed once a run,
// tap by tap. A row is one of an image's output positions, read in a
// zero-padded copy of the input; or, where a tenth of the taps or more
// would read the zero border (a 3x3 kernel over a 2x2 image reaches the
// input with 4 of its 9 taps an output; the 4x4 and 8x8 stages' weight
// gradients, 4x4 and 8x8 kernels at 3x3 positions, with 69% and 84%), one
// of six images at one position, over that position's inside taps only,
// read in the input as it lies. The unfolded
// product it replaces ([64, 576] x [576, 256] over all images) spent as
// long unfolding as multiplying and ran at 50-60 GFLOP/s on this machine's
// EPYC. By images against by positions, ms a convolution in ResNet-18's
// training step, alternating runs: the 2x2 stage 0.13-0.15 against
// 0.24-0.33, the 4x4 stage 0.14-0.18 against 0.18-0.22, the 2x2 stage's
// weight gradient 0.10-0.11 against 0.19-0.21.
#pragma once

#include <tbb/task_arena.h>

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "direct_kernel.h"

namespace lazylab::cpu {

class FewPositionsConv : public DirectKernel {
 public:
  // A tap: its packed weights (index) and its input float (from a row's
  // base).
  using Tap = std::pair<int64_t, int64_t>;

  // Whether this build has the kernel (AVX and FMA) and it takes the shape
  // (stride and dilation 1, an output; groups of 1 are the caller's to
  // check). Strided and dilated ones (ResNet-18's downsampling and their
  // weight gradients) measured faster alone but slowed its training step
  // (6 of 8 alternating runs), so they are not taken.
  static bool takes(const DirectShape& shape);
  // Whether it takes the shape by images: two images or more, and at most
  // nine tenths of the taps an output reach the input.
  static bool by_images(const DirectShape& shape);

  explicit FewPositionsConv(const DirectShape& shape);
  void run(const float* x, const float* w, float* out, tbb::task_arena* arena) override;

 private:
  void list_inside_taps();
  void pack_weights(const float* w, tbb::task_arena* arena);
  void run_positions(const float* padded, int64_t task, float* out) const;
  void run_images(const float* x, int64_t task, float* out) const;

  DirectShape s_;
  int64_t taps_, plane_, blocks_;
  std::optional<PaddedInput> padded_;  // by positions
  std::vector<float> packed_;          // [blocks, taps, 16]: sixteen filters' tap side by side, 0 past the last
  bool by_images_ = false;
  // By positions: every tap, its float in an image's padded planes from a
  // window's corner; each output position's window corner.
  std::vector<Tap> all_taps_;
  std::vector<int64_t> corners_;
  // By images: each position's taps inside the input, floats from an
  // image's start.
  std::vector<std::vector<Tap>> position_taps_;
};

}  // namespace lazylab::cpu
