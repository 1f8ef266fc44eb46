#include "large_kernel_conv.h"

#include <algorithm>

#include "parallel.h"

#if defined(LAZYLAB_DIRECT_KERNELS)
#include <immintrin.h>
#endif

namespace lazylab::cpu {
namespace {

constexpr int64_t kFilters = 4;  // filters a task
constexpr int64_t kColumns = 3;  // output positions (of one row) a task
constexpr int64_t kLanes = 8;    // floats a register

#if defined(LAZYLAB_DIRECT_KERNELS)
using Vec = __m256;

// The 8 floats of kernel rows r .. r + 8 / Width - 1 of one window: Width
// floats from each row's start (Width 4 or 2; 8 is one load).
template <int Width>
Vec window_rows(const float* window, const int64_t* starts) {
  if constexpr (Width == 8) {
    return _mm256_loadu_ps(window + starts[0]);
  } else if constexpr (Width == 4) {
    return _mm256_loadu2_m128(window + starts[1], window + starts[0]);
  } else {
    auto pair = [&](int64_t a, int64_t b) {
      __m128d low = _mm_loadl_pd(_mm_setzero_pd(), reinterpret_cast<const double*>(window + starts[a]));
      return _mm_castpd_ps(_mm_loadh_pd(low, reinterpret_cast<const double*>(window + starts[b])));
    };
    return _mm256_set_m128(pair(2, 3), pair(0, 1));
  }
}

float lane_sum(Vec v) {
  __m128 half = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  half = _mm_add_ps(half, _mm_movehl_ps(half, half));
  return _mm_cvtss_f32(_mm_add_ss(half, _mm_movehdup_ps(half)));
}

// Columns output positions of one row (windows at `window`, a float
// apart) for four filters (`filters`, whose rows lie one after the other),
// summed over `rows` kernel rows of `width` floats, 8 floats a step.
// Stores the first `valid` filters' sums at outs[f] + column.
//
// A lane sums at most kStepsAChunk products before its sum is added to
// the output's total: one running sum over a 16384-float window (the stem's
// gradient, 32x32 over 16 images) drifted 2e-4 from the interpreter's where
// the products cancel, as OpenBLAS's blocks of the sum do not.
constexpr int64_t kStepsAChunk = 64;

template <int Width, int Columns>
void tile(const float* window, const int64_t* starts, const float* const* filters, int64_t rows, int64_t width,
          float* const* outs, int64_t valid) {
  constexpr int64_t kRowsAStep = Width == 8 ? 1 : kLanes / Width;
  int64_t registers = Width == 8 ? width / kLanes : 1;  // a step's registers of a filter
  int64_t chunk_rows = std::max<int64_t>(1, kStepsAChunk / registers) * kRowsAStep;
  float totals[kFilters][Columns] = {};
  for (int64_t first = 0; first < rows; first += chunk_rows) {
    Vec sums[kFilters][Columns];
    for (auto& row : sums)
      for (Vec& sum : row) sum = _mm256_setzero_ps();
    for (int64_t r = first, end = std::min(rows, first + chunk_rows); r < end; r += kRowsAStep) {
      for (int64_t q = 0; q < registers * kLanes; q += kLanes) {
        Vec runs[Columns];
        for (int c = 0; c < Columns; ++c) runs[c] = window_rows<Width>(window + c + q, starts + r);
        int64_t at = r * width + q;
        for (int f = 0; f < kFilters; ++f) {
          Vec filter = _mm256_loadu_ps(filters[f] + at);
          for (int c = 0; c < Columns; ++c) sums[f][c] = _mm256_fmadd_ps(filter, runs[c], sums[f][c]);
        }
      }
    }
    for (int f = 0; f < kFilters; ++f)
      for (int c = 0; c < Columns; ++c) totals[f][c] += lane_sum(sums[f][c]);
  }
  // Constant indices only (the loops unroll), as in direct_conv.cpp.
  for (int f = 0; f < kFilters; ++f)
    if (f < valid)
      for (int c = 0; c < Columns; ++c) outs[f][c] = totals[f][c];
}

template <int Width>
void tile_of(int64_t columns, const float* window, const int64_t* starts, const float* const* filters, int64_t rows,
             int64_t width, float* const* outs, int64_t valid) {
  if (columns == 3)
    tile<Width, 3>(window, starts, filters, rows, width, outs, valid);
  else if (columns == 2)
    tile<Width, 2>(window, starts, filters, rows, width, outs, valid);
  else
    tile<Width, 1>(window, starts, filters, rows, width, outs, valid);
}
#endif

}  // namespace

bool LargeKernelConv::takes(const DirectShape& shape) {
#if defined(LAZYLAB_DIRECT_KERNELS)
  int64_t width = shape.kernel_w, rows = shape.channels * shape.kernel_h;
  bool whole = width % kLanes == 0 || (width == 4 && rows % 2 == 0) || (width == 2 && rows % 4 == 0);
  return shape.unit_stride() && whole && width > 0 && shape.out_h > 0 && shape.out_w > 0 && shape.filters > 0 &&
         rows > 0;
#else
  (void)shape;
  return false;
#endif
}

LargeKernelConv::LargeKernelConv(const DirectShape& shape)
    : s_(shape),
      blocks_((shape.filters + kFilters - 1) / kFilters),
      column_blocks_((shape.out_w + kColumns - 1) / kColumns),
      padded_(shape) {
  for (int64_t c = 0; c < s_.channels; ++c)
    for (int64_t p = 0; p < s_.kernel_h; ++p) row_starts_.push_back((c * s_.padded_h() + p) * s_.padded_w());
}

void LargeKernelConv::run(const float* x, const float* w, float* out, tbb::task_arena* arena) {
  const float* padded = padded_.fill(x, arena);
  each_in_parallel(arena, s_.images * blocks_ * s_.out_h * column_blocks_, [&](int64_t first, int64_t end) {
    for (int64_t task = first; task < end; ++task) run_task(padded, w, task, out);
  });
}

// Task (image, block, i, column block): output row i's columns of the
// block's filters.
void LargeKernelConv::run_task(const float* padded, const float* w, int64_t task, float* out) const {
#if defined(LAZYLAB_DIRECT_KERNELS)
  int64_t column_block = task % column_blocks_, i = task / column_blocks_ % s_.out_h;
  int64_t block = task / column_blocks_ / s_.out_h % blocks_, image = task / column_blocks_ / s_.out_h / blocks_;
  int64_t first_column = column_block * kColumns, columns = std::min(kColumns, s_.out_w - first_column);
  int64_t valid = std::min(kFilters, s_.filters - block * kFilters);
  int64_t rows = s_.channels * s_.kernel_h, filter_size = rows * s_.kernel_w, plane = s_.out_h * s_.out_w;
  const float* filters[kFilters];
  float* outs[kFilters];
  for (int64_t f = 0; f < kFilters; ++f) {
    int64_t filter = block * kFilters + std::min(f, valid - 1);  // past the last filter: read one, store none
    filters[f] = w + filter * filter_size;
    outs[f] = out + (image * s_.filters + filter) * plane + i * s_.out_w + first_column;
  }
  const float* window = padded + image * s_.channels * s_.padded_h() * s_.padded_w() + i * s_.padded_w() + first_column;
  switch (s_.kernel_w) {
    case 2: return tile_of<2>(columns, window, row_starts_.data(), filters, rows, 2, outs, valid);
    case 4: return tile_of<4>(columns, window, row_starts_.data(), filters, rows, 4, outs, valid);
    default: return tile_of<8>(columns, window, row_starts_.data(), filters, rows, s_.kernel_w, outs, valid);
  }
#else
  (void)padded, (void)w, (void)task, (void)out;
#endif
}

}  // namespace lazylab::cpu
