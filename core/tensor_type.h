// Static tensor types: a dtype and a shape. A different shape is a different
// graph.
#pragma once

#include <boost/container/small_vector.hpp>
#include <cstdint>
#include <optional>
#include <string>

#include "dtype.h"

namespace lazylab {

using Dims = boost::container::small_vector<int64_t, 6>;

// The most bytes one tensor may have: small enough that element counts,
// strides, offsets and byte sizes computed in int64 never overflow, even
// summed over many values. Backends and engines set lower limits of their own
// (EngineOptions).
inline constexpr uint64_t kMaxTensorBytes = uint64_t{1} << 56;

struct TensorType {
  DType dtype = DType::F32;
  Dims shape;

  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  // Only for types that passed check_size (every node's type did: type
  // inference checks each one); unchecked shapes use checked_elements.
  int64_t num_elements() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  uint64_t bytes() const { return static_cast<uint64_t>(num_elements()) * dtype_size(dtype); }
  bool operator==(const TensorType&) const = default;
};

// The element count of `shape`, or nullopt when a dim is negative or the
// count (times `element_bytes`) would exceed kMaxTensorBytes. An empty shape
// (a 0 dim) counts its other dims too, so that no stride overflows.
std::optional<int64_t> checked_elements(const Dims& shape, size_t element_bytes = 1);

// An error message when `type` is too large to represent (naming its shape),
// or empty.
std::string size_problem(const TensorType& type);

// "16.0 GiB (17179869184 bytes)", for messages about memory.
std::string describe_bytes(uint64_t bytes);

// "f32[4,8]"; a scalar prints as "f32[]".
std::string to_string(const TensorType& type);
std::string to_string(const Dims& dims);

}  // namespace lazylab
