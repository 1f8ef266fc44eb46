// The machine's ceilings, measured by lazylab itself at the start of a run
// (the machines are shared: ratios are only meaningful within one run).
#pragma once

#include <memory>
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

// The copy and sgemm probes behind the ceilings, one trial at a time:
// measure_ceilings keeps the best of several at the start of a run, and a
// workload's rounds take one of each a round (runner.cpp), so that a cell's
// floor can also be read under the conditions its own steps ran in.
class HostProbe {
 public:
  HostProbe();
  HostProbe(const HostProbe&) = delete;
  HostProbe& operator=(const HostProbe&) = delete;
  ~HostProbe();

  double copy_gb_s();      // one parallel 64 MiB stream_copy, one slice per hardware thread
  double sgemm_gflop_s();  // one OpenBLAS 1024^3 sgemm; 0 without OpenBLAS

 private:
  struct Buffers;
  std::unique_ptr<Buffers> buffers_;
};

}  // namespace lazylab
