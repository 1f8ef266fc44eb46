// Static tensor types: a dtype and a shape. A different shape is a different
// graph.
#pragma once

#include <boost/container/small_vector.hpp>
#include <cstdint>
#include <string>

#include "core/dtype.h"

namespace lazylab {

using Dims = boost::container::small_vector<int64_t, 6>;

struct TensorType {
  DType dtype = DType::F32;
  Dims shape;

  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  int64_t num_elements() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  uint64_t bytes() const { return static_cast<uint64_t>(num_elements()) * dtype_size(dtype); }
  bool operator==(const TensorType&) const = default;
};

// "f32[4,8]"; a scalar prints as "f32[]".
std::string to_string(const TensorType& type);
std::string to_string(const Dims& dims);

}  // namespace lazylab
