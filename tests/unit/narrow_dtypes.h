// A program of every kind of kernel in bf16, f16, i8 and u8 (elementwise
// chains, row and column reductions, products, composites, layout, window
// and scatter ops, casts; rows of a multiple of four, which move four
// 16-bit values at a time), its results cast to f32 to compare: code
// generation compiles it and the GPU runs it as the interpreter does.
#pragma once

#include <vector>

#include "core/tensor_ops.h"

namespace lazylab::testing {

inline std::vector<Tensor> narrow_dtype_program(Context& ctx) {
  Tensor x = ctx.from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  std::vector<Tensor> out;
  auto f32 = [](const Tensor& t) { return cast(t, DType::F32); };
  for (DType dtype : {DType::BF16, DType::F16}) {
    Tensor h = cast(x * 0.37, dtype);
    Tensor w = cast(ctx.full(0.5, TensorType{DType::F32, {2, 1, 2, 2}}), dtype);
    Tensor image = reshape(h, {1, 1, 2, 3});
    // Rows of a multiple of four: four 16-bit values a load and a store.
    std::vector<float> waves(8 * 64);
    for (size_t i = 0; i < waves.size(); ++i) waves[i] = static_cast<float>((i * 29) % 31) * 0.125f - 1.9f;
    Tensor wide = cast(ctx.from_vector(waves, {8, 64}), dtype);
    Tensor row_weight = cast(ctx.full(0.75, TensorType{DType::F32, {64}}), dtype);
    out.insert(out.end(), {
                              f32(exp(h) * h + 1.0),
                              f32(sum(h, {1})),
                              f32(max(h, {0})),
                              f32(mean(h, {0, 1})),
                              f32(matmul(h, transpose(h, 0, 1))),
                              f32(softmax(h, 1)),
                              f32(layernorm(h, cast(ctx.full(0.5, TensorType{DType::F32, {3}}), dtype),
                                            cast(ctx.full(0.25, TensorType{DType::F32, {3}}), dtype))),
                              f32(gelu(h)),
                              f32(where(gt(h, cast(ctx.full(1.0, x.type()), dtype)), h, neg(h))),
                              f32(concat({h, exp(h)}, 0)),
                              f32(gather(h, ctx.from_vector<int64_t>({1, -2, 0}, {3}), 1)),
                              f32(pad(h, {1, 0}, {0, 2}, 0.75)),
                              f32(scatter_add(h, ctx.from_vector<int64_t>({1, 0}, {2}),
                                              cast(ctx.full(0.25, TensorType{DType::F32, {2, 2}}), dtype), 1)),
                              f32(conv2d(image, w, {{1, 1}, {1, 0, 0, 1}, {1, 1}})),
                              f32(max_pool2d(image, {2, 2}, {{1, 1}, {1, 1, 1, 1}, {1, 1}})),
                              f32(avg_pool2d(image, {2, 2}, {{1, 1}, {1, 1, 1, 1}, {1, 1}}, true)),
                              f32(transpose(h, 0, 1)),
                              f32(cast(h * 10.0, DType::I32)),
                              f32(cast(cast(x, dtype), dtype == DType::BF16 ? DType::F16 : DType::BF16)),
                              f32(exp(wide) * wide + 1.0),
                              f32(softmax(wide, 1)),
                              f32(layernorm(wide, row_weight, row_weight)),
                              f32(sum(wide * wide, {1})),
                          });
  }
  for (DType dtype : {DType::I8, DType::U8}) {
    Tensor n = cast(x * 21.0, dtype);  // 21 .. 126
    out.insert(out.end(), {
                              f32(n * n + n),  // wraps
                              f32(sum(n, {1})),
                              f32(max(n, {0})),
                              f32(min(n, {0, 1})),
                              f32(div(n, cast(ctx.full(4, x.type()), dtype))),
                              f32(matmul(n, transpose(n, 0, 1))),
                              f32(where(lt(n, cast(ctx.full(70, x.type()), dtype)), n, n - n)),
                              f32(ctx.iota(TensorType{dtype, {3, 4}}, 1)),
                          });
  }
  return out;
}

}  // namespace lazylab::testing
