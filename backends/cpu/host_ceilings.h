// The host's ceilings as the cpu backend measures them (ABI 3.12,
// lazylab_host_ceilings): the copy rate of all hardware threads writing past
// the caches as the cpu's kernels write large outputs, simple f32 ops in
// registers (elementwise_peak.h), and OpenBLAS's sgemm on the kernels this
// backend runs. The runner reads a host-memory cell's floor against them.
#pragma once

#include <cstddef>
#include <memory>

#include "lazylab/backend_plugin.hpp"
#include "openblas_runtime.h"

namespace lazylab::cpu {

// Copies n floats, storing past the caches, and fences the stores (so a
// thread that joins the copying one sees them).
void copy_past_caches(float* out, const float* in, size_t n);

// Holds the probes' buffers (64 MiB twice, three 1024^2 matrices) from the
// first measurement on, so that a quick one a timed round allocates nothing.
class HostCeilingsProbe {
 public:
  // `blas` null: no sgemm rate, and `no_blas` says why. `blas_threads` is
  // what the backend runs OpenBLAS at, restored after each sgemm trial
  // (the ceiling is the machine's: every hardware thread).
  HostCeilingsProbe(const openblas::Runtime* blas, std::string no_blas, int blas_threads);
  HostCeilingsProbe(const HostCeilingsProbe&) = delete;
  HostCeilingsProbe& operator=(const HostCeilingsProbe&) = delete;
  ~HostCeilingsProbe();

  // The best of several trials of each, or with `quick` one trial of the
  // copy and the sgemm (no elementwise rate).
  plugin::HostCeilings measure(bool quick);

 private:
  double copy_gb_s();
  double sgemm_gflop_s();

  struct Buffers;
  std::unique_ptr<Buffers> buffers_;
  const openblas::Runtime* blas_;
  std::string no_blas_;
  int blas_threads_;
};

}  // namespace lazylab::cpu
