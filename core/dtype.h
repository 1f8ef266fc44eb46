#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "lazylab/backend_abi.h"

namespace lazylab {

enum class DType : uint8_t {
  F32 = LAZYLAB_F32,
  F64 = LAZYLAB_F64,
  I32 = LAZYLAB_I32,
  I64 = LAZYLAB_I64,
  Bool = LAZYLAB_BOOL,
};

inline constexpr DType kAllDTypes[] = {DType::F32, DType::F64, DType::I32, DType::I64, DType::Bool};

std::string_view dtype_name(DType dtype);
std::optional<DType> parse_dtype(std::string_view text);
size_t dtype_size(DType dtype);
inline bool is_float(DType dtype) { return dtype == DType::F32 || dtype == DType::F64; }

}  // namespace lazylab
