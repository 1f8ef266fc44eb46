// A window op's geometry as backends read it (lazylab/window_shape.hpp):
// each attribute from where ops.def's schema places it, for a convolution
// and both pools, as the Program the backends receive holds them.
#include "lazylab/window_shape.hpp"

#include "core/pass_manager.h"
#include "core/program_view.h"
#include "core/tensor_ops.h"
#include "support.h"

using namespace lazylab;
using namespace lazylab::testing;

namespace {

// The geometry of the one op of ctx's program, lowered op by op.
windows::WindowShape geometry_of(Context& ctx) {
  Module module;
  module.graph = ctx.capture();
  REQUIRE(run_pipeline(pipeline("lower"), module).ok());
  ProgramView view(*module.program, module.graph);
  const lazylab_program& program = view.get();
  REQUIRE(program.num_kernels == 1);
  REQUIRE(program.kernels[0].num_ops == 1);
  return windows::window_shape(program.values, program.kernels[0].ops[0]);
}

}  // namespace

TEST_CASE("attribute_index finds an attribute where the op's schema places it") {
  CHECK(ops::attribute_index(LAZYLAB_OP_Conv2d, "strides") == 0);
  CHECK(ops::attribute_index(LAZYLAB_OP_Conv2d, "groups") == 3);
  CHECK(ops::attribute_index(LAZYLAB_OP_MaxPool2d, "dilations") == 3);
  CHECK(ops::attribute_index(LAZYLAB_OP_AvgPool2d, "count_include_pad") == 3);
  CHECK(ops::attribute_index(LAZYLAB_OP_AvgPool2d, "dilations") == -1);
  CHECK(ops::attribute_index(LAZYLAB_OP_AvgPool2d, "pad") == -1);  // a prefix of "pads" is not it
  CHECK(ops::attribute_index(LAZYLAB_OP_Add, "strides") == -1);
}

TEST_CASE("window_shape reads a convolution's and the pools' geometry from their values and attributes") {
  SUBCASE("a grouped, dilated convolution, padded unevenly") {
    Context ctx;
    Tensor x = ctx.placeholder(TensorType{DType::F32, {2, 8, 20, 21}});
    Tensor w = ctx.placeholder(TensorType{DType::F32, {12, 2, 3, 2}});
    Tensor y = conv2d(x, w, Window2d{{1, 2}, {2, 0, 1, 3}, {2, 1}}, 4);
    windows::WindowShape s = geometry_of(ctx);
    CHECK(s.images == 2);
    CHECK(s.channels == 8);
    CHECK(s.height == 20);
    CHECK(s.width == 21);
    CHECK(s.filters == 12);
    CHECK(s.kernel[0] == 3);
    CHECK(s.kernel[1] == 2);
    CHECK(s.stride[1] == 2);
    CHECK(s.pad[0] == 2);
    CHECK(s.pad[3] == 3);
    CHECK(s.dilation[0] == 2);
    CHECK(s.groups == 4);
    CHECK(s.out_h == 19);  // (20 + 3 - 2 * 2 - 1) / 1 + 1
    CHECK(s.out_w == 12);  // (21 + 3 - 1 - 1) / 2 + 1
    CHECK(s.taps() == 2 * 3 * 2);
    CHECK(s.group_filters() == 3);
    CHECK_FALSE(s.pointwise());
  }
  SUBCASE("a pointwise convolution: the input is its own unfolded matrix") {
    Context ctx;
    Tensor x = ctx.placeholder(TensorType{DType::F32, {1, 4, 5, 5}});
    Tensor w = ctx.placeholder(TensorType{DType::F32, {6, 4, 1, 1}});
    Tensor y = conv2d(x, w);
    CHECK(geometry_of(ctx).pointwise());
  }
  SUBCASE("a max pool's window, strides, padding and dilations; an average pool's divisor") {
    Context ctx;
    Tensor x = ctx.placeholder(TensorType{DType::F32, {1, 3, 9, 9}});
    Tensor y = max_pool2d(x, {3, 2}, Window2d{{2, 1}, {1, 0, 1, 1}, {1, 2}});
    windows::WindowShape s = geometry_of(ctx);
    CHECK(s.kernel[0] == 3);
    CHECK(s.kernel[1] == 2);
    CHECK(s.stride[0] == 2);
    CHECK(s.pad[2] == 1);
    CHECK(s.dilation[1] == 2);
    CHECK(s.groups == 1);
    CHECK(s.filters == 3);
    CHECK_FALSE(s.count_include_pad);
    Context other;
    Tensor z = other.placeholder(TensorType{DType::F32, {1, 3, 9, 9}});
    Tensor averages = avg_pool2d(z, {2, 2}, Window2d{{2, 2}, {0, 0, 1, 1}, {1, 1}}, true);
    windows::WindowShape a = geometry_of(other);
    CHECK(a.count_include_pad);
    CHECK(a.dilation[0] == 1);  // an average pool has none: 1
    CHECK(a.out_h == 5);
  }
}
