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

// The keys of an attention block, laid out [d][keys] for the scores' tiles.
struct KeysByDimension {
  const float* data;
  int64_t stride;  // between two dimensions' rows
};

// k's rows [keys][d] (k_stride apart) written as `out` [d][keys]: the one
// copy the scores' tiles need, where k is not given as [d, n] already.
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
