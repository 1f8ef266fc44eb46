#include "convolution_source.h"

#include <fmt/format.h>

#include <algorithm>

#include "lazylab/dtype_table.hpp"
#include "lazylab/window_shape.hpp"
#include "product_types.h"
#include "source_text.h"

namespace lazylab::cuda {
namespace {

using windows::WindowShape;

uint64_t columns_bytes_of(const lazylab_program& program, const lazylab_op& op) {
  WindowShape s = windows::window_shape(program.values, op);
  if (s.pointwise()) return 0;
  return static_cast<uint64_t>(s.images * s.taps() * s.positions()) * dtypes::size(program.values[op.result].dtype);
}

}  // namespace

std::optional<std::string> convolution_product_refusal(const lazylab_program& program, const lazylab_op& op) {
  WindowShape s = windows::window_shape(program.values, op);
  uint32_t dtype = program.values[op.result].dtype;
  if (s.groups != 1) return fmt::format("a convolution in {} groups runs as the direct kernel", s.groups);
  if (!product_types(dtype, false))
    return fmt::format("cuBLASLt multiplies f32, bf16 and f16, not {}: the direct kernel", dtypes::name(dtype));
  if (program.values[op.operands[0]].dtype != dtype || program.values[op.operands[1]].dtype != dtype)
    return std::string("a convolution of mixed dtypes runs as the direct kernel");
  if (s.images * s.filters * s.positions() == 0 || s.taps() == 0)
    return std::string("a convolution of no elements or over no taps runs as the direct kernel");
  if (s.images > INT32_MAX) return std::string("more images than cuBLASLt's batch count takes: the direct kernel");
  if (uint64_t bytes = columns_bytes_of(program, op); bytes > kMaxColumnsBytes)
    return fmt::format("its unfolded windows would take {} MiB: the direct kernel", bytes >> 20);
  return std::nullopt;
}

ConvolutionProduct convolution_product(const lazylab_program& program, const lazylab_op& op, uint32_t columns) {
  WindowShape s = windows::window_shape(program.values, op);
  ConvolutionProduct product;
  product.columns_bytes = columns_bytes_of(program, op);
  lazylab_contraction& c = product.contraction;
  c.matmul = op.result;
  c.lhs = op.operands[1];  // [O, C, KH, KW]: [O, taps] row-major
  c.rhs = product.columns_bytes ? columns : op.operands[0];
  c.batch = s.images;
  c.m = s.filters;
  c.n = s.positions();
  c.k = s.taps();
  return product;
}

std::string unfold_function(const lazylab_program& program, const lazylab_op& op, uint32_t columns,
                            const std::string& name, Launch& launch) {
  WindowShape s = windows::window_shape(program.values, op);
  const char* type = storage_type(program.values[op.result].dtype);
  const int64_t elements = s.images * s.taps() * s.positions();
  launch = Launch{name, {op.operands[0], columns}, elements};
  const IndexType index = index_type(std::max(elements, elements_of(program.values[op.operands[0]])));
  auto c = [&](int64_t value) { return index.literal(value); };
  // Element t of image n's [taps, positions]: tap (c, r, q) at output
  // position (i, j) reads x[n, c, i * stride - pad + r * dilation, ...].
  return fmt::format(
      "extern \"C\" __global__ void {0}(const {1}* __restrict__ x, {1}* __restrict__ columns, long long work) {{\n"
      "  for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < work;\n"
      "       t += (long long)blockDim.x * gridDim.x) {{\n"
      "    const {16} e = ({16})t;\n"
      "    const {16} p = e % {2}, k = (e / {2}) % {3}, n = e / ({2} * {3});\n"
      "    const {16} i = p / {4}, j = p % {4}, q = k % {5}, r = (k / {5}) % {6}, c = k / ({5} * {6});\n"
      "    const {16} y = i * {7} - {8} + r * {9}, z = j * {10} - {11} + q * {12};\n"
      "    columns[t] = (y >= 0 && y < {13} && z >= 0 && z < {14}) ? x[((n * {15} + c) * {13} + y) * {14} + z] : "
      "{1}(0.0f);\n"
      "  }}\n}}\n",
      name, type, c(s.positions()), c(s.taps()), c(s.out_w), c(s.kernel[1]), c(s.kernel[0]), c(s.stride[0]),
      c(s.pad[0]), c(s.dilation[0]), c(s.stride[1]), c(s.pad[1]), c(s.dilation[1]), c(s.height), c(s.width),
      c(s.channels), index.name());
}

}  // namespace lazylab::cuda
