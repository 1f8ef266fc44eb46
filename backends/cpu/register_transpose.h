#pragma once
// A 16 x 16 block of floats turned over in AVX-512 registers: the attention
// products' key panels and the layout plan's transposes.
#if defined(__AVX512F__)
#include <immintrin.h>

#include <cstdint>

#include "vector_lanes.h"

namespace lazylab::cpu {

// Row r of the result is column r of the 16 rows given.
inline void transpose_16x16(__m512 rows[16]) {
  __m512 t[16];
  for (int i = 0; i < 8; ++i) {  // pairs of rows interleaved
    t[2 * i] = _mm512_unpacklo_ps(rows[2 * i], rows[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(rows[2 * i], rows[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {  // then pairs of pairs, as doubles
    __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 2]);
    __m512d c = _mm512_castps_pd(t[4 * i + 1]), d = _mm512_castps_pd(t[4 * i + 3]);
    rows[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
    rows[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
    rows[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(c, d));
    rows[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(c, d));
  }
  for (int i = 0; i < 4; ++i) {  // then 128-bit quarters, twice
    t[i] = _mm512_shuffle_f32x4(rows[i], rows[i + 4], 0x88);
    t[i + 4] = _mm512_shuffle_f32x4(rows[i], rows[i + 4], 0xdd);
    t[i + 8] = _mm512_shuffle_f32x4(rows[i + 8], rows[i + 12], 0x88);
    t[i + 12] = _mm512_shuffle_f32x4(rows[i + 8], rows[i + 12], 0xdd);
  }
  for (int i = 0; i < 8; ++i) {
    rows[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
    rows[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
  }
}

}  // namespace lazylab::cpu
#endif
