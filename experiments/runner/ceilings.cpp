#include "ceilings.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "elementwise_peak.h"
#include "openblas_runtime.h"
#include "stream_copy.h"

namespace lazylab {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

constexpr int kCopyTrials = 10, kSgemmTrials = 4;
constexpr size_t kCopyBytes = size_t{64} << 20;
constexpr int kSgemmSize = 1024;

template <class Probe>
double best_of(int trials, Probe probe) {
  double best = 0;
  for (int trial = 0; trial < trials; ++trial) best = std::max(best, probe());
  return best;
}

}  // namespace

struct HostProbe::Buffers {
  std::vector<float> source = std::vector<float>(kCopyBytes / sizeof(float), 1.0f),
                     target = std::vector<float>(kCopyBytes / sizeof(float), 0.0f);
  std::vector<float> a = std::vector<float>(kSgemmSize * kSgemmSize, 0.5f),
                     b = std::vector<float>(kSgemmSize * kSgemmSize, 0.25f),
                     c = std::vector<float>(kSgemmSize * kSgemmSize);
  const openblas::Runtime* blas = nullptr;
};

HostProbe::HostProbe() : buffers_(std::make_unique<Buffers>()) {
  std::string no_blas;
  buffers_->blas = openblas::runtime(no_blas);
}

HostProbe::~HostProbe() = default;

double HostProbe::copy_gb_s() {
  unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  size_t slice = buffers_->source.size() / threads;
  float *source = buffers_->source.data(), *target = buffers_->target.data();
  auto start = Clock::now();
  std::vector<std::thread> workers;
  for (unsigned t = 0; t < threads; ++t)
    workers.emplace_back([=] { stream_copy(target + t * slice, source + t * slice, slice); });
  for (std::thread& worker : workers) worker.join();
  return 2.0 * static_cast<double>(kCopyBytes) / seconds_since(start) / 1e9;
}

double HostProbe::sgemm_gflop_s() {
  const openblas::Runtime* blas = buffers_->blas;
  if (!blas) return 0;
  const int n = kSgemmSize;
  auto start = Clock::now();
  blas->sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, buffers_->a.data(), n, buffers_->b.data(), n,
              0.0f, buffers_->c.data(), n);
  return 2.0 * n * n * static_cast<double>(n) / seconds_since(start) / 1e9;
}

Ceilings measure_ceilings() {
  HostProbe probe;
  Ceilings ceilings{best_of(kCopyTrials, [&] { return probe.copy_gb_s(); }), measure_elementwise_gops(), 0, "", "", ""};
  ceilings.method = fmt::format(
      "measured at the start of the run: copy is the best of {} parallel 64 MiB copies with non-temporal stores (one "
      "slice per hardware thread); elementwise is the best of 5 runs of add, mul and max on f32 data held in "
      "registers, all hardware threads; sgemm is the best of {} OpenBLAS 1024^3 sgemms",
      kCopyTrials, kSgemmTrials);
  std::string error;
  if (const openblas::Runtime* blas = openblas::runtime(error)) {
    ceilings.sgemm_gflop_s = best_of(kSgemmTrials, [&] { return probe.sgemm_gflop_s(); });
    ceilings.blas_core = blas->core;
    ceilings.blas = blas->config + ", core " + blas->core + " (" + blas->core_note + ")";
  } else {
    ceilings.blas = error;
  }
  return ceilings;
}

}  // namespace lazylab
