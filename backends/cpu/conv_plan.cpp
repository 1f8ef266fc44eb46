#include "conv_plan.h"

#include <algorithm>
#include <functional>
#include <utility>
#include <vector>

#include "banded_sgemm.h"
#include "depthwise_conv.h"
#include "direct_conv.h"
#include "few_positions_conv.h"
#include "large_kernel_conv.h"
#include "lazylab/window_shape.hpp"
#include "narrow_panels.h"
#include "parallel.h"
#include "phase_conv.h"

namespace lazylab::cpu {
namespace {

using windows::WindowShape;

// [first, end) of the j in [0, count) whose column j * stride + shift lies
// in a row of `width`.
std::pair<int64_t, int64_t> inside_row(int64_t shift, int64_t stride, int64_t width, int64_t count) {
  int64_t first = shift >= 0 ? 0 : std::min(count, (-shift + stride - 1) / stride);
  int64_t end = width - shift <= 0 ? 0 : std::min(count, (width - shift - 1) / stride + 1);
  return {first, std::max(first, end)};
}

class ConvPlan : public KernelPlan {
 public:
  ConvPlan(const WindowShape& shape, uint32_t x, uint32_t w, uint32_t out, uint32_t dtype,
           std::unique_ptr<RowKernelPlan> epilogue, const RowPlanOptions& options, const openblas::Runtime& blas)
      : s_(shape),
        x_(x),
        w_(w),
        out_(out),
        narrow_(is_narrow_float(dtype) ? dtype : uint32_t{LAZYLAB_F32}),
        epilogue_(std::move(epilogue)),
        arena_(options.arena),
        blas_(blas) {
    threads_ = arena_ ? arena_->max_concurrency() : 1;
    bool small = s_.group_filters() * s_.positions() * s_.taps() <= kSmallProduct;
    DirectShape direct = direct_shape();
    bool few_positions =
        s_.groups == 1 && small && s_.positions() <= kBatchedPositions && FewPositionsConv::takes(direct);
    // Depthwise: groups of one channel. One channel and no groups is a
    // product (a one-image weight gradient, its channels the batch: summed
    // directly, ResNet-18's at 64x64 took 8-10 ms each, against 0.3-1.4).
    if (s_.groups > 1 && s_.group_channels() == 1 && options.direct_conv && DepthwiseConv::takes(direct)) {
      path_ = Path::kDepthwise3x3;
      depthwise_ = std::make_unique<DepthwiseConv>(direct, s_.group_filters());
    } else if (s_.groups > 1 && s_.group_channels() == 1) {
      path_ = Path::kDepthwise;
      prepare_depthwise();
    } else if (s_.groups == 1 && s_.positions() < kFewPositions && s_.kernel[0] * s_.kernel[1] >= kLargeKernel &&
               LargeKernelConv::takes(direct) && !(few_positions && FewPositionsConv::by_images(direct))) {
      // A stride-1 weight gradient: each output one dot product (ms on this
      // machine's EPYC, against packed windows, ResNet-18 at 32x32: 16x16
      // 0.24-0.43 vs 0.64-0.66, the stem's 32x32 0.20 vs 0.58-0.64). A
      // smaller kernel (the 2x2 stage's, 2x2) sums too few taps an output
      // for lanes of them, and where a tenth of the taps or more read the
      // zero border (4x4 and 8x8 kernels at 3x3 positions), FewPositionsConv
      // by images skips them: 4x4 0.14-0.22 against 0.25-0.40, 8x8 0.18-0.22
      // against 0.24-0.33 (three alternating runs of the training step).
      path_ = Path::kDirect;
      direct_ = std::make_unique<LargeKernelConv>(direct);
    } else if (few_positions) {
      // Few positions at stride 1: the filters in the lanes (ms on this
      // machine's EPYC against the images unfolded side by side, ResNet-18
      // at 32x32: 3x3 at 4x4 0.21-0.29 vs 0.31-0.39, at 2x2 0.27-0.33 vs
      // 0.31-0.47, the 2x2 weight gradient 0.27-0.35 vs 0.51-0.64).
      path_ = Path::kDirect;
      direct_ = std::make_unique<FewPositionsConv>(direct);
    } else if (s_.groups == 1 && packs_windows()) {
      path_ = Path::kPackedWindows;
      prepare_packing();
    } else if (s_.groups == 1 && small && s_.positions() <= kBatchedPositions) {
      path_ = Path::kBatched;
      prepare_batching();
    } else if (s_.groups == 1 && options.direct_conv && PhaseConv::takes(direct)) {
      path_ = Path::kPhase;
      phase_ = std::make_unique<PhaseConv>(direct);
    } else if (s_.groups == 1 && small && !s_.pointwise() && DirectConv::takes(direct)) {
      // Small products only (with many positions, an unfolded product per
      // image keeps OpenBLAS busy), and not a pointwise one (whose input
      // already is the product's matrix): on this machine's EPYC, ms,
      // ResNet-18 at 32x32, unfolded against direct in alternating runs: 3x3
      // at 16x16 0.49-0.50 vs 0.29-0.45, at 8x8 0.46-0.48 vs 0.26-0.42, the
      // stem 0.45-0.59 vs 0.24-0.40.
      path_ = Path::kDirect;
      direct_ = std::make_unique<DirectConv>(direct);
    } else {
      path_ = Path::kPerImage;
      int64_t products = s_.images * s_.groups;
      products_in_parallel_ = threads_ > 1 && products >= threads_ && small;
      int64_t buffers = products_in_parallel_ ? threads_ : 1;
      if (!s_.pointwise()) columns_.resize(static_cast<size_t>(buffers * s_.taps() * s_.positions()));
    }
  }

