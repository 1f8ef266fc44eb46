// Attention graphs for the attention kernel's tests: shapes on and off its
// tiles (128 rows, 64 keys, head dims padded to 8 and 16), and every way
// the pattern may be written: k transposed in the graph or given as [d, n];
// the scale (a power of two or not, a product or a division) before or
// after a causal mask built as ge or le of two iotas; the last a mask of
// data, filling where it is true.
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
    {{2, 1, 4}, 3, 4},         {{2, 63, 64}, 63, 64},  {{3, 129, 40}, 129, 24},   {{2, 2, 200, 64}, 77, 64},
    {{1, 300, 128}, 300, 128}, {{1, 130, 100}, 65, 7}, {{2, 3, 96, 64}, 136, 32},
};
inline constexpr int kAttentionVariants = 5;

// The scale of the variant's masked or unmasked attention: powers of two in
// variants 2 and 3 (a 16-bit kernel then rounds the scores once, not twice).
inline double attention_scale(int variant, bool masked) {
  if (variant < 2) return masked ? 0.3 : 0.2;
  if (variant == 4) return masked ? 0.3 : 0.125;
  return masked ? 0.25 : 0.125;
}

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
  Tensor minus_inf = full_like(masked, -std::numeric_limits<double>::infinity());
  Tensor v = random(v_shape, 5);
  if (variant == 4) {  // a mask of data, masking where true (GPT-2's ONNX graph), key 0 never
    std::vector<float> r(static_cast<size_t>(m * shape.n));
    for (size_t i = 0; i < r.size(); ++i) r[i] = i % shape.n == 0 ? 1.f : static_cast<float>(std::sin(0.7 * i));
    Tensor data = ctx.from_vector(r, {m, shape.n});
    Tensor hidden = lt(data, full_like(data, -0.3));
    Tensor logits = where(hidden, minus_inf, masked * attention_scale(variant, true));
    return {matmul(softmax(logits, -1), v), matmul(softmax(plain * attention_scale(variant, false), -1), v)};
  }
  TensorType positions{DType::I32, {m, shape.n}};
  Tensor causal = variant < 2 ? ge(ctx.iota(positions, 0), ctx.iota(positions, 1))
                              : le(ctx.iota(positions, 1), ctx.iota(positions, 0));
  double scale = attention_scale(variant, true);
  Tensor logits = variant < 2 ? where(causal, masked * scale, minus_inf) : where(causal, masked, minus_inf) * scale;
  // Variant 3 divides by 8, as ONNX models write the scale.
  Tensor scaled = variant == 3 ? plain / 8.0 : plain * attention_scale(variant, false);
  return {matmul(softmax(logits, -1), v), matmul(softmax(scaled, -1), v)};
}

// Attention over heads split from projections' rows, as models write it:
// q, k and v sliced from one [batch, seq, 3 heads d] tensor, k transposed
// after its split (GPT-2's), or each a [batch, seq, heads d] of its own, k
// split and transposed in one permute (BERT's); the scores divided by
// sqrt(d) or causally masked and scaled; the output's heads merged back
// into [batch, seq, heads d]. Packed, the parts start `lead` values in: the
// last shape's 4, off 16-bit kernels' 16-byte rows.
struct HeadsShape {
  int64_t batch, seq, heads, d, lead = 0;
};
inline const std::vector<HeadsShape> kHeadsShapes = {
    {2, 37, 3, 16}, {1, 128, 12, 64}, {2, 130, 2, 128}, {1, 20, 2, 8, 4}};

inline Tensor attention_heads(Context& ctx, bool packed, bool causal, const HeadsShape& s) {
  const int64_t width = s.heads * s.d;
  auto random = [&](const Dims& dims, double seed) {
    std::vector<float> data(TensorType{DType::F32, dims}.num_elements());
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(std::sin(0.37 * i + seed) * 2.0);
    return ctx.from_vector(data, dims);
  };
  Tensor q, k, v;
  if (packed) {
    Tensor x = random({s.batch, s.seq, s.lead + 3 * width}, 1);
    auto part = [&](int64_t i) {
      return slice(x, {0, 0, s.lead + i * width}, {s.batch, s.seq, s.lead + (i + 1) * width});
    };
    q = part(0), k = part(1), v = part(2);
  } else {
    q = random({s.batch, s.seq, width}, 1), k = random({s.batch, s.seq, width}, 2),
    v = random({s.batch, s.seq, width}, 3);
  }
  auto heads = [&](const Tensor& t) { return reshape(t, {s.batch, s.seq, s.heads, s.d}); };
  Tensor kt = packed ? transpose(transpose(heads(k), 1, 2), -1, -2) : permute(heads(k), {0, 2, 3, 1});
  Tensor scores = matmul(transpose(heads(q), 1, 2), kt);
  Tensor logits = scores / std::sqrt(static_cast<double>(s.d));
  if (causal) {
    TensorType positions{DType::I32, {s.seq, s.seq}};
    Tensor minus_inf = full_like(scores, -std::numeric_limits<double>::infinity());
    logits = where(ge(ctx.iota(positions, 0), ctx.iota(positions, 1)), scores, minus_inf) * 0.25;
  }
  Tensor out = matmul(softmax(logits, -1), transpose(heads(v), 1, 2));
  return reshape(transpose(out, 1, 2), {s.batch, s.seq, width});
}

}  // namespace lazylab::testing
