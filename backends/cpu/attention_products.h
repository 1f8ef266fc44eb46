// The two products of an attention block, on AVX-512 register tiles that
// read q, k and v where they lie. OpenBLAS packs both operands of every call
// into its own layout first; at an attention block's sizes (256 x 256 x 64 a
// head) that packing was about a fifth of the products' time, since each
// operand is used by one call only.
#pragma once

#include <cstdint>

namespace lazylab::cpu {

// Whether this build has the tiles (AVX-512F); without them the attention
// plan calls OpenBLAS, and nothing below is defined.
#if defined(__AVX512F__)
inline constexpr bool kHasAttentionProducts = true;
#else
inline constexpr bool kHasAttentionProducts = false;
#endif

// The keys of an attention block by dimension, for the scores' tiles: panels
// of kKeyPanel keys, each [d][kKeyPanel] (`stride` between two dimensions'
// rows, `panel_stride` between two panels).
inline constexpr int64_t kKeyPanel = 64;
struct KeysByDimension {
  const float* data;
  int64_t stride, panel_stride;
};

// Floats that transpose_keys writes for `keys` keys of d dimensions.
inline int64_t transposed_keys_floats(int64_t keys, int64_t d) {
  return (keys + kKeyPanel - 1) / kKeyPanel * kKeyPanel * d;
}

// k's rows [keys][d] (k_stride apart) written to `out` as panels, each
// contiguous: the one copy the scores' tiles need, where k is not given as
// [d, n] already. (Rows [d][keys] a power of two apart fell into a few of
// L1's sets, and the tiles reading them missed L1.)
KeysByDimension transpose_keys(const float* k, int64_t keys, int64_t d, int64_t k_stride, float* out);

// scores[i][j] = scale * sum_t q[i][t] * keys[t][j] for `rows` rows of q
// (d floats each, q_stride apart) and `keys` columns; scores rows are `keys`
// apart. One rounding of the sum, then the scale, as sgemm's alpha.
void scaled_scores(const float* q, int64_t rows, int64_t d, int64_t q_stride, KeysByDimension keys, int64_t count,
                   float scale, float* scores);

// out[i][c] = (sum_j p[i][j] * v[j][c]) / sums[i] for `rows` rows of p
// (`keys` floats each, contiguous) and dv columns of v (rows dv apart); out
// rows are dv apart.
void weighted_values(const float* p, int64_t rows, int64_t keys, const float* v, int64_t dv, const float* sums,
                     float* out);

}  // namespace lazylab::cpu