  // A 16-bit convolution's input, weight and result, widened: Memory::panels.
  int64_t panel_floats() const override {
    return narrow_ == LAZYLAB_F32 ? 0 : out_panel() + whole_lines(s_.images * s_.filters * s_.positions());
  }

  void run(const Memory& memory) override {
    if (narrow_ != LAZYLAB_F32) {
      widen_panel(arena_, narrow_, static_cast<const uint16_t*>(memory.address(x_)), memory.panels, x_size());
      widen_panel(arena_, narrow_, static_cast<const uint16_t*>(memory.address(w_)), memory.panels + w_panel(),
                  w_size());
    }
    switch (path_) {
      case Path::kDepthwise: run_depthwise(memory); break;
      case Path::kPackedWindows: run_packed_windows(memory); break;
      case Path::kBatched: run_batched(memory); break;
      case Path::kDirect: direct_->run(x_of(memory), w_of(memory), out_of(memory), arena_); break;
      case Path::kPhase:
      case Path::kDepthwise3x3: run_with_blocks(memory); return;
      case Path::kPerImage: run_per_image(memory); break;
    }
    if (narrow_ != LAZYLAB_F32)  // the sums rounded once into the result's 16 bits
      narrow_panel(arena_, narrow_, out_of(memory), static_cast<uint16_t*>(memory.address(out_)),
                   s_.images * s_.filters * s_.positions());
    if (epilogue_) epilogue_->run(memory);
  }

 private:
  enum class Path { kDepthwise, kDepthwise3x3, kDirect, kPhase, kPackedWindows, kBatched, kPerImage };

  // PhaseConv and DepthwiseConv hand each block of outputs over once it is
  // written: an f32 convolution's epilogue runs on it while it is in
  // cache.
  void run_with_blocks(const Memory& memory) {
    const bool fuses_epilogue = epilogue_ && narrow_ == LAZYLAB_F32 && epilogue_->runs_columns_apart();
    std::function<void(int64_t, int64_t, int64_t, int64_t)> epilogue_block;
    if (fuses_epilogue)
      epilogue_block = [&](int64_t first_row, int64_t end_row, int64_t first_col, int64_t end_col) {
        epilogue_->run_block_here(memory, first_row, end_row, first_col, end_col);
      };
    if (phase_)
      phase_->run(x_of(memory), w_of(memory), out_of(memory), arena_, epilogue_block);
    else
      depthwise_->run(x_of(memory), w_of(memory), out_of(memory), arena_, epilogue_block);
    if (narrow_ != LAZYLAB_F32)
      narrow_panel(arena_, narrow_, out_of(memory), static_cast<uint16_t*>(memory.address(out_)),
                   s_.images * s_.filters * s_.positions());
    if (epilogue_ && !fuses_epilogue) epilogue_->run(memory);
  }

