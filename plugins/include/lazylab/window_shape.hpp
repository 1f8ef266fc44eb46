// The geometry of a window op over NCHW (conv2d, max_pool2d, avg_pool2d),
// read from its values' shapes and from its attributes where ops.def's
// schema places them: the one place a backend decodes them.
#pragma once

#include <cstdint>

#include "lazylab/backend_abi.h"
#include "lazylab/op_table.hpp"

namespace lazylab::windows {

struct WindowShape {
  int64_t images = 0, channels = 0, height = 0, width = 0;  // the input
  int64_t filters = 0, out_h = 0, out_w = 0;                // the result's channels and plane
  int64_t kernel[2] = {1, 1};  // the window's rows and columns: a convolution's weight's last two dims
  int64_t stride[2] = {1, 1}, dilation[2] = {1, 1};
  int64_t pad[4] = {0, 0, 0, 0};   // top, left, bottom, right (bottom and right only bound the result's size)
  int64_t groups = 1;              // a convolution's; a pool reads each plane alone
  bool count_include_pad = false;  // avg_pool2d's: whether its divisor counts the padding

  int64_t group_channels() const { return channels / groups; }
  int64_t group_filters() const { return filters / groups; }
  // A convolution's products per result element: the rows of its unfolded
  // matrix (im2col).
  int64_t taps() const { return group_channels() * kernel[0] * kernel[1]; }
  int64_t positions() const { return out_h * out_w; }  // the result plane's elements: the unfolded columns
  // A 1 x 1 window at stride 1 with no padding: the input is its own
  // unfolded matrix.
  bool pointwise() const {
    return kernel[0] == 1 && kernel[1] == 1 && stride[0] == 1 && stride[1] == 1 && pad[0] == 0 && pad[1] == 0 &&
           pad[2] == 0 && pad[3] == 0;
  }
};

// Window op `op`'s geometry (a conv2d, max_pool2d or avg_pool2d whose
// types the host has checked, as in every Program a backend receives);
// `values[v].shape` indexes value v's shape (a Program's lazylab_value
// array, a backend's own table).
template <class Values>
WindowShape window_shape(const Values& values, const lazylab_op& op) {
  const auto &x = values[op.operands[0]].shape, &out = values[op.result].shape;
  WindowShape s;
  s.images = x[0], s.channels = x[1], s.height = x[2], s.width = x[3];
  s.filters = out[1], s.out_h = out[2], s.out_w = out[3];
  auto attr = [&](const char* name) -> const lazylab_attr* {
    int index = ops::attribute_index(op.op, name);
    return index < 0 ? nullptr : &op.attrs[index];
  };
  if (op.op == LAZYLAB_OP_Conv2d) {
    const auto& w = values[op.operands[1]].shape;
    s.kernel[0] = w[2], s.kernel[1] = w[3];
  } else {
    for (int d = 0; d < 2; ++d) s.kernel[d] = attr("kernel")->ints[d];
  }
  for (int d = 0; d < 2; ++d) s.stride[d] = attr("strides")->ints[d];
  for (int d = 0; d < 4; ++d) s.pad[d] = attr("pads")->ints[d];
  if (const lazylab_attr* dilations = attr("dilations"))
    for (int d = 0; d < 2; ++d) s.dilation[d] = dilations->ints[d];
  if (const lazylab_attr* groups = attr("groups")) s.groups = groups->i;
  if (const lazylab_attr* count = attr("count_include_pad")) s.count_include_pad = count->i != 0;
  return s;
}

}  // namespace lazylab::windows
