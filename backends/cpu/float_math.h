// The primitives of the op formulas (lazylab/op_formulas.hpp) for the cpu
// backend's value types: one float, and one SIMD vector of the widest ISA
// this plugin is built for (GCC vector types; SLEEF's 1.0-ULP exp, log, tanh
// and pow, scalar libm without AVX2 or AVX-512; exp inline on AVX-512). The
// row loops and register runs instantiate every formula from these two.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>

#include "lazylab/op_formulas.hpp"

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#include <sleef.h>
#endif

namespace lazylab::cpu {

#if defined(__AVX512F__)
inline constexpr int kLanes = 16;
#elif defined(__AVX2__)
inline constexpr int kLanes = 8;
#else
inline constexpr int kLanes = 4;
#endif
using Vec = float __attribute__((vector_size(kLanes * sizeof(float))));
using Mask = int __attribute__((vector_size(kLanes * sizeof(float))));

// Vectors from and to float arrays of any alignment.
inline Vec load_vector(const float* p) {
  Vec v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store_vector(float* p, Vec v) { std::memcpy(p, &v, sizeof v); }
// `s` in every lane, its sign kept: not `Vec{} + s`, which adds +0 and so
// turns a -0 into +0 (1 / -0 then came out +inf).
inline Vec splat(float s) {
  Vec v;
  for (int i = 0; i < kLanes; ++i) v[i] = s;
  return v;
}

// max and min propagate NaN, as the reference defines them: x + y is NaN
// when either is.
template <class T>
inline T max_nan(T x, T y) {
  return (x != x) | (y != y) ? x + y : (x > y ? x : y);
}
template <class T>
inline T min_nan(T x, T y) {
  return (x != x) | (y != y) ? x + y : (x < y ? x : y);
}

// The arithmetic both value types write the same way.
template <class T, class P>
struct ArithmeticMath {
  using Value = T;
  using Predicate = P;
  static T neg(T x) { return -x; }
  static T add(T a, T b) { return a + b; }
  static T sub(T a, T b) { return a - b; }
  static T mul(T a, T b) { return a * b; }
  static T div(T a, T b) { return a / b; }
  static T max(T a, T b) { return max_nan(a, b); }
  static T min(T a, T b) { return min_nan(a, b); }
  static P eq(T a, T b) { return a == b; }
  static P ne(T a, T b) { return a != b; }
  static P lt(T a, T b) { return a < b; }
  static P le(T a, T b) { return a <= b; }
  static P gt(T a, T b) { return a > b; }
  static P ge(T a, T b) { return a >= b; }
  static T select(P c, T a, T b) { return c ? a : b; }
};

struct FloatMath : ArithmeticMath<float, bool> {
  static float constant(double v) { return static_cast<float>(v); }
  static float abs(float x) { return std::fabs(x); }
  static float exp(float x) { return std::exp(x); }
  static float log(float x) { return std::log(x); }
  static float sqrt(float x) { return std::sqrt(x); }
  static float tanh(float x) { return std::tanh(x); }
  static float erf(float x) { return std::erf(x); }
  static float pow(float a, float b) { return std::pow(a, b); }
  static float from_predicate(bool c) { return c ? 1.0f : 0.0f; }
};

#if defined(__AVX512F__)
// exp inline rather than SLEEF's out-of-line call (Debian's SLEEF 3.5 has no
// inline header): a register run then holds softmax's exp(x - max) without
// spilling its strip around a call, and the exp itself is a quarter cheaper.
// x = n ln2 + r with |r| <= ln2 / 2 (ln2 in two parts, Cody-Waite), e^r by a
// polynomial of degree 6 fitted for the least greatest relative error there
// (4.4e-9 with its coefficients rounded to float; Taylor's series needed
// degree 7 for that), 2^n by vscalefps, which rounds subnormal results and
// saturates to 0 and inf. A NaN passes through the clamp (min and max return
// their second operand where either is NaN) and every step after it. Every
// float in [-110, 89] came within one ulp of exp rounded from double in an
// exhaustive sweep.
// (The masked forms with every lane set: GCC 12's unmasked ones warn about
// their own undefined pass-through operand.)
inline __m512 exp_avx512(__m512 x) {
  constexpr __mmask16 kAll = 0xffff;
  __m512 clamped =
      _mm512_mask_max_ps(x, kAll, _mm512_set1_ps(-104.0f), _mm512_mask_min_ps(x, kAll, _mm512_set1_ps(89.0f), x));
  __m512 n = _mm512_mask_roundscale_ps(x, kAll, _mm512_mul_ps(clamped, _mm512_set1_ps(1.44269504088896341f)),
                                       _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), clamped);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187045e-06f), r);
  __m512 p = _mm512_set1_ps(0.0013814467f);
  for (float coefficient : {0.0083687808f, 0.041668393f, 0.16666520f, 0.49999994f, 1.0f, 1.0f})
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(coefficient));
  return _mm512_mask_scalef_ps(p, kAll, p, n);
}
inline constexpr bool kExpInline = true;
#else
inline constexpr bool kExpInline = false;
#endif