  int64_t x_size() const { return s_.images * s_.channels * s_.height * s_.width; }
  int64_t w_size() const { return s_.filters * s_.taps(); }
  int64_t w_panel() const { return whole_lines(x_size()); }
  int64_t out_panel() const { return w_panel() + whole_lines(w_size()); }

  // The input, weight and result the paths read and write: f32 memory, or
  // a 16-bit convolution's panels.
  const float* x_of(const Memory& memory) const { return narrow_ == LAZYLAB_F32 ? memory.f32(x_) : memory.panels; }
  const float* w_of(const Memory& memory) const {
    return narrow_ == LAZYLAB_F32 ? memory.f32(w_) : memory.panels + w_panel();
  }
  float* out_of(const Memory& memory) const {
    return narrow_ == LAZYLAB_F32 ? memory.f32(out_) : memory.panels + out_panel();
  }

  // The shape the direct convolutions take (each checks what else it
  // needs).
  DirectShape direct_shape() const { return cpu::direct_shape(s_); }

  // A weight gradient's convolution that LargeKernelConv and
  // FewPositionsConv do not take (a strided convolution's, dilated here;
  // kernel rows of other widths; too large; no AVX): an output of a few
  // positions (3x3) and a kernel as large as the image (the output's
  // gradient), which makes each image's product [filters, taps] x [taps,
  // positions] a few columns wide. Packed rows against the images
  // unfolded side by side, ms on a 2-core EPYC (before LargeKernelConv),
  // [images, channels, H, W] * [filters, ., kh, kw] -> 3x3:
  // [16,16,16,16] * 16x16: 0.45 vs 1.0; [32,16,8,8] * 8x8: 0.48 vs 0.58;
  // [64,16,4,4] * 4x4: 0.49 vs 0.55; [3,16,32,32] * 32x32: 0.57 vs 0.83.
  // But for small kernels (a 2x2 image's 2x2 gradient, a forward 3x3 at
  // 2x2) unfolding measured faster: hence few positions and a large kernel.
  bool packs_windows() const { return s_.positions() < kFewPositions && s_.kernel[0] * s_.kernel[1] >= kLargeKernel; }

  // Every image's window at every position is a row of one matrix instead,
  // [images x positions, taps], packed a chunk of channels at a time (the
  // images in parallel), and one sgemm on OpenBLAS's threads multiplies the
  // filters' chunk [filters, taps] by it, the products summed over the
  // chunks into [filters, images x positions]. (Threads taking images each,
  // an sgemm of their own per chunk, ran ResNet-18's weight gradients at
  // 31-37 GFLOP/s on a 2-core EPYC; one sgemm over all images at 69-128.)
  void run_packed_windows(const Memory& memory) {
    int64_t window = s_.kernel[0] * s_.kernel[1], rows = s_.images * s_.positions();
    for (int64_t c = 0; c < s_.channels; c += chunk_channels_) {
      int64_t last = std::min(s_.channels, c + chunk_channels_), taps = (last - c) * window;
      each_in_parallel(arena_, s_.images, [&](int64_t first, int64_t end) {
        pack_windows(x_of(memory), first, end, c, last, columns_.data() + first * s_.positions() * taps);
      });
      banded_sgemm(blas_, arena_,
                   {CblasNoTrans, CblasTrans, s_.filters, rows, taps, w_of(memory) + c * window, s_.taps(),
                    columns_.data(), taps, c == 0 ? 0.0f : 1.0f, products_.data(), rows});
    }
    if (s_.channels == 0) std::fill(products_.begin(), products_.end(), 0.0f);  // no chunk: the sums of nothing
    scatter_products(out_of(memory), 0, s_.images);
  }

