#include "core/tensor_type.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace lazylab {

std::optional<int64_t> checked_elements(const Dims& shape, size_t element_bytes) {
  uint64_t limit = kMaxTensorBytes / (element_bytes ? element_bytes : 1);
  uint64_t n = 1;
  bool empty = false;
  for (int64_t d : shape) {
    if (d < 0) return std::nullopt;
    if (d == 0) empty = true;
  }
  // The non-zero dims are bounded even when another dim is 0: strides and
  // partial products are taken over them.
  for (int64_t d : shape) {
    if (d == 0) continue;
    if (static_cast<uint64_t>(d) > limit / n) return std::nullopt;
    n *= static_cast<uint64_t>(d);
  }
  return empty ? 0 : static_cast<int64_t>(n);
}

std::string size_problem(const TensorType& type) {
  for (int64_t d : type.shape)
    if (d < 0) return fmt::format("{} has a negative dimension", to_string(type));
  if (!checked_elements(type.shape, dtype_size(type.dtype)))
    return fmt::format("{} has more than {} bytes (2^56), the most a tensor may have", to_string(type),
                       kMaxTensorBytes);
  return "";
}

std::string to_string(const Dims& dims) { return fmt::format("[{}]", fmt::join(dims, ",")); }

std::string to_string(const TensorType& type) {
  return fmt::format("{}{}", dtype_name(type.dtype), to_string(type.shape));
}

std::string describe_bytes(uint64_t bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(units)) value /= 1024, ++unit;
  if (unit == 0) return fmt::format("{} bytes", bytes);
  return fmt::format("{:.1f} {} ({} bytes)", value, units[unit], bytes);
}

}  // namespace lazylab
