// Division of many floats by one divisor as a product with its reciprocal
// plus one correction (Markstein: q + (a - q d) / d, the remainder exact by
// FMA), which rounds as the division does wherever the quotient is a normal
// number: one division a row (softmax's normalisation) instead of one a
// vector, which bounded the loops that divide.
#pragma once

#include <cmath>

#include "float_math.h"

namespace lazylab::cpu {

// Where the product with the reciprocal cannot overflow (|divisor| >= 1)
// nor lose bits to a subnormal reciprocal; elsewhere divide.
inline bool divides_by_product(float divisor) {
  float reciprocal = 1.0f / divisor;
  return std::isnormal(divisor) && std::isnormal(reciprocal) && std::fabs(divisor) >= 1.0f;
}

// x / d, given r = 1 / d and divides_by_product(d).
inline Vec quotient_by_product(Vec x, Vec r, Vec d) {
  VectorMath math;
  Vec q = x * r;
  Vec remainder = math.fma(-q, d, x);
  // No remainder: q is exact (and keeps a zero's sign); a NaN one: x is
  // infinite, and so is q.
#if defined(__AVX512DQ__)
  // Zero or NaN in one classification rather than two compares and an or.
  constexpr int kZeroOrNaN = 0x01 | 0x02 | 0x04 | 0x80;  // quiet NaN, +0, -0, signalling NaN
  __m512 q512 = std::bit_cast<__m512>(q);
  __mmask16 exact = _mm512_fpclass_ps_mask(std::bit_cast<__m512>(remainder), kZeroOrNaN);
  return std::bit_cast<Vec>(_mm512_mask_blend_ps(
      exact, _mm512_fmadd_ps(std::bit_cast<__m512>(remainder), std::bit_cast<__m512>(r), q512), q512));
#else
  Mask exact = (remainder == 0) | (remainder != remainder);
  return exact ? q : math.fma(remainder, r, q);
#endif
}

inline float quotient_by_product(float x, float r, float d) {
  float q = x * r;
  float remainder = std::fma(-q, d, x);
  return remainder == 0 || remainder != remainder ? q : std::fma(remainder, r, q);
}

// out[i] = in[i] / divisor for i < n, each element through `store(out + i,
// quotient)` for vectors and `out[i] = quotient` for the rest.
template <class StoreVector>
void divide_each(float* out, const float* in, float divisor, int64_t n, int64_t i, StoreVector store) {
  if (!divides_by_product(divisor)) {
    Vec d = splat(divisor);
    for (; i + kLanes <= n; i += kLanes) store(out + i, load_vector(in + i) / d);
    for (; i < n; ++i) out[i] = in[i] / divisor;
    return;
  }
  float reciprocal = 1.0f / divisor;
  Vec r = splat(reciprocal), d = splat(divisor);
  for (; i + kLanes <= n; i += kLanes) store(out + i, quotient_by_product(load_vector(in + i), r, d));
  for (; i < n; ++i) out[i] = quotient_by_product(in[i], reciprocal, divisor);
}

}  // namespace lazylab::cpu