  // Row (image, position) of the packed matrix, for images [first_image,
  // end_image): channels [first, end) of the image's window at that
  // position, (channel, p, q) in order; taps outside the input read 0. Which
  // of a window's taps fall inside is worked out once per position.
  void pack_windows(const float* x, int64_t first_image, int64_t end_image, int64_t first, int64_t end,
                    float* packed) const {
    int64_t kh = s_.kernel[0], kw = s_.kernel[1], taps = (end - first) * kh * kw;
    for (int64_t at = 0; at < s_.positions(); ++at) {
      int64_t top = at / s_.out_w * s_.stride[0] - s_.pad[0], left = at % s_.out_w * s_.stride[1] - s_.pad[1];
      auto [first_p, end_p] = inside_row(top, s_.dilation[0], s_.height, kh);
      auto [first_q, end_q] = inside_row(left, s_.dilation[1], s_.width, kw);
      for (int64_t image = first_image; image < end_image; ++image) {
        float* row = packed + ((image - first_image) * s_.positions() + at) * taps;
        for (int64_t c = first; c < end; ++c, row += kh * kw) {
          const float* plane = x + (image * s_.channels + c) * s_.height * s_.width;
          std::fill(row, row + first_p * kw, 0.0f);
          for (int64_t p = first_p; p < end_p; ++p) {
            const float* source = plane + (top + p * s_.dilation[0]) * s_.width + left;
            float* line = row + p * kw;
            for (int64_t q = 0; q < first_q; ++q) line[q] = 0.0f;
            if (s_.dilation[1] == 1)
              std::copy(source + first_q, source + end_q, line + first_q);
            else
              for (int64_t q = first_q; q < end_q; ++q) line[q] = source[q * s_.dilation[1]];
            for (int64_t q = end_q; q < kw; ++q) line[q] = 0.0f;
          }
          std::fill(row + end_p * kw, row + kh * kw, 0.0f);
        }
      }
    }
  }

  // Each filter reads one input channel (depthwise, as MobileNet's): a
  // product of one row by the unfolded matrix would be an sgemm of M = 1 per
  // channel, so the window is summed directly instead, an output row at a
  // time (kept in L1 through its taps), each tap a contiguous (vectorised)
  // multiply-add over the row's positions that read inside the input (each
  // output's taps in order, the padding skipped, as the reference sums
  // them). At stride s the input's columns are first dealt into s phases
  // (column c to phase c mod s), so that a tap's columns j * s + shift are
  // one run of a phase. Which rows and columns each tap reads inside the
  // input is worked out once, for the plan. (Working that out for every row
  // and tap, and reading strided columns one by one, MobileNetV2's depthwise
  // convolutions ran at 2-16 GFLOP/s on a 2-core EPYC, half its forward.)
  void run_depthwise(const Memory& memory) {
    const float* x = x_of(memory);
    const float* w = w_of(memory);
    float* out = out_of(memory);
    const int64_t stride = s_.stride[1], window = s_.kernel[0] * s_.kernel[1];
    each_in_parallel(arena_, s_.images * s_.filters, [&](int64_t first, int64_t end) {
      std::vector<float> phases(stride > 1 ? static_cast<size_t>(phase_planes() * s_.height * phase_width()) : 0);
      for (int64_t at = first; at < end; ++at) {
        int64_t image = at / s_.filters, f = at % s_.filters, channel = f / s_.group_filters();
        const float* input = x + (image * s_.channels + channel) * s_.height * s_.width;
        if (stride > 1) deal_phases(input, phases.data());
        const float* source = stride > 1 ? phases.data() : input;
        const float* weights = w + f * window;
        float* result = out + at * s_.positions();
        for (int64_t i = 0; i < s_.out_h; ++i) {
          float* line = result + i * s_.out_w;
          std::fill(line, line + s_.out_w, 0.0f);
          for (const DepthwiseTap& tap : depthwise_taps_) {
            if (i < tap.first_i || i >= tap.end_i) continue;
            // An index, not a pointer, before j: a row's start may lie before the plane (a left pad).
            const int64_t row = tap.offset + i * tap.row_step;
            const float weight = weights[tap.index];
            for (int64_t j = tap.first_j; j < tap.end_j; ++j) line[j] += weight * source[row + j];
          }
        }
      }
    });
  }

