// A row reduction (reduce_max, reduce_min, reduce_sum, reduce_mean) of n
// contiguous floats, on SIMD vectors: the row kernels' and the attention
// kernel's.
#pragma once

#include <cstdint>

namespace lazylab::cpu {

// op: LAZYLAB_OP_ReduceMax, ReduceMin, ReduceSum or ReduceMean.
float reduce_row(uint32_t op, const float* x, int64_t n);

}  // namespace lazylab::cpu
