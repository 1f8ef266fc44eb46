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
constexpr int64_t kRows = 6;              // output positions (or images) a task
constexpr int64_t kTapsAChunk = 256;      // taps summed before the sums join the totals
constexpr int64_t kImagesToList = 2;      // fewer images: by positions, padding and all
// Inside taps' share of all, at most, to go by images: 0.84 (an 8x8 weight
// gradient at 3x3 positions) went faster by images than by positions or as
// LargeKernelConv, 0.92 (16x16) did not (ms a convolution in ResNet-18's
// training step, three alternating runs: 0.18-0.22 against 0.24-0.33 and
// 0.24-0.29; 0.24-0.33 against 0.26-0.30).
constexpr double kMostInside = 0.9;

// How many of a dim's taps reach the input, summed over its output
// positions (stride and dilation 1).
int64_t inside_taps(int64_t outputs, int64_t kernel, int64_t pad, int64_t size) {
  int64_t inside = 0;
  for (int64_t i = 0; i < outputs; ++i)
    inside += std::max<int64_t>(0, std::min(kernel, size + pad - i) - std::max<int64_t>(0, pad - i));
  return inside;
}

#if defined(LAZYLAB_DIRECT_KERNELS)
// Rows outputs of the block's sixteen filters, row r's input at bases[r]:
// for each tap k, the sixteen weights at weights + taps[k].first * 16 times
// the float at bases[r] + taps[k].second, broadcast; the first `valid`
// filters stored at outs + r * row_stride + f * plane. A row is an output
// position (bases: its window's corner in a padded image; taps: all) or an
// image (bases: the image; taps: one position's inside its input). A lane
// sums kTapsAChunk products before they join its total: a long running sum
// drifts from the interpreter's where the products cancel
// (large_kernel_conv.cpp).
template <int Rows>
void tile(const float* const* bases, const FewPositionsConv::Tap* taps, int64_t tap_count, const float* weights,
          float* outs, int64_t row_stride, int64_t plane, int64_t valid) {
  alignas(32) float totals[Rows][kFilters] = {};
  for (int64_t first = 0; first < tap_count; first += kTapsAChunk) {
    __m256 sums[Rows][2];
    for (auto& row : sums) row[0] = row[1] = _mm256_setzero_ps();
    for (int64_t k = first, end = std::min(tap_count, first + kTapsAChunk); k < end; ++k) {
      const float* w = weights + taps[k].first * kFilters;
      __m256 low = _mm256_loadu_ps(w), high = _mm256_loadu_ps(w + kLanes);
      int64_t at = taps[k].second;
      for (int r = 0; r < Rows; ++r) {
        __m256 value = _mm256_broadcast_ss(bases[r] + at);
        sums[r][0] = _mm256_fmadd_ps(low, value, sums[r][0]);
        sums[r][1] = _mm256_fmadd_ps(high, value, sums[r][1]);
      }
    }
    for (int r = 0; r < Rows; ++r) {
      _mm256_store_ps(totals[r], _mm256_add_ps(_mm256_load_ps(totals[r]), sums[r][0]));
      _mm256_store_ps(totals[r] + kLanes, _mm256_add_ps(_mm256_load_ps(totals[r] + kLanes), sums[r][1]));
    }
  }
  for (int64_t f = 0; f < valid; ++f)
    for (int r = 0; r < Rows; ++r) outs[r * row_stride + f * plane] = totals[r][f];
}

void tile_of(int64_t rows, const float* const* bases, const FewPositionsConv::Tap* taps, int64_t tap_count,
             const float* weights, float* outs, int64_t row_stride, int64_t plane, int64_t valid) {
  switch (rows) {
    case 6: return tile<6>(bases, taps, tap_count, weights, outs, row_stride, plane, valid);
    case 5: return tile<5>(bases, taps, tap_count, weights, outs, row_stride, plane, valid);
    case 4: return tile<4>(bases, taps, tap_count, weights, outs, row_stride, plane, valid);
    case 3: return tile<3>(bases, taps, tap_count, weights, outs, row_stride, plane, valid);
    case 2: return tile<2>(bases, taps, tap_count, weights, outs, row_stride, plane, valid);
    default: return tile<1>(bases, taps, tap_count, weights, outs, row_stride, plane, valid);
  }
}
#endif

}  // namespace

