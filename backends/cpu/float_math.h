// The primitives of the op formulas (lazylab/op_formulas.hpp) for the cpu
// backend's value types: one float, and one SIMD vector of the widest ISA
// this plugin is built for (GCC vector types; SLEEF's 1.0-ULP log, tanh and
// pow, scalar libm without AVX2 or AVX-512; exp inline on AVX-512 and AVX2,
// erf on AVX2, within an ulp; SLEEF's erf on AVX-512). The row loops and register runs instantiate every
// formula from these two.
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
#if defined(__AVX512F__)
  return Vec(_mm512_set1_ps(s));  // one broadcast (GCC built the loop's lanes one masked broadcast at a time)
#elif defined(__AVX2__)
  return Vec(_mm256_set1_ps(s));
#else
  Vec v;
  for (int i = 0; i < kLanes; ++i) v[i] = s;
  return v;
#endif
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
#if defined(__AVX512F__)
// The same in three instructions: vmaxps and vminps return their second
// operand for two zeros, equal values and NaNs, as x > y ? x : y does but
// for the NaN, which the masked add puts back. (GCC lowered the generic
// form through mask registers moved to and from general ones: a ResNet
// block's relu epilogue ran at a third of this speed.)
template <>
inline Vec max_nan(Vec x, Vec y) {
  __m512 a = __m512(x), b = __m512(y);
  return Vec(_mm512_mask_add_ps(_mm512_max_ps(a, b), _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q), a, b));
}
template <>
inline Vec min_nan(Vec x, Vec y) {
  __m512 a = __m512(x), b = __m512(y);
  return Vec(_mm512_mask_add_ps(_mm512_min_ps(a, b), _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q), a, b));
}
#endif

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
#elif defined(__AVX2__)
// The same exp on AVX2, which has no vscalefps: 2^n is two factors 2^(n/2)
// and 2^(n - n/2), each a normal float for n in [-150, 128], so the last
// product rounds a subnormal result once. Every float in [-110, 89] came
// within one ulp of exp rounded from double in an exhaustive sweep; NaN
// passes through the clamp (min and max return their second operand where
// either is NaN), infinities saturate to inf and 0. As fast as SLEEF's call
// alone, and a register run holds it.
inline __m256 exp_avx2(__m256 x) {
  __m256 clamped = _mm256_max_ps(_mm256_set1_ps(-104.0f), _mm256_min_ps(_mm256_set1_ps(89.0f), x));
  __m256 n = _mm256_round_ps(_mm256_mul_ps(clamped, _mm256_set1_ps(1.44269504088896341f)),
                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), clamped);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428606765330187045e-06f), r);
  __m256 p = _mm256_set1_ps(0.0013814467f);
  for (float coefficient : {0.0083687808f, 0.041668393f, 0.16666520f, 0.49999994f, 1.0f, 1.0f})
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(coefficient));
  __m256i k = _mm256_cvtps_epi32(n), half = _mm256_srai_epi32(k, 1);
  auto power_of_two = [](__m256i e) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(e, _mm256_set1_epi32(127)), 23));
  };
  return _mm256_mul_ps(_mm256_mul_ps(p, power_of_two(half)), power_of_two(_mm256_sub_epi32(k, half)));
}
inline constexpr bool kExpInline = true;

// erf inline on AVX2, twice as fast as SLEEF's call (4.1 against 2.0 ns a
// float on this machine's EPYC) and held by a register run: for |x| < 1,
// x + x q(x^2), q of degree 6; for 1 <= |x| < 4, 1 - e^(-x^2) h(u) with
// u = (|x| - 2.5) / 1.5 and h, of degree 12, erfc(x) e^(x^2); beyond, +-1.
// Both polynomials fitted by least relative error at Chebyshev nodes, their
// coefficients rounded to float. Every float in [0, 5] (and so its
// negation) came within one ulp of erf rounded from double in an
// exhaustive sweep; NaN stays NaN (its lanes take the first branch), -0
// stays -0.
inline __m256 erf_avx2(__m256 x) {
  __m256 sign = _mm256_and_ps(x, _mm256_set1_ps(-0.0f)), a = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x);
  __m256 t = _mm256_mul_ps(x, x), q = _mm256_set1_ps(7.847259257687256e-05f);
  for (float c : {-0.0008008189033716917f, 0.005188099108636379f, -0.026853691786527634f, 0.1128358244895935f,
                  -0.3761262595653534f, 0.12837916612625122f})
    q = _mm256_fmadd_ps(q, t, _mm256_set1_ps(c));
  __m256 near_zero = _mm256_fmadd_ps(x, q, x);
  __m256 b = _mm256_min_ps(a, _mm256_set1_ps(4.0f));
  __m256 u = _mm256_fmadd_ps(b, _mm256_set1_ps(2.0f / 3.0f), _mm256_set1_ps(-5.0f / 3.0f));
  __m256 h = _mm256_set1_ps(1.2445649190340191e-05f);
  for (float c : {-3.665495023597032e-05f, 5.902049451833591e-05f, -0.0001446941023459658f, 0.0004099893558304757f,
                  -0.0010163813130930066f, 0.0024040043354034424f, -0.005567650310695171f, 0.01248917542397976f,
                  -0.027005670592188835f, 0.05611051619052887f, -0.11152100563049316f, 0.21080636978149414f})
    h = _mm256_fmadd_ps(h, u, _mm256_set1_ps(c));
  __m256 tail = _mm256_mul_ps(exp_avx2(_mm256_mul_ps(_mm256_xor_ps(b, _mm256_set1_ps(-0.0f)), b)), h);
  __m256 away = _mm256_or_ps(_mm256_sub_ps(_mm256_set1_ps(1.0f), tail), sign);
  __m256 result = _mm256_blendv_ps(near_zero, away, _mm256_cmp_ps(a, _mm256_set1_ps(1.0f), _CMP_GE_OQ));
  return _mm256_blendv_ps(result, _mm256_or_ps(_mm256_set1_ps(1.0f), sign),
                          _mm256_cmp_ps(a, _mm256_set1_ps(4.0f), _CMP_GE_OQ));
}
inline constexpr bool kErfInline = true;
#else
inline constexpr bool kExpInline = false;
#endif
#if !defined(__AVX2__) || defined(__AVX512F__)
inline constexpr bool kErfInline = false;
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
  static Vec exp(Vec x) { return std::bit_cast<Vec>(exp_avx2(std::bit_cast<__m256>(x))); }
  static Vec log(Vec x) { return call(Sleef_logf8_u10avx2, x); }
  static Vec tanh(Vec x) { return call(Sleef_tanhf8_u10avx2, x); }
  static Vec erf(Vec x) { return std::bit_cast<Vec>(erf_avx2(std::bit_cast<__m256>(x))); }
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
  int erf(int) { return costly = true, calls = calls || !kErfInline, 0; }
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
