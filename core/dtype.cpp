#include "core/dtype.h"

namespace lazylab {

std::optional<DType> parse_dtype(std::string_view text) {
  for (DType dtype : kAllDTypes)
    if (dtype_name(dtype) == text) return dtype;
  return std::nullopt;
}

}  // namespace lazylab