bool FewPositionsConv::by_images(const DirectShape& shape) {
  int64_t inside = inside_taps(shape.out_h, shape.kernel_h, shape.pad_top, shape.height) *
                   inside_taps(shape.out_w, shape.kernel_w, shape.pad_left, shape.width);
  int64_t all = shape.out_h * shape.kernel_h * shape.out_w * shape.kernel_w;
  return takes(shape) && shape.images >= kImagesToList &&
         static_cast<double>(inside) <= kMostInside * static_cast<double>(all);
}

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
      plane_(shape.out_h * shape.out_w),
      blocks_((shape.filters + kFilters - 1) / kFilters),
      packed_(static_cast<size_t>(blocks_ * taps_ * kFilters), 0.0f) {
  by_images_ = by_images(shape);
  if (by_images_) {
    list_inside_taps();
    return;
  }
  padded_.emplace(shape);
  int64_t padded_w = s_.padded_w();
  for (int64_t c = 0, t = 0; c < s_.channels; ++c)
    for (int64_t p = 0; p < s_.kernel_h; ++p)
      for (int64_t q = 0; q < s_.kernel_w; ++q) all_taps_.emplace_back(t++, (c * s_.padded_h() + p) * padded_w + q);
  for (int64_t i = 0; i < s_.out_h; ++i)
    for (int64_t j = 0; j < s_.out_w; ++j) corners_.push_back(i * padded_w + j);
}

// Each position's taps whose window element lies in the input, not its
// zero border (a 3x3 over a 2x2 image: 4 of 9 taps an output, 16 of 36 for
// a 2x2 kernel at 3x3 positions; 4x4: 25 of 36).
void FewPositionsConv::list_inside_taps() {
  position_taps_.resize(static_cast<size_t>(plane_));
  for (int64_t i = 0; i < s_.out_h; ++i)
    for (int64_t j = 0; j < s_.out_w; ++j) {
      auto& taps = position_taps_[static_cast<size_t>(i * s_.out_w + j)];
      for (int64_t c = 0; c < s_.channels; ++c)
        for (int64_t p = 0; p < s_.kernel_h; ++p)
          for (int64_t q = 0; q < s_.kernel_w; ++q) {
            int64_t row = i + p - s_.pad_top, column = j + q - s_.pad_left;
            if (row < 0 || row >= s_.height || column < 0 || column >= s_.width) continue;
            taps.emplace_back((c * s_.kernel_h + p) * s_.kernel_w + q, (c * s_.height + row) * s_.width + column);
          }
    }
}

void FewPositionsConv::run(const float* x, const float* w, float* out, tbb::task_arena* arena) {
  pack_weights(w, arena);
  const float* input = by_images_ ? x : padded_->fill(x, arena);
  int64_t row_blocks = ((by_images_ ? s_.images : plane_) + kRows - 1) / kRows;
  int64_t tasks = (by_images_ ? plane_ : s_.images) * blocks_ * row_blocks;
  each_in_parallel(arena, tasks, [&](int64_t first, int64_t end) {
    for (int64_t task = first; task < end; ++task)
      by_images_ ? run_images(input, task, out) : run_positions(input, task, out);
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

// Task (image, block, position block): up to six positions of one image,
// every tap, in the padded input.
void FewPositionsConv::run_positions(const float* padded, int64_t task, float* out) const {
#if defined(LAZYLAB_DIRECT_KERNELS)
  int64_t position_blocks = (plane_ + kRows - 1) / kRows;
  int64_t position_block = task % position_blocks, block = task / position_blocks % blocks_;
  int64_t image = task / position_blocks / blocks_;
  int64_t first = position_block * kRows, positions = std::min(kRows, plane_ - first);
  const float* input = padded + image * s_.channels * s_.padded_h() * s_.padded_w();
  const float* bases[kRows];
  for (int64_t r = 0; r < positions; ++r) bases[r] = input + corners_[static_cast<size_t>(first + r)];
  tile_of(positions, bases, all_taps_.data(), taps_, packed_.data() + block * taps_ * kFilters,
          out + (image * s_.filters + block * kFilters) * plane_ + first, 1, plane_,
          std::min(kFilters, s_.filters - block * kFilters));
#else
  (void)padded, (void)task, (void)out;
#endif
}

// Task (image block, block, position): one position of up to six images,
// its inside taps, in the input as it is.
void FewPositionsConv::run_images(const float* x, int64_t task, float* out) const {
#if defined(LAZYLAB_DIRECT_KERNELS)
  int64_t position = task % plane_, block = task / plane_ % blocks_;
  int64_t first = task / plane_ / blocks_ * kRows, images = std::min(kRows, s_.images - first);
  int64_t image_floats = s_.channels * s_.height * s_.width, image_outs = s_.filters * plane_;
  const float* bases[kRows];
  for (int64_t r = 0; r < images; ++r) bases[r] = x + (first + r) * image_floats;
  const auto& taps = position_taps_[static_cast<size_t>(position)];
  tile_of(images, bases, taps.data(), static_cast<int64_t>(taps.size()), packed_.data() + block * taps_ * kFilters,
          out + first * image_outs + block * kFilters * plane_ + position, image_outs, plane_,
          std::min(kFilters, s_.filters - block * kFilters));
#else
  (void)x, (void)task, (void)out;
#endif
}

}  // namespace lazylab::cpu
