// Element types: lazylab::DType is the dtype table's (dtypes.def) id, with
// its facts read through lazylab/dtype_table.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "lazylab/backend_abi.h"
#include "lazylab/dtype_table.hpp"

namespace lazylab {

enum class DType : uint8_t {
#define LAZYLAB_DTYPE(abi, core, ...) core = LAZYLAB_##abi,
#include "lazylab/dtypes.def"
#undef LAZYLAB_DTYPE
};

inline constexpr DType kAllDTypes[] = {
#define LAZYLAB_DTYPE(abi, core, ...) DType::core,
#include "lazylab/dtypes.def"
#undef LAZYLAB_DTYPE
};

constexpr uint32_t dtype_id(DType dtype) { return static_cast<uint32_t>(dtype); }
inline std::string_view dtype_name(DType dtype) { return dtypes::name(dtype_id(dtype)); }
std::optional<DType> parse_dtype(std::string_view text);
inline size_t dtype_size(DType dtype) { return dtypes::size(dtype_id(dtype)); }
inline bool is_float(DType dtype) { return dtypes::is_float(dtype_id(dtype)); }
// Every value of `from` is a value of `to` (a cast from -> to -> from gives
// each value back): a wider float (bf16 and f16 in f32, anything in f64),
// a wider integer, an integer within a float's significand, a bool anywhere.
bool holds_every_value(DType from, DType to);

// The DType whose storage is T (dtypes.def's Storage column).
template <class T>
constexpr DType dtype_of() {
  return static_cast<DType>(dtypes::of<T>());
}

// A value as the dtype stores it: rounded to a float dtype's nearest (ties
// to even); an integer or bool dtype's value is the caller's to convert.
inline double round_to(DType dtype, double value) {
  if (!is_float(dtype)) return value;
  return dtypes::visit(dtype_id(dtype), [&]<class T>(T) { return static_cast<double>(static_cast<T>(value)); });
}

// Calls f(Storage{}) with the dtype's storage type (dtype_table.hpp).
template <class F>
decltype(auto) visit_dtype(DType dtype, F&& f) {
  return dtypes::visit(dtype_id(dtype), std::forward<F>(f));
}

}  // namespace lazylab
