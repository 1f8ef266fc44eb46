#include "attention_products.h"

#if defined(__AVX512F__)
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <utility>

#include "register_transpose.h"

namespace lazylab::cpu {
namespace {

constexpr int64_t kLanes = 16;
// The tiles' running sums: a vector type without __m512's may_alias, so the
// compiler may keep them in registers across a loop that loads floats.
using Sum = float __attribute__((vector_size(64)));
// Tiles that fit the 32 vector registers with their operands: scores 6 rows
// by 64 keys, one panel (24 sums), weighted values 6 rows by 64 columns (24
// sums).
constexpr int kScoreRows = 6, kScoreVectors = 4;
static_assert(kScoreVectors * kLanes == kKeyPanel, "a scores tile reads one panel of keys");
constexpr int kValueRows = 6, kValueVectors = 4;

template <int Vectors>
std::array<__mmask16, Vectors> column_masks(int64_t columns_left) {
  std::array<__mmask16, Vectors> masks;
  for (int v = 0; v < Vectors; ++v) masks[v] = first_lanes(columns_left - v * kLanes);
  return masks;
}

// A tile's columns: a plain load where the tile is whole. A masked load is a
// builtin the compiler cannot see into, so it would keep the running sums in
// memory across it.
template <bool Whole>
__m512 load_columns(const float* from, __mmask16 mask) {
  if constexpr (Whole) return _mm512_loadu_ps(from);
  return _mm512_maskz_loadu_ps(mask, from);
}

template <int Rows, bool Whole>
void scores_tile(const float* q, int64_t d, int64_t q_stride, KeysByDimension keys, int64_t columns_left, float scale,
                 float* scores, int64_t scores_stride) {
  auto masks = column_masks<kScoreVectors>(columns_left);
  Sum sums[Rows * kScoreVectors];
  for (int i = 0; i < Rows * kScoreVectors; ++i) sums[i] = _mm512_setzero_ps();
  for (int64_t t = 0; t < d; ++t) {
    const float* key_row = keys.data + t * keys.stride;
    __m512 b[kScoreVectors];
    for (int v = 0; v < kScoreVectors; ++v) b[v] = load_columns<Whole>(key_row + v * kLanes, masks[v]);
    for (int r = 0; r < Rows; ++r) {
      __m512 a = _mm512_set1_ps(q[r * q_stride + t]);
      for (int v = 0; v < kScoreVectors; ++v)
        sums[r * kScoreVectors + v] = _mm512_fmadd_ps(a, b[v], sums[r * kScoreVectors + v]);
    }
  }
  __m512 factor = _mm512_set1_ps(scale);
  for (int r = 0; r < Rows; ++r)
    for (int v = 0; v < kScoreVectors; ++v)
      _mm512_mask_storeu_ps(scores + r * scores_stride + v * kLanes, masks[v],
                            _mm512_mul_ps(sums[r * kScoreVectors + v], factor));
}

template <int Rows, bool Whole>
void values_tile(const float* p, int64_t keys, const float* v, int64_t dv, int64_t columns_left, const float* row_sums,
                 float* out) {
  auto masks = column_masks<kValueVectors>(columns_left);
  Sum sums[Rows * kValueVectors];
  for (int i = 0; i < Rows * kValueVectors; ++i) sums[i] = _mm512_setzero_ps();
  for (int64_t j = 0; j < keys; ++j) {
    const float* value_row = v + j * dv;
    __m512 b[kValueVectors];
    for (int c = 0; c < kValueVectors; ++c) b[c] = load_columns<Whole>(value_row + c * kLanes, masks[c]);
    for (int r = 0; r < Rows; ++r) {
      __m512 a = _mm512_set1_ps(p[r * keys + j]);
      for (int c = 0; c < kValueVectors; ++c)
        sums[r * kValueVectors + c] = _mm512_fmadd_ps(a, b[c], sums[r * kValueVectors + c]);
    }
  }
  for (int r = 0; r < Rows; ++r) {
    __m512 divisor = _mm512_set1_ps(row_sums[r]);
    for (int c = 0; c < kValueVectors; ++c)
      _mm512_mask_storeu_ps(out + r * dv + c * kLanes, masks[c], _mm512_div_ps(sums[r * kValueVectors + c], divisor));
  }
}

// A tile for each count of rows left at the bottom of a block, whole or
// at the columns' end.
template <class Tile, template <int, bool> class Make, bool Whole, int... R>
constexpr auto tiles_by_rows(std::integer_sequence<int, R...>) {
  return std::array<Tile, sizeof...(R)>{Make<R + 1, Whole>::tile...};
}
template <int Rows, bool Whole>
struct ScoresTileOf {
  static constexpr auto tile = &scores_tile<Rows, Whole>;
};
template <int Rows, bool Whole>
struct ValuesTileOf {
  static constexpr auto tile = &values_tile<Rows, Whole>;
};
template <bool Whole>
constexpr auto kScoresTiles =
    tiles_by_rows<decltype(&scores_tile<1, true>), ScoresTileOf, Whole>(std::make_integer_sequence<int, kScoreRows>());
template <bool Whole>
constexpr auto kValuesTiles =
    tiles_by_rows<decltype(&values_tile<1, true>), ValuesTileOf, Whole>(std::make_integer_sequence<int, kValueRows>());

}  // namespace

KeysByDimension transpose_keys(const float* k, int64_t keys, int64_t d, int64_t k_stride, float* out) {
  // Blocks of 16 keys by 16 dimensions, each turned over in registers.
  for (int64_t j = 0; j < keys; j += kLanes) {
    int64_t block_keys = std::min(kLanes, keys - j);
    __mmask16 key_mask = first_lanes(block_keys);
    for (int64_t t = 0; t < d; t += kLanes) {
      int64_t block_dims = std::min(kLanes, d - t);
      __mmask16 dim_mask = first_lanes(block_dims);
      __m512 rows[kLanes];
      for (int64_t r = 0; r < kLanes; ++r)
        rows[r] = r < block_keys ? _mm512_maskz_loadu_ps(dim_mask, k + (j + r) * k_stride + t) : _mm512_setzero_ps();
      transpose_16x16(rows);
      float* panel = out + j / kKeyPanel * kKeyPanel * d;
      for (int64_t r = 0; r < block_dims; ++r)
        _mm512_mask_storeu_ps(panel + (t + r) * kKeyPanel + j % kKeyPanel, key_mask, rows[r]);
    }
  }
  return {out, kKeyPanel, kKeyPanel * d};
}

void scaled_scores(const float* q, int64_t rows, int64_t d, int64_t q_stride, KeysByDimension keys, int64_t count,
                   float scale, float* scores) {
  // A panel of keys (d x 64 floats) stays in L1 while every row visits it.
  for (int64_t c = 0; c < count; c += kKeyPanel) {
    KeysByDimension block{keys.data + c / kKeyPanel * keys.panel_stride, keys.stride, keys.panel_stride};
    const auto& tiles = count - c >= kKeyPanel ? kScoresTiles<true> : kScoresTiles<false>;
    for (int64_t r = 0; r < rows; r += kScoreRows) {
      int64_t tile_rows = std::min<int64_t>(kScoreRows, rows - r);
      tiles[tile_rows - 1](q + r * q_stride, d, q_stride, block, count - c, scale, scores + r * count + c, count);
    }
  }
}

void weighted_values(const float* p, int64_t rows, int64_t keys, const float* v, int64_t dv, const float* sums,
                     float* out) {
  for (int64_t c = 0; c < dv; c += kValueVectors * kLanes) {
    const auto& tiles = dv - c >= kValueVectors * kLanes ? kValuesTiles<true> : kValuesTiles<false>;
    for (int64_t r = 0; r < rows; r += kValueRows) {
      int64_t tile_rows = std::min<int64_t>(kValueRows, rows - r);
      tiles[tile_rows - 1](p + r * keys, keys, v + c, dv, dv - c, sums + r, out + r * dv + c);
    }
  }
}

}  // namespace lazylab::cpu
#endif
