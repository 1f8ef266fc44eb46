#include "host_ceilings.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "elementwise_peak.h"
#include "stream_store.h"

namespace lazylab::cpu {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

constexpr int kCopyTrials = 10, kSgemmTrials = 4;
constexpr size_t kCopyBytes = size_t{64} << 20;
constexpr int kSgemmSize = 1024;
constexpr std::chrono::milliseconds kOpenBlasSpin{300};  // 2^28 cycles at 1 GHz, with room

template <class Probe>
double best_of(int trials, Probe probe) {
  double best = 0;
  for (int trial = 0; trial < trials; ++trial) best = std::max(best, probe());
  return best;
}

unsigned hardware_threads() { return std::max(1u, std::thread::hardware_concurrency()); }

}  // namespace

void copy_past_caches(float* out, const float* in, size_t n) {
  stream_copy(out, in, static_cast<int64_t>(n));
  stream_fence();
}

struct HostCeilingsProbe::Buffers {
  std::vector<float> source = std::vector<float>(kCopyBytes / sizeof(float), 1.0f),
                     target = std::vector<float>(kCopyBytes / sizeof(float), 0.0f);
  std::vector<float> a = std::vector<float>(kSgemmSize * kSgemmSize, 0.5f),
                     b = std::vector<float>(kSgemmSize * kSgemmSize, 0.25f),
                     c = std::vector<float>(kSgemmSize * kSgemmSize);
};

HostCeilingsProbe::HostCeilingsProbe(const openblas::Runtime* blas, std::string no_blas, int blas_threads)
    : blas_(blas), no_blas_(std::move(no_blas)), blas_threads_(blas_threads) {}

HostCeilingsProbe::~HostCeilingsProbe() = default;

double HostCeilingsProbe::copy_gb_s() {
  unsigned threads = hardware_threads();
  size_t slice = buffers_->source.size() / threads;
  float *source = buffers_->source.data(), *target = buffers_->target.data();
  auto start = Clock::now();
  std::vector<std::thread> workers;
  for (unsigned t = 0; t < threads; ++t)
    workers.emplace_back([=] { copy_past_caches(target + t * slice, source + t * slice, slice); });
  for (std::thread& worker : workers) worker.join();
  return 2.0 * static_cast<double>(kCopyBytes) / seconds_since(start) / 1e9;
}

double HostCeilingsProbe::sgemm_gflop_s() {
  const int n = kSgemmSize;
  blas_->set_num_threads(static_cast<int>(hardware_threads()));
  auto start = Clock::now();
  blas_->sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, buffers_->a.data(), n, buffers_->b.data(), n,
               0.0f, buffers_->c.data(), n);
  double rate = 2.0 * n * n * static_cast<double>(n) / seconds_since(start) / 1e9;
  blas_->set_num_threads(blas_threads_);
  return rate;
}

plugin::HostCeilings HostCeilingsProbe::measure(bool quick) {
  if (!buffers_) buffers_ = std::make_unique<Buffers>();
  // OpenBLAS's threads spin (yielding) for about 2^28 cycles after their
  // last work or their start before they sleep, taking cores from the copy
  // and elementwise threads: measured on a 16-core host, the copy read 25-35%
  // low right after a backend had set OpenBLAS's thread count. The full
  // measurement waits them out; a round's quick one measures the machine as
  // the cells just left it.
  if (!quick) std::this_thread::sleep_for(kOpenBlasSpin);
  plugin::HostCeilings ceilings;
  ceilings.copy_gb_s = best_of(quick ? 1 : kCopyTrials, [&] { return copy_gb_s(); });
  if (!quick) ceilings.elementwise_gop_s = measure_elementwise_gops();
  if (blas_) {
    ceilings.gemm_gflop_s = best_of(quick ? 1 : kSgemmTrials, [&] { return sgemm_gflop_s(); });
    ceilings.gemm_library = blas_->config + ", core " + blas_->core + " (" + blas_->core_note + ")";
    ceilings.peer_environment = "OPENBLAS_CORETYPE=" + blas_->core;
  } else {
    ceilings.gemm_library = no_blas_;
  }
  ceilings.method =
      quick ? "one 64 MiB copy and one OpenBLAS 1024^3 sgemm"
            : "after " + std::to_string(kOpenBlasSpin.count()) +
                  " ms for OpenBLAS's threads to sleep, copy is the best of " + std::to_string(kCopyTrials) +
                  " parallel 64 MiB copies with non-temporal stores (one slice per hardware thread); elementwise is "
                  "the best of 5 runs of add, mul and max on f32 data held in registers, all hardware threads; "
                  "sgemm is the best of " +
                  std::to_string(kSgemmTrials) + " OpenBLAS 1024^3 sgemms at one thread per hardware thread";
  return ceilings;
}

}  // namespace lazylab::cpu
