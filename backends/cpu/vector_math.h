// Vectorised exp, log, tanh and sigmoid over float arrays through SLEEF
// (1.0-ULP variants), for the widest ISA this plugin is compiled for; scalar
// libm for the tail and on machines with neither AVX2 nor AVX-512.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#include <sleef.h>
#endif

namespace lazylab::cpu {

enum class VectorFn { Exp, Log, Tanh, Sigmoid };

inline float scalar_fn(VectorFn fn, float x) {
  switch (fn) {
    case VectorFn::Exp: return std::exp(x);
    case VectorFn::Log: return std::log(x);
    case VectorFn::Tanh: return std::tanh(x);
    case VectorFn::Sigmoid: return 1.0f / (1.0f + std::exp(-x));
  }
  return x;
}

// out may alias in.
inline void vector_fn(VectorFn fn, float* out, const float* in, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  const __m512 one = _mm512_set1_ps(1.0f);
  for (; i + 16 <= n; i += 16) {
    __m512 x = _mm512_loadu_ps(in + i), y;
    switch (fn) {
      case VectorFn::Exp: y = Sleef_expf16_u10avx512f(x); break;
      case VectorFn::Log: y = Sleef_logf16_u10avx512f(x); break;
      case VectorFn::Tanh: y = Sleef_tanhf16_u10avx512f(x); break;
      default:
        y = _mm512_div_ps(one, _mm512_add_ps(one, Sleef_expf16_u10avx512f(_mm512_sub_ps(_mm512_setzero_ps(), x))));
    }
    _mm512_storeu_ps(out + i, y);
  }
#elif defined(__AVX2__)
  const __m256 one = _mm256_set1_ps(1.0f);
  for (; i + 8 <= n; i += 8) {
    __m256 x = _mm256_loadu_ps(in + i), y;
    switch (fn) {
      case VectorFn::Exp: y = Sleef_expf8_u10avx2(x); break;
      case VectorFn::Log: y = Sleef_logf8_u10avx2(x); break;
      case VectorFn::Tanh: y = Sleef_tanhf8_u10avx2(x); break;
      default: y = _mm256_div_ps(one, _mm256_add_ps(one, Sleef_expf8_u10avx2(_mm256_sub_ps(_mm256_setzero_ps(), x))));
    }
    _mm256_storeu_ps(out + i, y);
  }
#endif
  for (; i < n; ++i) out[i] = scalar_fn(fn, in[i]);
}

}  // namespace lazylab::cpu