  // Where a depthwise tap reads: output rows [first_i, end_i) and columns
  // [first_j, end_j) fall inside the input; output (i, j) reads source
  // element offset + i * row_step + j (the plane at stride 1, the phases
  // otherwise).
  struct DepthwiseTap {
    int64_t index;  // p * KW + q
    int64_t first_i, end_i, first_j, end_j;
    int64_t offset, row_step;
  };

  int64_t phase_planes() const { return std::min(s_.stride[1], s_.width); }  // a stride past the row: one column
  int64_t phase_width() const { return (s_.width + s_.stride[1] - 1) / s_.stride[1]; }

  void prepare_depthwise() {
    const int64_t stride = s_.stride[1];
    const int64_t row_width = stride > 1 ? phase_width() : s_.width;
    for (int64_t p = 0; p < s_.kernel[0]; ++p)
      for (int64_t q = 0; q < s_.kernel[1]; ++q) {
        int64_t top = p * s_.dilation[0] - s_.pad[0], shift = q * s_.dilation[1] - s_.pad[1];
        auto [first_i, end_i] = inside_row(top, s_.stride[0], s_.height, s_.out_h);
        auto [first_j, end_j] = inside_row(shift, stride, s_.width, s_.out_w);
        if (first_i >= end_i || first_j >= end_j) continue;
        // Column j * stride + shift: phase shift mod stride, at j + (shift - phase) / stride there.
        int64_t phase = ((shift % stride) + stride) % stride;
        int64_t offset = (stride > 1 ? phase * s_.height * row_width : 0) + top * row_width + (shift - phase) / stride;
        depthwise_taps_.push_back(
            {p * s_.kernel[1] + q, first_i, end_i, first_j, end_j, offset, s_.stride[0] * row_width});
      }
  }

  // phases[m][y][c] = plane[y][c * stride + m]: a channel's columns dealt
  // into phase_planes() planes of phase_width() columns.
  void deal_phases(const float* plane, float* phases) const {
    const int64_t stride = s_.stride[1], width = phase_width();
    for (int64_t m = 0; m < phase_planes(); ++m)
      for (int64_t y = 0; y < s_.height; ++y) {
        const float* row = plane + y * s_.width + m;
        float* phase = phases + (m * s_.height + y) * width;
        const int64_t columns = (s_.width - m + stride - 1) / stride;  // c = j * stride + m < width
        for (int64_t j = 0; j < columns; ++j) phase[j] = row[j * stride];
      }
  }

  // Small products (a ResNet at 32x32: [16, 144] x [144, 256] an image, or
  // [128, 1152] x [1152, 4] at 2x2) as one product for many images: their
  // windows unfolded side by side, [taps, images x positions], and one
  // sgemm on OpenBLAS's threads, [filters, images x positions]. Against a
  // product per image, the images in parallel on one OpenBLAS thread each,
  // on a 2-core EPYC: 47-60 GFLOP/s at 16x16 to 4x4 and 19 at 2x2, against
  // 69-146 batched (sgemm alone).
  void run_batched(const Memory& memory) {
    for (int64_t first = 0; first < s_.images; first += chunk_images_) {
      int64_t end = std::min(s_.images, first + chunk_images_), columns = (end - first) * s_.positions();
      each_in_parallel(arena_, s_.taps(), [&](int64_t first_row, int64_t end_row) {
        for (int64_t image = first; image < end; ++image)
          unfold(x_of(memory) + image * s_.channels * s_.height * s_.width, first_row, end_row,
                 columns_.data() + (image - first) * s_.positions(), columns);
      });
      banded_sgemm(blas_, arena_,
                   {CblasNoTrans, CblasNoTrans, s_.filters, columns, s_.taps(), w_of(memory), s_.taps(),
                    columns_.data(), columns, 0.0f, products_.data(), columns});
      scatter_products(out_of(memory), first, end);
    }
  }

