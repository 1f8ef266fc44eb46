// The dtype table (dtypes.def) as plugins and lazylab see it: each dtype's
// name, element size, kind and exchange codes, and one visitor that gives
// code the dtype's storage type, so that a loop over "every dtype" is written
// once, for a type parameter, instead of as a switch per site.
// Header-only, C++20.
#ifndef LAZYLAB_DTYPE_TABLE_HPP
#define LAZYLAB_DTYPE_TABLE_HPP

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "lazylab/backend_abi.h"
#include "lazylab/float16.hpp"

namespace lazylab::dtypes {

enum class Kind : uint8_t { Float, Int, Bool };

struct Row {
  const char* name;
  size_t size;  // bytes an element
  Kind kind;
  uint8_t dlpack_code;
  int32_t onnx_type;
  const char* npy_descr;  // "": none
  double rtol, atol;      // the least tolerance of a check against the reference
};

inline constexpr uint32_t kCount = LAZYLAB_DTYPE_COUNT;

namespace detail {
inline constexpr Row kTable[kCount] = {
#define LAZYLAB_DTYPE(abi, core, name, Storage, kind, dlpack, onnx, npy, rtol, atol) \
  {name, sizeof(Storage), Kind::kind, dlpack, onnx, npy, rtol, atol},
#include "lazylab/dtypes.def"
#undef LAZYLAB_DTYPE
};
}  // namespace detail

constexpr bool known(uint32_t dtype) { return dtype < kCount; }

// The row of a known dtype (one of the table's: check with known() first
// where the id comes from outside).
constexpr const Row& row(uint32_t dtype) { return detail::kTable[dtype]; }
constexpr const char* name(uint32_t dtype) { return known(dtype) ? row(dtype).name : "?"; }
constexpr size_t size(uint32_t dtype) { return row(dtype).size; }
constexpr Kind kind(uint32_t dtype) { return row(dtype).kind; }
constexpr bool is_float(uint32_t dtype) { return known(dtype) && row(dtype).kind == Kind::Float; }

// Calls f(Storage{}) with the dtype's storage type (its element in memory: a
// bool is a uint8_t) and returns what it returns; every row's call must
// compile. An id outside the table throws std::invalid_argument.
template <class F>
constexpr decltype(auto) visit(uint32_t dtype, F&& f) {
  switch (dtype) {
#define LAZYLAB_DTYPE(abi, core, name, Storage, ...) \
  case LAZYLAB_##abi:                                \
    return std::forward<F>(f)(Storage{});
#include "lazylab/dtypes.def"
#undef LAZYLAB_DTYPE
  }
  throw std::invalid_argument("dtype " + std::to_string(dtype) + " is not in lazylab's dtype table");
}

// The dtype whose storage is T (T must be one; a second dtype stored alike
// would need a type of its own).
template <class T>
constexpr uint32_t of() {
  constexpr uint32_t found = [] {
    uint32_t id = kCount;
#define LAZYLAB_DTYPE(abi, core, name, Storage, ...) \
  if (id == kCount && std::is_same_v<T, Storage>) id = LAZYLAB_##abi;
#include "lazylab/dtypes.def"
#undef LAZYLAB_DTYPE
    return id;
  }();
  static_assert(found != kCount, "no dtype of the table is stored as this type");
  return found;
}

}  // namespace lazylab::dtypes

#endif
