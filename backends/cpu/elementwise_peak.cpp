#include "elementwise_peak.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

namespace lazylab::cpu {
namespace {

constexpr int kBlock = 256;  // 16 AVX-512 registers: enough independent chains to hide latency
constexpr int kRounds = 200;

// chain's loop body, kRounds times per element while the block stays in
// registers: 3 ops per element per round, no loads or stores between them.
[[gnu::noinline]] void rounds_in_registers(float* data, int blocks) {
  for (int b = 0; b < blocks; ++b) {
    float v[kBlock];
    for (int j = 0; j < kBlock; ++j) v[j] = data[b * kBlock + j];
    for (int round = 0; round < kRounds; ++round)
      for (int j = 0; j < kBlock; ++j) v[j] = std::max((v[j] + 1.0f) * 0.99f, 0.0f);
    for (int j = 0; j < kBlock; ++j) data[b * kBlock + j] = v[j];
  }
}

}  // namespace

double measure_elementwise_gops() {
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  const int blocks = 4096;  // about 30 ms a trial: long enough for the clock to settle
  std::vector<std::vector<float>> data(threads, std::vector<float>(size_t{blocks} * kBlock, 0.5f));
  double best = 1e30;
  for (int trial = 0; trial < 5; ++trial) {
    auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> workers;
    for (unsigned t = 0; t < threads; ++t)
      workers.emplace_back([&, t] { rounds_in_registers(data[t].data(), blocks); });
    for (std::thread& worker : workers) worker.join();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  double ops = 3.0 * kRounds * kBlock * blocks * threads;
  return ops / best / 1e9;
}

}  // namespace lazylab::cpu