  // products_ [filters, images x positions] -> out [image, filter, position]
  // for images [first, end).
  void scatter_products(float* out, int64_t first, int64_t end) {
    int64_t positions = s_.positions(), stride = (end - first) * positions;
    each_in_parallel(arena_, s_.filters, [&](int64_t first_filter, int64_t end_filter) {
      for (int64_t f = first_filter; f < end_filter; ++f)
        for (int64_t image = first; image < end; ++image) {
          const float* from = products_.data() + f * stride + (image - first) * positions;
          std::copy(from, from + positions, out + (image * s_.filters + f) * positions);
        }
    });
  }

  // One product per image and group: [filters, taps] x [taps, positions].
  // Small ones run a product per thread at once, each unfolding into its
  // own columns.
  void run_per_image(const Memory& memory) {
    int64_t products = s_.images * s_.groups;
    if (!products_in_parallel_) {
      for (int64_t at = 0; at < products; ++at) run_product(memory, at, columns_.data(), true);
      return;
    }
    blas_.set_num_threads(1);
    int64_t per_thread = (products + threads_ - 1) / threads_;
    parallel_chunks(*arena_, 0, threads_, 1, [&](int64_t first, int64_t end) {
      for (int64_t t = first; t < end; ++t) {
        float* columns = columns_.empty() ? nullptr : columns_.data() + t * s_.taps() * s_.positions();
        for (int64_t at = t * per_thread; at < std::min(products, (t + 1) * per_thread); ++at)
          run_product(memory, at, columns, false);
      }
    });
    blas_.set_num_threads(threads_);
  }

  void run_product(const Memory& memory, int64_t at, float* columns, bool unfold_in_parallel) {
    int64_t image = at / s_.groups, g = at % s_.groups;
    int64_t plane = s_.height * s_.width, positions = s_.positions();
    const float* input = x_of(memory) + (image * s_.channels + g * s_.group_channels()) * plane;
    const float* unfolded = input;
    if (!s_.pointwise()) {
      auto rows = [&](int64_t first, int64_t end) { unfold(input, first, end, columns, positions); };
      if (unfold_in_parallel)
        each_in_parallel(arena_, s_.taps(), rows);
      else
        rows(0, s_.taps());
      unfolded = columns;
    }
    const float* filters = w_of(memory) + g * s_.group_filters() * s_.taps();
    float* result = out_of(memory) + (image * s_.filters + g * s_.group_filters()) * positions;
    blas_.sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s_.group_filters(), positions, s_.taps(), 1.0f, filters,
                s_.taps(), unfolded, positions, 0.0f, result, positions);
  }

  // Rows [first, end) of one image's (or group's) unfolded matrix, row
  // (c, p, q) at columns + row * stride: tap (p, q) of channel c at every
  // output position; positions outside the input read 0. Which rows and
  // columns of a tap fall inside the input is worked out once per tap.
  void unfold(const float* input, int64_t first, int64_t end, float* columns, int64_t stride) const {
    for (int64_t row = first; row < end; ++row) {
      int64_t c = row / (s_.kernel[0] * s_.kernel[1]), p = row / s_.kernel[1] % s_.kernel[0], q = row % s_.kernel[1];
      int64_t top = p * s_.dilation[0] - s_.pad[0], shift = q * s_.dilation[1] - s_.pad[1];
      auto [first_i, end_i] = inside_row(top, s_.stride[0], s_.height, s_.out_h);
      auto [first_j, end_j] = inside_row(shift, s_.stride[1], s_.width, s_.out_w);
      const float* channel = input + c * s_.height * s_.width;
      float* column = columns + row * stride;
      if (!tap_offsets_.empty()) {
        const int32_t* offsets = tap_offsets_.data() + (p * s_.kernel[1] + q) * s_.positions();
        for (int64_t at = 0; at < s_.positions(); ++at) column[at] = offsets[at] < 0 ? 0.0f : channel[offsets[at]];
        continue;
      }
      std::fill(column, column + first_i * s_.out_w, 0.0f);
      if (s_.stride[0] == 1 && s_.stride[1] == 1 && s_.out_w == s_.width && first_i < end_i && first_j < end_j) {
        unfold_shifted_plane(channel, top, shift, first_i, end_i, first_j, end_j, column);
        std::fill(column + end_i * s_.out_w, column + s_.positions(), 0.0f);
        continue;
      }
      for (int64_t i = first_i; i < end_i; ++i) {
        const float* source = channel + (i * s_.stride[0] + top) * s_.width;
        float* line = column + i * s_.out_w;
        std::fill(line, line + first_j, 0.0f);
        if (s_.stride[1] == 1)
          std::copy(source + shift + first_j, source + shift + end_j, line + first_j);
        else
          for (int64_t j = first_j; j < end_j; ++j) line[j] = source[j * s_.stride[1] + shift];
        std::fill(line + end_j, line + s_.out_w, 0.0f);
      }
      std::fill(column + end_i * s_.out_w, column + s_.positions(), 0.0f);
    }
  }

