// Reference op kernels: straightforward loops over row-major
// arrays, one op at a time, f64 accumulation in reductions and matmul. The
// interpreter is built from them; other backends fall back to them for ops
// they do not accelerate.
#pragma once

#include <cstdint>
#include <vector>

#include "lazylab/backend_abi.h"

namespace lazylab::reference {

struct Array {
  uint32_t dtype = LAZYLAB_F32;
  std::vector<int64_t> shape;
  void* data = nullptr;

  int64_t size() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

struct Attr {
  int64_t i = 0;
  double f = 0;
  std::vector<int64_t> ints;
};

// Evaluates op `op` into `out`; throws std::runtime_error for what the
// reference cannot compute (integer division by zero, an unknown op).
void evaluate(uint32_t op, const std::vector<const Array*>& operands, const std::vector<Attr>& attrs, Array& out);

}  // namespace lazylab::reference
