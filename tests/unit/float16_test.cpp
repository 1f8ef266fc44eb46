// bf16 and f16 (lazylab/float16.hpp): conversions round to nearest, ties to
// even, once from double; subnormals, infinities and NaN kept.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "lazylab/float16.hpp"

using namespace lazylab;

namespace {

uint16_t bf16_bits(double v) { return BFloat16(v).bits; }
uint16_t f16_bits(double v) { return Float16(v).bits; }
double bf16_value(uint16_t bits) { return static_cast<double>(BFloat16::from_bits(bits)); }
double f16_value(uint16_t bits) { return static_cast<double>(Float16::from_bits(bits)); }

// bf16 is the top half of an f32: every f32 whose low half is zero is one.
double f32_of_bits(uint32_t bits) { return static_cast<double>(std::bit_cast<float>(bits)); }

}  // namespace

TEST_CASE("bf16 values: exact ones, ties to even, the range's ends") {
  CHECK(bf16_bits(1.0) == 0x3f80);
  CHECK(bf16_bits(-2.0) == 0xc000);
  CHECK(bf16_bits(0.0) == 0x0000);
  CHECK(bf16_bits(-0.0) == 0x8000);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: the even one, 1.
  CHECK(bf16_bits(1.0 + std::ldexp(1.0, -8)) == 0x3f80);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6: up.
  CHECK(bf16_bits(1.0 + 3 * std::ldexp(1.0, -8)) == 0x3f82);
  // Just above a tie rounds up, however little: from f64 directly, where
  // rounding to f32 first would make it a tie and round down.
  CHECK(bf16_bits(1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40)) == 0x3f81);
  CHECK(static_cast<float>(1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40)) == 1.0f + std::ldexp(1.0f, -8));
  // The largest finite, and what rounds past it.
  CHECK(bf16_value(0x7f7f) == f32_of_bits(0x7f7f0000));
  CHECK(bf16_bits(f32_of_bits(0x7f7f0000)) == 0x7f7f);
  CHECK(bf16_bits(f32_of_bits(0x7f7f8000)) == 0x7f80);  // a tie to even: infinity
  CHECK(bf16_bits(1e300) == 0x7f80);
  CHECK(bf16_bits(-1e300) == 0xff80);
  // Subnormals (f32's), and below half the least one.
  CHECK(bf16_value(0x0001) == std::ldexp(1.0, -133));
  CHECK(bf16_bits(std::ldexp(1.0, -133)) == 0x0001);
  CHECK(bf16_bits(std::ldexp(1.0, -134)) == 0x0000);                          // a tie: even, zero
  CHECK(bf16_bits(std::ldexp(1.0, -134) + std::ldexp(1.0, -160)) == 0x0001);  // above it
  CHECK(bf16_bits(std::ldexp(1.0, -126) - std::ldexp(1.0, -140)) == 0x0080);  // up to the least normal
}

TEST_CASE("f16 values: IEEE binary16's, from exact ones to subnormals and overflow") {
  CHECK(f16_bits(1.0) == 0x3c00);
  CHECK(f16_bits(-2.5) == 0xc100);
  CHECK(f16_bits(65504.0) == 0x7bff);
  CHECK(f16_bits(65519.99) == 0x7bff);
  CHECK(f16_bits(65520.0) == 0x7c00);  // halfway to 2^16: ties to even, infinity
  CHECK(f16_value(0x0001) == std::ldexp(1.0, -24));
  CHECK(f16_value(0x03ff) == std::ldexp(1023.0, -24));
  CHECK(f16_bits(std::ldexp(1.0, -25)) == 0x0000);
  CHECK(f16_bits(std::ldexp(3.0, -26)) == 0x0001);
  CHECK(f16_bits(std::ldexp(3.0, -25)) == 0x0002);  // 1.5 units: to the even 2
  CHECK(f16_bits(1.0 / 3.0) == 0x3555);
  CHECK(f16_bits(0.1) == 0x2e66);
}

TEST_CASE("NaN and infinities survive both ways; every 16-bit value converts back to itself") {
  double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  CHECK(std::isnan(static_cast<double>(BFloat16(nan))));
  CHECK(std::isnan(static_cast<double>(Float16(-nan))));
  CHECK(std::signbit(static_cast<double>(Float16(-nan))));
  CHECK(std::isnan(static_cast<float>(BFloat16(std::numeric_limits<float>::signaling_NaN()))));
  CHECK(static_cast<double>(BFloat16(inf)) == inf);
  CHECK(static_cast<double>(Float16(-inf)) == -inf);
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    auto b = static_cast<uint16_t>(bits);
    double bv = bf16_value(b), fv = f16_value(b);
    if (std::isnan(bv)) {
      CHECK(std::isnan(bf16_value(bf16_bits(bv))));
    } else {
      CHECK(bf16_bits(bv) == b);
      CHECK(bv == f32_of_bits(bits << 16));  // bf16 is f32's top half
    }
    if (std::isnan(fv))
      CHECK(std::isnan(f16_value(f16_bits(fv))));
    else
      REQUIRE(f16_bits(fv) == b);
  }
}

TEST_CASE("every f32 rounds into bf16 as the nearest-even rule on its bits says") {
  // bf16 is f32 with the low 16 bits rounded off: check a spread of f32s.
  for (uint64_t bits = 0; bits <= 0xffffffffu; bits += 0x10001 * 7 + 3) {
    auto f = static_cast<uint32_t>(bits);
    float v = std::bit_cast<float>(f);
    if (std::isnan(v)) continue;
    uint32_t low = f & 0xffff, high = f >> 16;
    uint32_t want = low > 0x8000 || (low == 0x8000 && (high & 1)) ? high + 1 : high;
    REQUIRE(bf16_bits(v) == want);
  }
}

TEST_CASE("integers convert in and out") {
  CHECK(static_cast<int>(BFloat16(257)) == 256);  // 257 is a tie between 256 and 258: even
  CHECK(static_cast<int>(BFloat16(259)) == 260);
  CHECK(static_cast<long long>(Float16(-7.75)) == -7);
  CHECK(static_cast<bool>(BFloat16(0.0)) == false);
  CHECK(static_cast<double>(Float16(true)) == 1.0);
}