  // At stride 1 with rows as wide as the input's, a tap's lines are one
  // run of the input plane shifted: copied at once, then the columns that
  // fell outside the row (wrapped in from the next or previous one) zeroed.
  // Lines of a few floats copied one by one cost more than their bytes
  // (ResNet-18 at 16x16: 0.30 ms against 0.08 for 16 images).
  void unfold_shifted_plane(const float* channel, int64_t top, int64_t shift, int64_t first_i, int64_t end_i,
                            int64_t first_j, int64_t end_j, float* column) const {
    int64_t width = s_.width;
    const float* from = channel + (first_i + top) * width + shift + first_j;
    const float* last = channel + (end_i - 1 + top) * width + shift + end_j;
    std::copy(from, last, column + first_i * width + first_j);
    for (int64_t i = first_i; i < end_i; ++i) {
      float* line = column + i * width;
      std::fill(line, line + first_j, 0.0f);
      std::fill(line + end_j, line + width, 0.0f);
    }
  }

  // Where an output row is a few floats, copying its lines costs more
  // than their bytes: each tap's source offsets, -1 outside the input, are
  // worked out once here and unfolding gathers by them. (ResNet-18's 2x2
  // weight gradients: 128 images x 64 taps x 3 lines of 3 floats.)
  void prepare_tap_offsets() {
    if (s_.out_w >= kShortLine || s_.positions() * s_.kernel[0] * s_.kernel[1] > kMostTapOffsets) return;
    tap_offsets_.reserve(static_cast<size_t>(s_.kernel[0] * s_.kernel[1] * s_.positions()));
    for (int64_t p = 0; p < s_.kernel[0]; ++p)
      for (int64_t q = 0; q < s_.kernel[1]; ++q)
        for (int64_t at = 0; at < s_.positions(); ++at) {
          int64_t y = at / s_.out_w * s_.stride[0] - s_.pad[0] + p * s_.dilation[0];
          int64_t x = at % s_.out_w * s_.stride[1] - s_.pad[1] + q * s_.dilation[1];
          bool inside = y >= 0 && y < s_.height && x >= 0 && x < s_.width;
          tap_offsets_.push_back(inside ? static_cast<int32_t>(y * s_.width + x) : -1);
        }
  }

  // Images a chunk: as many as keep its unfolded columns within
  // kColumnFloats.
  void prepare_batching() {
    prepare_tap_offsets();
    chunk_images_ = std::clamp<int64_t>(kColumnFloats / std::max<int64_t>(1, s_.taps() * s_.positions()), 1,
                                        std::max<int64_t>(1, s_.images));
    columns_.resize(static_cast<size_t>(s_.taps() * chunk_images_ * s_.positions()));
    products_.resize(static_cast<size_t>(s_.filters * chunk_images_ * s_.positions()));
  }

  // Channels a chunk: as many as keep all images' packed rows within
  // kColumnFloats.
  void prepare_packing() {
    int64_t window = s_.kernel[0] * s_.kernel[1], rows = s_.images * s_.positions();
    chunk_channels_ =
        std::clamp<int64_t>(kColumnFloats / std::max<int64_t>(1, rows * window), 1, std::max<int64_t>(1, s_.channels));
    columns_.resize(static_cast<size_t>(rows * chunk_channels_ * window));
    products_.resize(static_cast<size_t>(s_.filters * rows));
  }

