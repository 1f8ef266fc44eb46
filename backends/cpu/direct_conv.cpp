#include "direct_conv.h"

#include <algorithm>

#include "parallel.h"

#if defined(LAZYLAB_DIRECT_KERNELS)
#include <immintrin.h>
#endif

namespace lazylab::cpu {
namespace {

constexpr int64_t kFilters = 6;  // filters a task and a tile
constexpr int64_t kLanes = 8;    // floats a register
constexpr int64_t kRuns = 2;     // registers of output a tile

#if defined(LAZYLAB_DIRECT_KERNELS)
// One tile: `Runs` registers of output (at `starts` in the padded plane,
// where their windows' corners are) for the block's six filters, summed
// over every channel and tap; the first `valid` filters stored at `outs`
// (filter f's at outs[r] + f * plane).
template <int Runs>
void tile(const float* input, const float* taps, const int64_t* starts, const DirectShape& s, int64_t padded_h,
          int64_t padded_w, float* const* outs, int64_t plane, int64_t valid) {
  using Sum = float __attribute__((vector_size(32)));
  Sum sums[kFilters][Runs];
  for (auto& row : sums)
    for (Sum& sum : row) sum = Sum{};
  for (int64_t c = 0; c < s.channels; ++c) {
    const float* channel = input + c * padded_h * padded_w;
    for (int64_t p = 0; p < s.kernel_h; ++p) {
      const float* line = channel + p * padded_w;
      for (int64_t q = 0; q < s.kernel_w; ++q, taps += kFilters) {
        Sum runs[Runs];
        for (int r = 0; r < Runs; ++r) runs[r] = _mm256_loadu_ps(line + starts[r] + q);
        for (int f = 0; f < kFilters; ++f) {
          Sum tap = _mm256_broadcast_ss(taps + f);
          for (int r = 0; r < Runs; ++r) sums[f][r] = _mm256_fmadd_ps(tap, runs[r], sums[f][r]);
        }
      }
    }
  }
  // Constant indices only (the loops unroll): a sum indexed by `valid`
  // would keep the array, and every multiply-add's result, in memory.
  for (int f = 0; f < kFilters; ++f)
    if (f < valid)
      for (int r = 0; r < Runs; ++r) _mm256_storeu_ps(outs[r] + f * plane, sums[f][r]);
}
#endif

}  // namespace

bool DirectConv::takes(const DirectShape& shape) {
#if defined(LAZYLAB_DIRECT_KERNELS)
  return shape.unit_stride() && shape.out_w % kLanes == 0 && shape.out_h > 0 && shape.channels > 0 && shape.filters > 0;
#else
  (void)shape;
  return false;
#endif
}

DirectConv::DirectConv(const DirectShape& shape)
    : s_(shape),
      padded_h_(shape.padded_h()),
      padded_w_(shape.padded_w()),
      blocks_((shape.filters + kFilters - 1) / kFilters),
      padded_(shape),
      packed_(static_cast<size_t>(blocks_ * shape.channels * shape.kernel_h * shape.kernel_w * kFilters), 0.0f) {}

void DirectConv::run(const float* x, const float* w, float* out, tbb::task_arena* arena) {
  const float* padded = padded_.fill(x, arena);
  pack_weights(w);
  auto tasks = [&](int64_t first, int64_t end) {
    for (int64_t task = first; task < end; ++task) run_block(padded, task / blocks_, task % blocks_, out);
  };
  each_in_parallel(arena, s_.images * blocks_, tasks);
}

// packed [block, tap, f] = w [block * 6 + f, tap]; 0 past the last filter.
void DirectConv::pack_weights(const float* w) {
  int64_t taps = s_.channels * s_.kernel_h * s_.kernel_w;
  for (int64_t f = 0; f < s_.filters; ++f) {
    float* to = packed_.data() + (f / kFilters) * taps * kFilters + f % kFilters;
    for (int64_t t = 0; t < taps; ++t) to[t * kFilters] = w[f * taps + t];
  }
}

void DirectConv::run_block(const float* padded, int64_t image, int64_t block, float* out) const {
#if defined(LAZYLAB_DIRECT_KERNELS)
  int64_t plane = s_.out_h * s_.out_w, registers = plane / kLanes;
  const float* input = padded + image * s_.channels * padded_h_ * padded_w_;
  const float* taps = packed_.data() + block * s_.channels * s_.kernel_h * s_.kernel_w * kFilters;
  float* first_filter = out + (image * s_.filters + block * kFilters) * plane;
  int64_t valid = std::min(kFilters, s_.filters - block * kFilters);
  auto place = [&](int64_t reg, int64_t& start, float*& at) {
    int64_t y = reg * kLanes / s_.out_w, x = reg * kLanes % s_.out_w;
    start = y * padded_w_ + x;  // stride 1: the window's corner is the output's place in the padded plane
    at = first_filter + y * s_.out_w + x;
  };
  // Two registers a tile: twelve sums with the six filters, enough in
  // flight to cover the multiply-adds' latency, and the two runs and a tap
  // still in registers (16 in all); then the one left, where there is one.
  // (On this machine's EPYC, one thread, a ResNet's 3x3 at 16x16: 4 filters
  // by 3 registers 42-44 GFLOP/s, its runs reloaded for every filter; 6 by 2
  // 68-74; 4 by 2 28-30.)
  int64_t starts[kRuns];
  float* outs[kRuns];
  for (int64_t reg = 0; reg < registers; reg += kRuns) {
    int64_t runs = std::min(kRuns, registers - reg);
    for (int64_t r = 0; r < runs; ++r) place(reg + r, starts[r], outs[r]);
    if (runs == 2)
      tile<2>(input, taps, starts, s_, padded_h_, padded_w_, outs, plane, valid);
    else
      tile<1>(input, taps, starts, s_, padded_h_, padded_w_, outs, plane, valid);
  }
#else
  (void)padded, (void)image, (void)block, (void)out;
#endif
}

}  // namespace lazylab::cpu
