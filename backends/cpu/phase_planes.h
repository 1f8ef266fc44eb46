// A convolution's input dealt into phase planes, so that every tap reads
// its window's elements at one fixed offset from its output's number,
// whatever the stride (phase_conv.h, depthwise_conv.h).
//
// For strides (sh, sw), the padded input's rows a mod sh and columns b mod
// sw make plane (a, b): element (i, j) of it is the padded input's (i * sh
// + a, j * sw + b). Output (y, x) reads, at tap (p, q), plane (p*dh mod sh,
// q*dw mod sw) at row y + p*dh / sh and column x + q*dw / sw. With outputs
// numbered y * width + x (width the planes': a few columns past the
// output's, whose results are dropped), tap (p, q) reads its plane at the
// output's number plus window()[p * kw + q]. Only the phases some tap reads
// are kept (a 1x1 convolution at stride 2 reads one of four), each a slot
// of a channel's planes; the padding is zeros.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "direct_kernel.h"

namespace lazylab::cpu {

class PhasePlanes {
 public:
  explicit PhasePlanes(const DirectShape& shape);

  int64_t height() const { return height_; }  // a plane's rows
  int64_t width() const { return width_; }    // a plane's columns, the outputs' numbering's row length
  int64_t plane() const { return height_ * width_; }
  int64_t channel_floats() const { return static_cast<int64_t>(slots_.size()) * plane(); }
  // Each tap (p, q)'s offset from its output's number, in a channel's planes.
  const std::vector<int64_t>& window() const { return window_; }
  int64_t farthest() const { return farthest_; }  // the largest offset

  // One channel's plane of the input ([height, width] as it lies) into its
  // slots at `to` (channel_floats() floats), which hold zeros where no
  // input element goes: only the input's own elements are written.
  void deal(const float* channel, float* to) const;

 private:
  DirectShape s_;
  int64_t height_, width_;
  std::vector<std::pair<int64_t, int64_t>> slots_;  // the phase (a, b) in each slot
  std::vector<int64_t> window_;
  int64_t farthest_ = 0;
};

}  // namespace lazylab::cpu