  // 16 filters x 1024 positions x 144 taps (a ResNet stage at 32x32) is
  // small; a 224x224 image's stem is not.
  static constexpr int64_t kSmallProduct = int64_t{1} << 23;
  static constexpr int64_t kFewPositions = 16, kLargeKernel = 16;
  static constexpr int64_t kColumnFloats = int64_t{1} << 20;  // 4 MiB of unfolded or packed windows
  static constexpr int64_t kBatchedPositions = 32;
  static constexpr int64_t kShortLine = 8, kMostTapOffsets = int64_t{1} << 16;

  WindowShape s_;
  uint32_t x_, w_, out_;
  uint32_t narrow_;  // BF16 or F16: a 16-bit convolution, computed in f32 panels; F32: not
  std::unique_ptr<RowKernelPlan> epilogue_;
  std::unique_ptr<DirectKernel> direct_;
  std::unique_ptr<PhaseConv> phase_;
  std::unique_ptr<DepthwiseConv> depthwise_;
  Path path_ = Path::kPerImage;
  std::vector<float> columns_;                // unfolded or packed windows (per image: one matrix per thread)
  std::vector<float> products_;               // batched and packed: [filters, images x positions]
  std::vector<int32_t> tap_offsets_;          // batched, short output rows: [kh, kw, positions] into a channel's plane
  std::vector<DepthwiseTap> depthwise_taps_;  // depthwise: the taps that read inside the input, in order
  int64_t chunk_images_ = 1, chunk_channels_ = 1;
  tbb::task_arena* arena_;
  int threads_ = 1;
  bool products_in_parallel_ = false;
  const openblas::Runtime& blas_;
};

}  // namespace

Planned<KernelPlan> make_conv_plan(const lazylab_kernel& kernel, const std::vector<ValueInfo>& values,
                                   const RowPlanOptions& options, const openblas::Runtime& blas) {
  bool window = lazylab_kernel_described(&kernel) && kernel.kind == LAZYLAB_KERNEL_WINDOW;
  if (!window && (kernel.num_ops != 1 || kernel.ops[0].op != LAZYLAB_OP_Conv2d)) return nullptr;
  const lazylab_op* conv = nullptr;
  std::vector<lazylab_op> epilogue;
  for (uint32_t i = 0; i < kernel.num_ops; ++i)
    if (kernel.ops[i].op == LAZYLAB_OP_Conv2d)
      conv = &kernel.ops[i];
    else
      epilogue.push_back(kernel.ops[i]);
  if (!conv) return nullptr;
  if (values[conv->result].kind == LAZYLAB_VALUE_KERNEL_LOCAL) return decline("the convolution's result has no memory");
  const lazylab_op& op = *conv;
  const ValueInfo &x = values[op.operands[0]], &w = values[op.operands[1]], &out = values[op.result];
  if (!computes_in_f32(x.dtype)) return decline("a convolution not of f32, bf16 or f16");
  if (w.dtype != x.dtype || out.dtype != x.dtype) return decline("a convolution of mixed dtypes");
  if (out.size() == 0) return decline("a convolution of no elements");
  WindowShape s = windows::window_shape(values, op);
  std::unique_ptr<RowKernelPlan> epilogue_plan;
  if (!epilogue.empty()) {
    lazylab_kernel part = kernel;  // the same description: the convolution's [N * O, OH * OW]
    part.num_ops = static_cast<uint32_t>(epilogue.size());
    part.ops = epilogue.data();
    Planned<RowKernelPlan> planned = make_row_plan(part, values, options);
    if (!planned) return decline("the epilogue's row loops declined: " + planned.reason());
    epilogue_plan = planned.take();
  }
  return std::make_unique<ConvPlan>(s, op.operands[0], op.operands[1], op.result, x.dtype, std::move(epilogue_plan),
                                    options, blas);
}

}  // namespace lazylab::cpu
