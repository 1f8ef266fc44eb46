#include "core/dtype.h"

#include <limits>
#include <type_traits>

namespace lazylab {
namespace {

// What a storage type can hold: significand bits (with the implicit one; an
// integer's value bits), and for floats the largest binary exponent and the
// exponent of the least subnormal.
struct Range {
  int digits = 0;
  bool is_signed = false;
  bool is_float = false;
  int max_exponent = 0;
  int least_exponent = 0;
};

template <class T>
constexpr Range range_of() {
  if constexpr (std::is_same_v<T, BFloat16>)
    return {8, true, true, 128, -133};
  else if constexpr (std::is_same_v<T, Float16>)
    return {11, true, true, 16, -24};
  else if constexpr (std::is_floating_point_v<T>) {
    using L = std::numeric_limits<T>;
    return {L::digits, true, true, L::max_exponent, L::min_exponent - L::digits};
  } else {
    using L = std::numeric_limits<T>;
    return {L::digits, L::is_signed, false, 0, 0};
  }
}

Range range_of(DType dtype) {
  return visit_dtype(dtype, []<class T>(T) { return range_of<T>(); });
}

}  // namespace

std::optional<DType> parse_dtype(std::string_view text) {
  for (DType dtype : kAllDTypes)
    if (dtype_name(dtype) == text) return dtype;
  return std::nullopt;
}

bool holds_every_value(DType from, DType to) {
  if (from == to || from == DType::Bool) return true;
  Range a = range_of(from), b = range_of(to);
  if (a.is_float && !b.is_float) return false;
  if (a.is_float)
    return b.digits >= a.digits && b.max_exponent >= a.max_exponent && b.least_exponent <= a.least_exponent;
  if (b.is_float) return b.digits >= a.digits;
  return b.digits >= a.digits && (b.is_signed || !a.is_signed);
}

}  // namespace lazylab