struct VectorMath : ArithmeticMath<Vec, Mask> {
  static Vec constant(double v) { return splat(static_cast<float>(v)); }
  // a * b + c with one rounding.
  static Vec fma(Vec a, Vec b, Vec c) {
#if defined(__AVX512F__)
    return std::bit_cast<Vec>(
        _mm512_fmadd_ps(std::bit_cast<__m512>(a), std::bit_cast<__m512>(b), std::bit_cast<__m512>(c)));
#elif defined(__FMA__)
    return std::bit_cast<Vec>(
        _mm256_fmadd_ps(std::bit_cast<__m256>(a), std::bit_cast<__m256>(b), std::bit_cast<__m256>(c)));
#else
    for (int i = 0; i < kLanes; ++i) a[i] = std::fma(a[i], b[i], c[i]);
    return a;
#endif
  }
  static Vec abs(Vec x) { return std::bit_cast<Vec>(std::bit_cast<Mask>(x) & 0x7fffffff); }
  static Vec sqrt(Vec x) {
#if defined(__AVX512F__)
    return std::bit_cast<Vec>(_mm512_sqrt_ps(std::bit_cast<__m512>(x)));
#elif defined(__AVX2__)
    return std::bit_cast<Vec>(_mm256_sqrt_ps(std::bit_cast<__m256>(x)));
#else
    return lanes(x, FloatMath::sqrt);
#endif
  }
#if defined(__AVX512F__)
  static Vec exp(Vec x) { return std::bit_cast<Vec>(exp_avx512(std::bit_cast<__m512>(x))); }
  static Vec log(Vec x) { return call(Sleef_logf16_u10avx512f, x); }
  static Vec tanh(Vec x) { return call(Sleef_tanhf16_u10avx512f, x); }
  static Vec erf(Vec x) { return call(Sleef_erff16_u10avx512f, x); }
  static Vec pow(Vec a, Vec b) {
    return std::bit_cast<Vec>(Sleef_powf16_u10avx512f(std::bit_cast<__m512>(a), std::bit_cast<__m512>(b)));
  }
#elif defined(__AVX2__)
  static Vec exp(Vec x) { return call(Sleef_expf8_u10avx2, x); }
  static Vec log(Vec x) { return call(Sleef_logf8_u10avx2, x); }
  static Vec tanh(Vec x) { return call(Sleef_tanhf8_u10avx2, x); }
  static Vec erf(Vec x) { return call(Sleef_erff8_u10avx2, x); }
  static Vec pow(Vec a, Vec b) {
    return std::bit_cast<Vec>(Sleef_powf8_u10avx2(std::bit_cast<__m256>(a), std::bit_cast<__m256>(b)));
  }
#else
  static Vec exp(Vec x) { return lanes(x, FloatMath::exp); }
  static Vec log(Vec x) { return lanes(x, FloatMath::log); }
  static Vec tanh(Vec x) { return lanes(x, FloatMath::tanh); }
  static Vec erf(Vec x) { return lanes(x, FloatMath::erf); }
  static Vec pow(Vec a, Vec b) {
    for (int i = 0; i < kLanes; ++i) a[i] = std::pow(a[i], b[i]);
    return a;
  }
#endif
  static Vec from_predicate(Mask c) { return c ? constant(1) : constant(0); }

 private:
  template <class F>
  static Vec lanes(Vec x, F f) {
    for (int i = 0; i < kLanes; ++i) x[i] = f(x[i]);
    return x;
  }
  template <class F>
  static Vec call(F f, Vec x) {
#if defined(__AVX512F__)
    return std::bit_cast<Vec>(f(std::bit_cast<__m512>(x)));
#elif defined(__AVX2__)
    return std::bit_cast<Vec>(f(std::bit_cast<__m256>(x)));
#else
    return lanes(x, f);
#endif
  }
};

// Which formulas call out of line (SLEEF, libm): a register run keeps its
// strip in registers only across inline arithmetic; and which go beyond add,
// mul and their kin, too costly to compute twice rather than store once.
// Found by evaluating the formula on this probe, so no list of ops is kept
// here.
struct CallProbe {
  using Value = int;
  using Predicate = int;
  bool calls = false;
  bool costly = false;
  int constant(double) { return 0; }
  int neg(int) { return 0; }
  int abs(int) { return 0; }
  int sqrt(int) { return costly = true, 0; }
  int exp(int) { return costly = true, calls = calls || !kExpInline, 0; }
  int log(int) { return costly = calls = true, 0; }
  int tanh(int) { return costly = calls = true, 0; }
  int erf(int) { return costly = calls = true, 0; }
  int pow(int, int) { return costly = calls = true, 0; }
  int add(int, int) { return 0; }
  int sub(int, int) { return 0; }
  int mul(int, int) { return 0; }
  int div(int, int) { return costly = true, 0; }
  int max(int, int) { return 0; }
  int min(int, int) { return 0; }
  int eq(int, int) { return 0; }
  int ne(int, int) { return 0; }
  int lt(int, int) { return 0; }
  int le(int, int) { return 0; }
  int gt(int, int) { return 0; }
  int ge(int, int) { return 0; }
  int select(int, int, int) { return 0; }
  int from_predicate(int) { return 0; }
};

inline CallProbe probe_formula(uint32_t op) {
  CallProbe probe;
  int out = 0;
  if (!formulas::unary(probe, op, 0, out)) formulas::binary(probe, op, 0, 0, out);
  return probe;
}

inline bool formula_calls_out(uint32_t op) { return probe_formula(op).calls; }
inline bool formula_is_cheap(uint32_t op) { return !probe_formula(op).costly; }

}  // namespace lazylab::cpu
