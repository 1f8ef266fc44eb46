// The 16-bit floats of the dtype table (bf16, f16) as the cpu's loops and
// products see them: stored as 16 bits, computed in f32. Widening is exact;
// narrowing rounds to nearest even once, keeping subnormals, infinities and
// NaN (quiet, its payload's top bits kept), as lazylab/float16.hpp converts.
// bf16 by integer arithmetic on SIMD vectors (AVX-512 BF16's conversion
// flushes subnormals, which the reference keeps); f16 by F16C's conversions
// (IEEE, subnormals kept) where the build has them; float16.hpp's scalar
// conversion for the rest and for tails.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

#include "float_math.h"
#include "lazylab/backend_abi.h"
#include "lazylab/float16.hpp"

namespace lazylab::cpu {

inline bool is_narrow_float(uint32_t dtype) { return dtype == LAZYLAB_BF16 || dtype == LAZYLAB_F16; }
// The dtypes the cpu's plans compute in f32: f32, and the 16-bit floats.
inline bool computes_in_f32(uint32_t dtype) { return dtype == LAZYLAB_F32 || is_narrow_float(dtype); }

namespace narrow_detail {

using Bits = uint32_t __attribute__((vector_size(kLanes * sizeof(uint32_t))));
using Halves = uint16_t __attribute__((vector_size(kLanes * sizeof(uint16_t))));

inline float widen_bf16(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

inline uint16_t narrow_bf16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

inline Vec widen_bf16(Halves h) { return std::bit_cast<Vec>(__builtin_convertvector(h, Bits) << 16); }

inline Halves narrow_bf16(Vec v) {
  Bits u = std::bit_cast<Bits>(v);
  Bits rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  Bits quiet_nan = (u >> 16) | 0x40u;
  Bits result = (u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded;
  return __builtin_convertvector(result, Halves);
}

inline float widen_f16(uint16_t h) { return static_cast<float>(Float16::from_bits(h)); }
inline uint16_t narrow_f16(float f) { return Float16(f).bits; }

#if defined(__AVX512F__)
inline Vec widen_f16(Halves h) { return std::bit_cast<Vec>(_mm512_cvtph_ps(std::bit_cast<__m256i>(h))); }
inline Halves narrow_f16(Vec v) {
  return std::bit_cast<Halves>(_mm512_cvtps_ph(std::bit_cast<__m512>(v), _MM_FROUND_TO_NEAREST_INT));
}
constexpr bool kVectorF16 = true;
#elif defined(__F16C__) && defined(__AVX2__)
inline Vec widen_f16(Halves h) { return std::bit_cast<Vec>(_mm256_cvtph_ps(std::bit_cast<__m128i>(h))); }
inline Halves narrow_f16(Vec v) {
  return std::bit_cast<Halves>(_mm256_cvtps_ph(std::bit_cast<__m256>(v), _MM_FROUND_TO_NEAREST_INT));
}
constexpr bool kVectorF16 = true;
#else
inline Vec widen_f16(Halves h) {
  Vec v;
  for (int i = 0; i < kLanes; ++i) v[i] = widen_f16(h[i]);
  return v;
}
inline Halves narrow_f16(Vec v) {
  Halves h;
  for (int i = 0; i < kLanes; ++i) h[i] = narrow_f16(v[i]);
  return h;
}
constexpr bool kVectorF16 = false;
#endif

inline Halves load_halves(const uint16_t* p) {
  Halves h;
  std::memcpy(&h, p, sizeof h);
  return h;
}
inline void store_halves(uint16_t* p, Halves h) { std::memcpy(p, &h, sizeof h); }

// Format: the 16-bit dtype's scalar and vector conversions.
struct BF16Format {
  static float widen(uint16_t h) { return widen_bf16(h); }
  static uint16_t narrow(float f) { return narrow_bf16(f); }
  static Vec widen(Halves h) { return widen_bf16(h); }
  static Halves narrow(Vec v) { return narrow_bf16(v); }
};
struct F16Format {
  static float widen(uint16_t h) { return widen_f16(h); }
  static uint16_t narrow(float f) { return narrow_f16(f); }
  static Vec widen(Halves h) { return widen_f16(h); }
  static Halves narrow(Vec v) { return narrow_f16(v); }
};

template <class F>
void widen(const uint16_t* in, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) store_vector(out + i, F::widen(load_halves(in + i)));
  for (; i < n; ++i) out[i] = F::widen(in[i]);
}

template <class F>
void narrow(const float* in, uint16_t* out, int64_t n) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) store_halves(out + i, F::narrow(load_vector(in + i)));
  for (; i < n; ++i) out[i] = F::narrow(in[i]);
}

template <class F>
void round_in_place(float* x, int64_t n) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) store_vector(x + i, F::widen(F::narrow(load_vector(x + i))));
  for (; i < n; ++i) x[i] = F::widen(F::narrow(x[i]));
}

template <class Body>
void with_format(uint32_t dtype, const Body& body) {
  if (dtype == LAZYLAB_BF16)
    body(BF16Format{});
  else
    body(F16Format{});
}

}  // namespace narrow_detail

// n 16-bit values of `dtype` (bf16 or f16) as floats, exactly.
inline void widen(uint32_t dtype, const uint16_t* in, float* out, int64_t n) {
  narrow_detail::with_format(dtype, [&](auto format) { narrow_detail::widen<decltype(format)>(in, out, n); });
}

// n floats rounded into `dtype`'s 16 bits.
inline void narrow(uint32_t dtype, const float* in, uint16_t* out, int64_t n) {
  narrow_detail::with_format(dtype, [&](auto format) { narrow_detail::narrow<decltype(format)>(in, out, n); });
}

// n floats rounded to `dtype`'s precision, kept as floats: an op's result
// of that dtype, as the interpreter rounds each op's.
inline void round_to(uint32_t dtype, float* x, int64_t n) {
  narrow_detail::with_format(dtype, [&](auto format) { narrow_detail::round_in_place<decltype(format)>(x, n); });
}

inline float widen_one(uint32_t dtype, uint16_t h) {
  return dtype == LAZYLAB_BF16 ? narrow_detail::widen_bf16(h) : narrow_detail::widen_f16(h);
}
inline uint16_t narrow_one(uint32_t dtype, float f) {
  return dtype == LAZYLAB_BF16 ? narrow_detail::narrow_bf16(f) : narrow_detail::narrow_f16(f);
}
inline float round_one(uint32_t dtype, float f) { return widen_one(dtype, narrow_one(dtype, f)); }

}  // namespace lazylab::cpu
