// A 2-D convolution whose kernel is about as large as its input and whose
// output is a few positions: a weight gradient's convolution, where the
// kernel is the output's gradient and the output the 3x3 weight (ResNet-18
// at 32x32: [16, 16, 16, 16] (*) [16, 16, 16, 16] -> [16, 16, 3, 3]). Each
// output is one long dot product of a window and a filter, so it is
// computed as such: a task takes an image, four filters and up to three
// output positions of a row, and for every channel and kernel row loads the
// three windows' runs once and each filter's run once, into twelve vector
// sums, added across their lanes at the end. Nothing is packed: the windows
// are read where they lie in a zero-padded copy of the input, the filters
// where they lie in the weights (the unfolded or packed product it replaces
// spent as long packing the windows as OpenBLAS did multiplying them, and
// its sgemm, 16 filters by 144 windows over 4096 taps, ran at 28-45 GFLOP/s
// on this machine's EPYC).
//
// Kernel rows of 8k floats are whole registers; rows of 4 or 2 floats go
// two or four to a register (the filter's rows are adjacent in memory, the
// window's are gathered from the rows of the input they lie on).
#pragma once

#include <tbb/task_arena.h>

#include <cstdint>
#include <vector>

#include "direct_kernel.h"

namespace lazylab::cpu {

class LargeKernelConv : public DirectKernel {
 public:
  // Whether this build has the kernel (AVX and FMA) and it takes the shape:
  // stride and dilation 1, kernel rows of 2, 4 or a multiple of 8 floats
  // (rows of 2 or 4: a register's rows never run past the last channel);
  // groups of 1 are the caller's to check.
  static bool takes(const DirectShape& shape);

  explicit LargeKernelConv(const DirectShape& shape);
  void run(const float* x, const float* w, float* out, tbb::task_arena* arena) override;

 private:
  void run_task(const float* padded, const float* w, int64_t task, float* out) const;

  DirectShape s_;
  int64_t blocks_, column_blocks_;
  PaddedInput padded_;
  std::vector<int64_t> row_starts_;  // kernel row (channel, p)'s first float in an image's padded planes
};

}  // namespace lazylab::cpu
