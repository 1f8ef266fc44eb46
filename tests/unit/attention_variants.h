// Attention graphs for the attention kernel's tests: shapes on and off its
// tiles (128 rows, 64 keys, head dims padded to 8 and 16), and every way
// the pattern may be written: k transposed in the graph or given as [d, n];
// the scale before or after a causal mask built as ge or le of two iotas.
// Each graph has two attention kernels' worth: one masked, one not, with
// their own q and k and the same v.
#pragma once

#include <cmath>
#include <limits>
#include <vector>

#include "core/tensor.h"
#include "core/tensor_ops.h"

namespace lazylab::testing {

struct AttentionShape {
  Dims q;  // [batch..., m, d]
  int64_t n, dv;
};

inline const std::vector<AttentionShape> kAttentionShapes = {
    {{2, 1, 4}, 3, 4},         {{2, 63, 64}, 63, 64},     {{3, 129, 40}, 129, 24},
    {{2, 2, 200, 64}, 77, 64}, {{1, 300, 128}, 300, 128}, {{1, 130, 100}, 65, 7},
};
inline constexpr int kAttentionVariants = 4;

inline std::vector<Tensor> attention_variant(Context& ctx, int variant, const AttentionShape& shape) {
  Dims k_shape = shape.q, v_shape = shape.q;
  size_t rank = shape.q.size();
  int64_t m = shape.q[rank - 2];
  bool k_rows = variant % 2 == 0;  // k [.., n, d], transposed in the graph; else [.., d, n]
  if (k_rows) {
    k_shape[rank - 2] = shape.n;
  } else {
    k_shape[rank - 2] = shape.q[rank - 1];
    k_shape[rank - 1] = shape.n;
  }
  v_shape[rank - 2] = shape.n;
  v_shape[rank - 1] = shape.dv;
  auto random = [&](const Dims& dims, double seed) {
    std::vector<float> data(TensorType{DType::F32, dims}.num_elements());
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(std::sin(0.37 * i + seed) * 2.0);
    return ctx.from_vector(data, dims);
  };
  auto scores = [&](double seed) {
    Tensor q = random(shape.q, seed), k = random(k_shape, seed + 1);
    return k_rows ? matmul(q, transpose(k, -1, -2)) : matmul(q, k);
  };
  Tensor masked = scores(1), plain = scores(3);
  TensorType positions{DType::I32, {m, shape.n}};
  Tensor causal = variant < 2 ? ge(ctx.iota(positions, 0), ctx.iota(positions, 1))
                              : le(ctx.iota(positions, 1), ctx.iota(positions, 0));
  Tensor minus_inf = full_like(masked, -std::numeric_limits<double>::infinity());
  Tensor logits = variant < 2 ? where(causal, masked * 0.3, minus_inf) : where(causal, masked, minus_inf) * 0.3;
  Tensor v = random(v_shape, 5);
  return {matmul(softmax(logits, -1), v), matmul(softmax(plain * 0.2, -1), v)};
}

}  // namespace lazylab::testing
