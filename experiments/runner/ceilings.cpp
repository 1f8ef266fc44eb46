#include "ceilings.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "elementwise_peak.h"
#include "openblas_runtime.h"

namespace lazylab {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

constexpr int kCopyTrials = 10, kSgemmTrials = 4;

// Best of ten parallel memcpys of 64 MiB, one slice per hardware thread.
double measure_copy() {
  const size_t bytes = size_t{64} << 20;
  std::vector<char> source(bytes, 1), target(bytes, 0);
  unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  double best = 1e30;
  for (int trial = 0; trial < kCopyTrials; ++trial) {
    auto start = Clock::now();
    std::vector<std::thread> workers;
    size_t slice = bytes / threads;
    for (unsigned t = 0; t < threads; ++t)
      workers.emplace_back([&, t] { std::memcpy(target.data() + t * slice, source.data() + t * slice, slice); });
    for (std::thread& worker : workers) worker.join();
    best = std::min(best, seconds_since(start));
  }
  return 2.0 * static_cast<double>(bytes) / best / 1e9;
}

double measure_sgemm(const openblas::Runtime& blas) {
  const int n = 1024;
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n);
  double best = 1e30;
  for (int trial = 0; trial < kSgemmTrials; ++trial) {
    auto start = Clock::now();
    blas.sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    best = std::min(best, seconds_since(start));
  }
  return 2.0 * n * n * static_cast<double>(n) / best / 1e9;
}

}  // namespace

Ceilings measure_ceilings() {
  Ceilings ceilings{measure_copy(), measure_elementwise_gops(), 0, "", "", ""};
  ceilings.method = fmt::format(
      "measured at the start of the run: copy is the best of {} parallel 64 MiB memcpys (one slice per hardware "
      "thread); elementwise is the best of 5 runs of add, mul and max on f32 data held in "
      "registers, all hardware threads; sgemm is the best of {} OpenBLAS 1024^3 sgemms",
      kCopyTrials, kSgemmTrials);
  std::string error;
  if (const openblas::Runtime* blas = openblas::runtime(error)) {
    ceilings.sgemm_gflop_s = measure_sgemm(*blas);
    ceilings.blas_core = blas->core;
    ceilings.blas = blas->config + ", core " + blas->core + " (" + blas->core_note + ")";
  } else {
    ceilings.blas = error;
  }
  return ceilings;
}

}  // namespace lazylab
