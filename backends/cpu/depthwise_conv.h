// A depthwise 3x3 convolution (each filter reads one input channel: groups
// of one channel, as MobileNet's) at stride 1 or 2 on AVX-512, the
// outputs in the vector lanes. A task deals its channel's input into phase
// planes (phase_planes.h) in L1/L2 and goes through the output a tile of
// four rows by 32 columns at a time: each input row's three shifted loads
// serve every output row of the tile that reads it (at stride 1, six rows
// of three loads for 72 multiply-adds, where one row at a time loads 9 an
// output register), the nine weights held in registers. Outputs past a
// row's end are computed and not stored. The caller runs the epilogue on
// each block as it is done (a band of a large plane, or a task's small
// planes together). The loop a tap at a time over an output row that it
// replaces (conv_plan.cpp's run_depthwise) ran MobileNetV2's depthwise
// convolutions at 5-26 GFLOP/s on this 2-core Xeon.
#pragma once

#include <tbb/enumerable_thread_specific.h>
#include <tbb/task_arena.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "direct_kernel.h"
#include "phase_planes.h"

namespace lazylab::cpu {

class DepthwiseConv {
 public:
  // Rows [first_row, end_row) of the output ([images x filters, out_h x
  // out_w]) are written in columns [first_col, end_col), on the calling
  // thread, and not written again.
  using BlockDone = std::function<void(int64_t first_row, int64_t end_row, int64_t first_col, int64_t end_col)>;

  // Whether this build has the kernel (AVX-512) and it takes the shape: a
  // 3x3 window, the same stride of 1 or 2 both ways, no dilation; that the
  // groups are of one channel is the caller's to check.
  static bool takes(const DirectShape& shape);

  // `group_filters`: the filters that read each channel.
  DepthwiseConv(const DirectShape& shape, int64_t group_filters);
  // out [images, filters, out_h, out_w] = x [images, channels, H, W] (*) w
  // [filters, 1, 3, 3], calling `block_done` (where set) for each block.
  void run(const float* x, const float* w, float* out, tbb::task_arena* arena, const BlockDone& block_done) const;

 private:
  void run_plane(const float* planes, const float* w, float* out) const;
  void run_plane_inside(const float* channel, const float* w, float* out) const;

  DirectShape s_;
  PhasePlanes planes_;
  int64_t group_filters_;
  int64_t planes_a_task_;  // output planes a task takes (small planes several)
  mutable tbb::enumerable_thread_specific<std::vector<float>> dealt_;  // a task's channel's phase planes, by thread
};

}  // namespace lazylab::cpu
