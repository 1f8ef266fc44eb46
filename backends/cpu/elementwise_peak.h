// The machine's rate for simple elementwise f32 ops (add, mul, max) on data
// in registers, all hardware threads: the compute ceiling of fused
// elementwise kernels, as sgemm's rate is of contractions.
#pragma once

namespace lazylab::cpu {

// Element-ops per second / 1e9 (one op on one element counts one).
double measure_elementwise_gops();

}  // namespace lazylab::cpu
