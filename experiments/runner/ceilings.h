// The machine's ceilings, measured by lazylab itself at the start of a run
// (the machines are shared: ratios are only meaningful within one run).
#pragma once

#include <string>

namespace lazylab {

struct Ceilings {
  double copy_gb_s = 0;          // bytes read + written per second, all hardware threads
  double elementwise_gop_s = 0;  // simple f32 ops on data in registers (elementwise_peak.h)
  double sgemm_gflop_s = 0;      // OpenBLAS sgemm at 1024^3; 0 when OpenBLAS cannot be opened
  std::string blas;              // the OpenBLAS build and kernels measured, or why none was
  std::string blas_core;         // OpenBLAS's name for those kernels ("SkylakeX"); empty without OpenBLAS
  std::string method;            // how they were measured, or where they were pinned from
};

Ceilings measure_ceilings();

}  // namespace lazylab
