// The 16-bit floating-point storage types of the dtype table: bf16 (8
// exponent bits, 7 stored significand bits: f32's range) and f16 (IEEE
// binary16: 5 and 10). A value is its 16 bits; it converts to and from any
// arithmetic type through double: into the format rounding to nearest, ties
// to even, once (never through f32, which would round twice), with
// subnormals, infinities and NaN kept (a NaN stays a NaN, quiet, with its
// sign and its payload's top bits). Computing is the caller's: convert, work
// in f32 or f64, store.
// Header-only, C++20, constexpr throughout.
#ifndef LAZYLAB_FLOAT16_HPP
#define LAZYLAB_FLOAT16_HPP

#include <bit>
#include <cstdint>
#include <type_traits>

namespace lazylab {
namespace float16_detail {

// A 16-bit format: 1 sign bit, ExponentBits, then SignificandBits stored.
template <int ExponentBits, int SignificandBits>
struct Format {
  static constexpr int kBias = (1 << (ExponentBits - 1)) - 1;
  static constexpr uint16_t kExponentMask = (1u << ExponentBits) - 1;
  static constexpr uint16_t kInfinity = kExponentMask << SignificandBits;
  static constexpr uint16_t kSignificandMask = (1u << SignificandBits) - 1;
  static constexpr int kDropped = 52 - SignificandBits;  // of double's stored bits

  // The double nearest-even rounded into the format.
  static constexpr uint16_t from_double(double v) {
    uint64_t bits = std::bit_cast<uint64_t>(v);
    auto sign = static_cast<uint16_t>((bits >> 63) << 15);
    int exponent = static_cast<int>((bits >> 52) & 0x7ff);
    uint64_t fraction = bits & ((uint64_t{1} << 52) - 1);
    if (exponent == 0x7ff)  // infinity, or NaN made quiet
      return sign | kInfinity | (fraction ? (1u << (SignificandBits - 1)) | (fraction >> kDropped) : 0);
    if (exponent == 0) return sign;  // zero, or a double subnormal: far below half the least 16-bit subnormal
    int biased = exponent - 1023 + kBias;
    // The significand with its leading one, and how many of its low bits the
    // format drops: more below the normal range (a subnormal's step is fixed).
    uint64_t significand = fraction | (uint64_t{1} << 52);
    int shift = biased >= 1 ? kDropped : kDropped + 1 - biased;
    if (shift > 53) return sign;  // under half the least subnormal
    uint64_t kept = significand >> shift, rest = significand & ((uint64_t{1} << shift) - 1);
    uint64_t half = uint64_t{1} << (shift - 1);
    if (rest > half || (rest == half && (kept & 1))) ++kept;
    if (biased < 1) return sign | static_cast<uint16_t>(kept);  // a subnormal, or rounded up to the least normal
    if (kept >> (SignificandBits + 1)) {                        // rounded up to the next power of two
      kept >>= 1;
      ++biased;
    }
    if (biased >= kExponentMask) return sign | kInfinity;
    return sign | static_cast<uint16_t>(biased << SignificandBits) | static_cast<uint16_t>(kept & kSignificandMask);
  }

  // The format's value as a double (exact: every value is one).
  static constexpr double to_double(uint16_t h) {
    uint64_t sign = static_cast<uint64_t>(h >> 15) << 63;
    int exponent = (h >> SignificandBits) & kExponentMask;
    uint64_t significand = h & kSignificandMask;
    if (exponent == kExponentMask)
      return std::bit_cast<double>(sign | (uint64_t{0x7ff} << 52) | (significand << kDropped));
    if (exponent == 0) {
      if (significand == 0) return std::bit_cast<double>(sign);
      exponent = 1;  // normalise the subnormal
      while (!(significand >> SignificandBits)) {
        significand <<= 1;
        --exponent;
      }
      significand &= kSignificandMask;
    }
    return std::bit_cast<double>(sign | (uint64_t(exponent - kBias + 1023) << 52) | (significand << kDropped));
  }
};

// A value of a 16-bit format, with explicit conversions to and from every
// arithmetic type (a float into an integer truncates toward zero, as
// static_cast does; the caller keeps it in range).
template <class Self, class F>
struct Value16 {
  uint16_t bits = 0;

  constexpr Value16() = default;
  template <class A>
  requires std::is_arithmetic_v<A>
  constexpr explicit Value16(A v) : bits(F::from_double(static_cast<double>(v))) {}
  template <class A>
  requires std::is_arithmetic_v<A>
  constexpr explicit operator A() const { return static_cast<A>(F::to_double(bits)); }
  static constexpr Self from_bits(uint16_t bits) {
    Self value;
    value.bits = bits;
    return value;
  }
};

}  // namespace float16_detail

struct BFloat16 : float16_detail::Value16<BFloat16, float16_detail::Format<8, 7>> {
  using Value16::Value16;
};
struct Float16 : float16_detail::Value16<Float16, float16_detail::Format<5, 10>> {
  using Value16::Value16;
};
static_assert(sizeof(BFloat16) == 2 && sizeof(Float16) == 2 && std::is_trivially_copyable_v<BFloat16>);

}  // namespace lazylab

#endif
