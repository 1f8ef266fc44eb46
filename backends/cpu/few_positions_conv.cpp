#include "few_positions_conv.h"

#include <algorithm>

#include "parallel.h"

#if defined(LAZYLAB_DIRECT_KERNELS)
#include <immintrin.h>
#endif

namespace lazylab::cpu {
namespace {

constexpr int64_t kLanes = 8;             // floats a register
constexpr int64_t kFilters = 2 * kLanes;  // filters a task: two registers
constexpr int64_t kPositions = 6;         // output positions a task
constexpr int64_t kTapsAChunk = 256;      // taps summed before the sums join the totals

#if defined(LAZYLAB_DIRECT_KERNELS)
// Positions output positions (windows at `image` + corners[at]) for the
// block's sixteen filters, summed over every tap; the first `valid` filters
// stored at outs + f * plane + position. A lane sums kTapsAChunk products
// before they join its total: a long running sum drifts from the
// interpreter's where the products cancel (large_kernel_conv.cpp).
template <int Positions>
void tile(const float* image, const int64_t* corners, const int64_t* tap_starts, const float* taps, int64_t tap_count,
          float* outs, int64_t plane, int64_t valid) {
  alignas(32) float totals[Positions][kFilters] = {};
  for (int64_t first = 0; first < tap_count; first += kTapsAChunk) {
    __m256 sums[Positions][2];
    for (auto& row : sums) row[0] = row[1] = _mm256_setzero_ps();
    const float* windows[Positions];
    for (int at = 0; at < Positions; ++at) windows[at] = image + corners[at];
    for (int64_t t = first, end = std::min(tap_count, first + kTapsAChunk); t < end; ++t) {
      __m256 low = _mm256_loadu_ps(taps + t * kFilters), high = _mm256_loadu_ps(taps + t * kFilters + kLanes);
      int64_t start = tap_starts[t];
      for (int at = 0; at < Positions; ++at) {
        __m256 value = _mm256_broadcast_ss(windows[at] + start);
        sums[at][0] = _mm256_fmadd_ps(low, value, sums[at][0]);
        sums[at][1] = _mm256_fmadd_ps(high, value, sums[at][1]);
      }
    }
    for (int at = 0; at < Positions; ++at) {
      _mm256_store_ps(totals[at], _mm256_add_ps(_mm256_load_ps(totals[at]), sums[at][0]));
      _mm256_store_ps(totals[at] + kLanes, _mm256_add_ps(_mm256_load_ps(totals[at] + kLanes), sums[at][1]));
    }
  }
  for (int64_t f = 0; f < valid; ++f)
    for (int at = 0; at < Positions; ++at) outs[f * plane + at] = totals[at][f];
}
#endif

}  // namespace

bool FewPositionsConv::takes(const DirectShape& shape) {
#if defined(LAZYLAB_DIRECT_KERNELS)
  return shape.unit_stride() && shape.out_h > 0 && shape.out_w > 0 && shape.filters > 0;
#else
  (void)shape;
  return false;
#endif
}

FewPositionsConv::FewPositionsConv(const DirectShape& shape)
    : s_(shape),
      taps_(shape.channels * shape.kernel_h * shape.kernel_w),
      blocks_((shape.filters + kFilters - 1) / kFilters),
      position_blocks_((shape.out_h * shape.out_w + kPositions - 1) / kPositions),
      padded_(shape),
      packed_(static_cast<size_t>(blocks_ * taps_ * kFilters), 0.0f) {
  int64_t padded_w = s_.padded_w();
  for (int64_t c = 0; c < s_.channels; ++c)
    for (int64_t p = 0; p < s_.kernel_h; ++p)
      for (int64_t q = 0; q < s_.kernel_w; ++q) tap_starts_.push_back((c * s_.padded_h() + p) * padded_w + q);
  for (int64_t i = 0; i < s_.out_h; ++i)
    for (int64_t j = 0; j < s_.out_w; ++j) corners_.push_back(i * padded_w + j);
}

void FewPositionsConv::run(const float* x, const float* w, float* out, tbb::task_arena* arena) {
  const float* padded = padded_.fill(x, arena);
  pack_weights(w, arena);
  each_in_parallel(arena, s_.images * blocks_ * position_blocks_, [&](int64_t first, int64_t end) {
    for (int64_t task = first; task < end; ++task) run_task(padded, task, out);
  });
}

// packed [block, tap, f] = w [block * 16 + f, tap]; past the last filter
// the zeros it was made with. Written in order, the block's sixteen filters
// read side by side, the blocks on the arena's threads: as large as the
// product's other operand at a 2x2 image (128 filters over 1152 taps), a
// packing that wrote a filter at a time, a cache line a float, cost as much
// as the product.
void FewPositionsConv::pack_weights(const float* w, tbb::task_arena* arena) {
  each_in_parallel(arena, blocks_, [&](int64_t first, int64_t end) {
    for (int64_t block = first; block < end; ++block) {
      int64_t filters = std::min(kFilters, s_.filters - block * kFilters);
      const float* from = w + block * kFilters * taps_;
      float* to = packed_.data() + block * taps_ * kFilters;
      for (int64_t t = 0; t < taps_; ++t, to += kFilters)
        for (int64_t f = 0; f < filters; ++f) to[f] = from[f * taps_ + t];
    }
  });
}

// Task (image, block, position block).
void FewPositionsConv::run_task(const float* padded, int64_t task, float* out) const {
#if defined(LAZYLAB_DIRECT_KERNELS)
  int64_t position_block = task % position_blocks_, block = task / position_blocks_ % blocks_;
  int64_t image = task / position_blocks_ / blocks_, plane = s_.out_h * s_.out_w;
  int64_t first = position_block * kPositions, positions = std::min(kPositions, plane - first);
  int64_t valid = std::min(kFilters, s_.filters - block * kFilters);
  const float* input = padded + image * s_.channels * s_.padded_h() * s_.padded_w();
  const float* taps = packed_.data() + block * taps_ * kFilters;
  float* outs = out + (image * s_.filters + block * kFilters) * plane + first;
  const int64_t* corners = corners_.data() + first;
  switch (positions) {
    case 6: return tile<6>(input, corners, tap_starts_.data(), taps, taps_, outs, plane, valid);
    case 5: return tile<5>(input, corners, tap_starts_.data(), taps, taps_, outs, plane, valid);
    case 4: return tile<4>(input, corners, tap_starts_.data(), taps, taps_, outs, plane, valid);
    case 3: return tile<3>(input, corners, tap_starts_.data(), taps, taps_, outs, plane, valid);
    case 2: return tile<2>(input, corners, tap_starts_.data(), taps, taps_, outs, plane, valid);
    default: return tile<1>(input, corners, tap_starts_.data(), taps, taps_, outs, plane, valid);
  }
#else
  (void)padded, (void)task, (void)out;
#endif
}

}  // namespace lazylab::cpu
