#include "core/tensor_type.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace lazylab {

std::string to_string(const Dims& dims) { return fmt::format("[{}]", fmt::join(dims, ",")); }

std::string to_string(const TensorType& type) {
  return fmt::format("{}{}", dtype_name(type.dtype), to_string(type.shape));
}

}  // namespace lazylab
