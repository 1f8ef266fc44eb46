// A graph of integer constants at their dtypes' edges, and what each of its
// outputs must hold in every element on every backend: the most negative
// i64 over -1 wraps to itself (it was read as 0 when constants travelled as
// doubles), two i64s one double apart differ by 1, i32's largest plus one
// wraps, a pad's fill and a broadcast splat keep theirs exactly.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

namespace lazylab::testing {

inline constexpr const char* kIntegerEdgesGraph = R"(graph @edges {
  %min = constant {value = -9223372036854775808} : i64[20]
  %minus_one = constant {value = -1} : i64[20]
  %wrapped = div(%min, %minus_one) : i64[20]
  %big = constant {value = 9007199254740993} : i64[20]
  %near = constant {value = 9007199254740992} : i64[20]
  %difference = sub(%big, %near) : i64[20]
  %max32 = constant {value = 2147483647} : i32[20]
  %one32 = constant {value = 1} : i32[20]
  %wrapped32 = add(%max32, %one32) : i32[20]
  %widened = cast(%wrapped32) : i64[20]
  %x = parameter {ordinal = 0} : i64[20]
  %padded = pad(%x) {low = [2], high = [1], value = -9223372036854775807} : i64[23]
  %edge = slice(%padded) {start = [0], limit = [1], stride = [1]} : i64[1]
  %scalar = constant {value = -9223372036854775808} : i64[]
  %wide = broadcast(%scalar) {dims = []} : i64[20]
  %zero = sub(%x, %x) : i64[20]
  %splat = add(%wide, %zero) : i64[20]
  return %wrapped, %difference, %widened, %edge, %splat
})";

inline const std::vector<int64_t> kIntegerEdgesWant = {std::numeric_limits<int64_t>::min(), 1, -2147483648LL,
                                                       -9223372036854775807LL, std::numeric_limits<int64_t>::min()};

}  // namespace lazylab::testing
