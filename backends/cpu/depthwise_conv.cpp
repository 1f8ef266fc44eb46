#include "depthwise_conv.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "parallel.h"
#include "vector_lanes.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#define LAZYLAB_DEPTHWISE_CONV 1
#endif

namespace lazylab::cpu {
namespace {

constexpr int64_t kLanes = 16;
constexpr int kColumns = 2;  // registers across a tile
constexpr int kRows = 4;     // output rows a tile
constexpr int64_t kTileColumns = kColumns * kLanes;
// Outputs a block the epilogue takes at once: some 16 KiB, in L1.
constexpr int64_t kBlockOutputs = 4096;

// The slot PhasePlanes gives the phase that tap (p, q) of a 3x3 window
// reads at stride S: at stride 2 the four phases in the order the taps
// first reach them, (0, 0), (0, 1), (1, 0), (1, 1).
template <int S>
constexpr int64_t slot_of(int p, int q) {
  return S == 1 ? 0 : (p % 2) * 2 + q % 2;
}

#if defined(LAZYLAB_DEPTHWISE_CONV)
// Rows x kColumns registers of outputs whose first is at `at` in the
// planes' numbering: every tap's weight times the input it reads. The
// input of output row r at tap (p, q) is row r + p / S of the tap's plane,
// so a load serves every (r, p) with that sum: written as that one
// expression, the compiler loads it once.
template <int S, int Rows>
void sum_tile(const float* at, int64_t plane, int64_t width, const __m512 (&w)[9], __m512 (&sums)[Rows][kColumns]) {
  for (auto& row : sums)
    for (__m512& sum : row) sum = _mm512_setzero_ps();
  for (int p = 0; p < 3; ++p)
    for (int q = 0; q < 3; ++q)
      for (int r = 0; r < Rows; ++r)
        for (int c = 0; c < kColumns; ++c) {
          const float* input = at + slot_of<S>(p, q) * plane + (r + p / S) * width + q / S + c * kLanes;
          sums[r][c] = _mm512_fmadd_ps(w[p * 3 + q], _mm512_loadu_ps(input), sums[r][c]);
        }
}

// Output rows [y0, y0 + Rows) of one plane, columns [x0, x0 + 32) of them
// that exist.
template <int S, int Rows>
void tile(const float* planes, int64_t plane, int64_t width, const __m512 (&w)[9], int64_t y0, int64_t x0,
          int64_t out_w, float* out) {
  __m512 sums[Rows][kColumns];
  sum_tile<S, Rows>(planes + y0 * width + x0, plane, width, w, sums);
  for (int c = 0; c < kColumns; ++c) {
    const __mmask16 lanes = first_lanes(out_w - x0 - c * kLanes);
    for (int r = 0; r < Rows; ++r) _mm512_mask_storeu_ps(out + (y0 + r) * out_w + x0 + c * kLanes, lanes, sums[r][c]);
  }
}

template <int S>
void rows_of(const float* planes, int64_t plane, int64_t width, const __m512 (&w)[9], int64_t y0, int64_t rows,
             int64_t out_w, float* out) {
  for (int64_t x0 = 0; x0 < out_w; x0 += kTileColumns) switch (rows) {
      case 4: tile<S, 4>(planes, plane, width, w, y0, x0, out_w, out); break;
      case 3: tile<S, 3>(planes, plane, width, w, y0, x0, out_w, out); break;
      case 2: tile<S, 2>(planes, plane, width, w, y0, x0, out_w, out); break;
      default: tile<S, 1>(planes, plane, width, w, y0, x0, out_w, out); break;
    }
}
#endif

}  // namespace

bool DepthwiseConv::takes(const DirectShape& shape) {
#if defined(LAZYLAB_DEPTHWISE_CONV)
  return shape.kernel_h == 3 && shape.kernel_w == 3 && shape.stride[0] == shape.stride[1] &&
         (shape.stride[0] == 1 || shape.stride[0] == 2) && shape.dilation[0] == 1 && shape.dilation[1] == 1 &&
         shape.out_h > 0 && shape.out_w > 0 && shape.filters > 0 && shape.images > 0;
#else
  (void)shape;
  return false;
#endif
}

DepthwiseConv::DepthwiseConv(const DirectShape& shape, int64_t group_filters)
    : s_(shape), planes_(shape), group_filters_(group_filters) {
  const int64_t positions = s_.out_h * s_.out_w;
  planes_a_task_ = positions >= kBlockOutputs ? 1 : std::max<int64_t>(1, kBlockOutputs / positions);
  const std::vector<int64_t>& window = planes_.window();
  for (int p = 0; p < 3; ++p)
    for (int q = 0; q < 3; ++q) {
      int64_t stride = s_.stride[0];
      int64_t slot = stride == 1 ? slot_of<1>(p, q) : slot_of<2>(p, q);
      if (window[static_cast<size_t>(p * 3 + q)] != slot * planes_.plane() + p / stride * planes_.width() + q / stride)
        throw std::logic_error("depthwise_conv: the phase planes' window is not the 3x3 one the tiles read");
    }
}

void DepthwiseConv::run(const float* x, const float* w, float* out, tbb::task_arena* arena,
                        const BlockDone& block_done) const {
  const int64_t tasks_an_image = ceil_div(s_.filters, planes_a_task_);
  const int64_t positions = s_.out_h * s_.out_w;
  // What the tiles read past the last row's end, beyond the planes.
  const size_t floats = static_cast<size_t>(planes_.channel_floats() + 2 * planes_.width() + 2 * kTileColumns);
  each_in_parallel(arena, s_.images * tasks_an_image, [&](int64_t first, int64_t end) {
    std::vector<float>& dealt = dealt_.local();
    if (dealt.size() != floats) dealt.assign(floats, 0.0f);
    for (int64_t task = first; task < end; ++task) {
      const int64_t image = task / tasks_an_image, f0 = task % tasks_an_image * planes_a_task_;
      const int64_t f1 = std::min(s_.filters, f0 + planes_a_task_);
      int64_t channel = -1;  // the one in `dealt`
      for (int64_t f = f0; f < f1; ++f) {
        if (f / group_filters_ != channel) {
          channel = f / group_filters_;
          planes_.deal(x + (image * s_.channels + channel) * s_.height * s_.width, dealt.data());
        }
        const int64_t row = image * s_.filters + f;
        float* plane_out = out + row * positions;
        const float* weights = w + f * 9;
        if (std::all_of(weights, weights + 9, [](float v) { return std::isfinite(v); }))
          run_plane(dealt.data(), weights, plane_out);
        else
          run_plane_inside(x + (image * s_.channels + channel) * s_.height * s_.width, weights, plane_out);
        if (planes_a_task_ == 1 && block_done) block_done(row, row + 1, 0, positions);
      }
      if (planes_a_task_ > 1 && block_done) block_done(image * s_.filters + f0, image * s_.filters + f1, 0, positions);
    }
  });
}

// The tiles multiply the padding's zeros by the weights too: an infinite
// weight there would make NaNs where the reference, which skips the
// padding, has none. Such a filter's plane sums its inside taps alone, in
// the reference's order.
void DepthwiseConv::run_plane_inside(const float* channel, const float* w, float* out) const {
  const int64_t stride = s_.stride[0];
  for (int64_t y = 0; y < s_.out_h; ++y)
    for (int64_t x = 0; x < s_.out_w; ++x) {
      float sum = 0.0f;
      for (int64_t p = 0; p < 3; ++p) {
        int64_t row = y * stride - s_.pad_top + p;
        if (row < 0 || row >= s_.height) continue;
        for (int64_t q = 0; q < 3; ++q) {
          int64_t column = x * stride - s_.pad_left + q;
          if (column >= 0 && column < s_.width) sum += w[p * 3 + q] * channel[row * s_.width + column];
        }
      }
      out[y * s_.out_w + x] = sum;
    }
}

void DepthwiseConv::run_plane(const float* planes, const float* w, float* out) const {
#if defined(LAZYLAB_DEPTHWISE_CONV)
  __m512 weights[9];
  for (int k = 0; k < 9; ++k) weights[k] = _mm512_set1_ps(w[k]);
  for (int64_t y0 = 0; y0 < s_.out_h; y0 += kRows) {
    int64_t rows = std::min<int64_t>(kRows, s_.out_h - y0);
    if (s_.stride[0] == 1)
      rows_of<1>(planes, planes_.plane(), planes_.width(), weights, y0, rows, s_.out_w, out);
    else
      rows_of<2>(planes, planes_.plane(), planes_.width(), weights, y0, rows, s_.out_w, out);
  }
#else
  (void)planes, (void)w, (void)out;
#endif
}

}  // namespace lazylab::cpu
