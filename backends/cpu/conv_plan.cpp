#include "conv_plan.h"

#include <algorithm>
#include <vector>

#include "parallel.h"

namespace lazylab::cpu {
namespace {

struct ConvShape {
  int64_t images, channels, height, width;  // x
  int64_t filters, kernel_h, kernel_w;      // w
  int64_t out_h, out_w, groups;
  int64_t stride[2], pad[4], dilation[2];

  int64_t group_channels() const { return channels / groups; }
  int64_t group_filters() const { return filters / groups; }
  int64_t taps() const { return group_channels() * kernel_h * kernel_w; }  // rows of the unfolded matrix
  int64_t positions() const { return out_h * out_w; }                      // its columns
  bool pointwise() const {
    return kernel_h == 1 && kernel_w == 1 && stride[0] == 1 && stride[1] == 1 && pad[0] == 0 && pad[1] == 0 &&
           pad[2] == 0 && pad[3] == 0;
  }
};

class ConvPlan : public KernelPlan {
 public:
  ConvPlan(const ConvShape& shape, uint32_t x, uint32_t w, uint32_t out, std::unique_ptr<RowKernelPlan> epilogue,
           const RowPlanOptions& options, const openblas::Runtime& blas)
      : s_(shape), x_(x), w_(w), out_(out), epilogue_(std::move(epilogue)), arena_(options.arena), blas_(blas) {
    threads_ = arena_ ? arena_->max_concurrency() : 1;
    int64_t products = s_.images * s_.groups;
    products_in_parallel_ =
        threads_ > 1 && products >= threads_ && s_.group_filters() * s_.positions() * s_.taps() <= kSmallProduct;
    if (packs_windows()) {
      prepare_packing();
      return;
    }
    int64_t buffers = products_in_parallel_ ? threads_ : 1;
    if (!s_.pointwise() && s_.group_channels() > 1)
      columns_.resize(static_cast<size_t>(buffers * s_.taps() * s_.positions()));
  }

  void run(const Memory& memory) override {
    if (s_.group_channels() == 1)
      run_depthwise(memory);
    else if (packs_windows())
      run_packed_windows(memory);
    else
      run_unfolded(memory);
    if (epilogue_) epilogue_->run(memory);
  }

 private:
  // A weight gradient's convolution: an output of a few positions (3x3)
  // and a kernel as large as the image (the output's gradient), which makes
  // each image's product [filters, taps] x [taps, positions] a few columns
  // wide. Packed rows against unfolded products, ms on this machine (2
  // cores), [images, channels, H, W] * [filters, ., kh, kw] -> positions:
  // [16,16,16,16] * 16x16 -> 3x3: 0.27 vs 0.85; [32,16,8,8] * 8x8: 0.22 vs
  // 0.43; but [128,16,2,2] * 2x2: 0.31 vs 0.26, and a forward 3x3 on
  // [16,128,2,2]: 0.39 vs 0.33. Hence few positions and a large kernel.
  bool packs_windows() const {
    return s_.groups == 1 && s_.positions() < kFewPositions && s_.kernel_h * s_.kernel_w >= kLargeKernel;
  }

  // Every image's window at every position is a row of one matrix instead,
  // [images x positions, taps], packed a chunk of channels at a time (in
  // cache) and multiplied by the filters' chunk [filters, taps], the
  // products summed over the chunks. Threads take images each. (Taking
  // channels each, with sums added at the end, left a 2x2 image's gradient
  // sums 32 deep: 15 GFLOP/s.)
  void run_packed_windows(const Memory& memory) {
    int64_t filters = s_.filters, positions = s_.positions(), window = s_.kernel_h * s_.kernel_w;
    auto part = [&](int64_t t) {
      int64_t first = s_.images * t / packing_threads_, end = s_.images * (t + 1) / packing_threads_;
      int64_t rows = (end - first) * positions;
      if (rows == 0) return;
      float* sums = sums_.data() + first * positions * filters;
      float* packed = packed_.data() + t * packed_per_thread_;
      if (s_.channels == 0) std::fill(sums, sums + rows * filters, 0.0f);  // no chunk: the sums of nothing
      for (int64_t c = 0; c < s_.channels; c += chunk_channels_) {
        int64_t last = std::min(s_.channels, c + chunk_channels_), taps = (last - c) * window;
        pack_windows(memory.f32(x_), first, end, c, last, packed);
        blas_.sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, filters, taps, 1.0f, packed, taps,
                    memory.f32(w_) + c * window, s_.taps(), c == 0 ? 0.0f : 1.0f, sums, filters);
      }
    };
    if (packing_threads_ > 1) {
      blas_.set_num_threads(1);
      parallel_chunks(*arena_, 0, packing_threads_, 1, [&](int64_t first, int64_t end) {
        for (int64_t t = first; t < end; ++t) part(t);
      });
      blas_.set_num_threads(threads_);
    } else {
      part(0);
    }
    // sums [image, position, filter] -> out [image, filter, position]
    float* out = memory.f32(out_);
    for (int64_t image = 0; image < s_.images; ++image)
      for (int64_t f = 0; f < filters; ++f)
        for (int64_t at = 0; at < positions; ++at)
          out[(image * filters + f) * positions + at] = sums_[(image * positions + at) * filters + f];
  }

  // Row (image, position) of the packed matrix, for images [first_image,
  // end_image): channels [first, end) of the image's window at that
  // position, (channel, p, q) in order; taps outside the input read 0.
  void pack_windows(const float* x, int64_t first_image, int64_t end_image, int64_t first, int64_t end,
                    float* packed) const {
    int64_t taps = (end - first) * s_.kernel_h * s_.kernel_w;
    for (int64_t image = first_image; image < end_image; ++image)
      for (int64_t at = 0; at < s_.positions(); ++at) {
        int64_t top = at / s_.out_w * s_.stride[0] - s_.pad[0], left = at % s_.out_w * s_.stride[1] - s_.pad[1];
        float* row = packed + ((image - first_image) * s_.positions() + at) * taps;
        for (int64_t c = first; c < end; ++c) {
          const float* plane = x + (image * s_.channels + c) * s_.height * s_.width;
          for (int64_t p = 0; p < s_.kernel_h; ++p, row += s_.kernel_w) {
            int64_t y = top + p * s_.dilation[0];
            if (y < 0 || y >= s_.height) {
              std::fill(row, row + s_.kernel_w, 0.0f);
              continue;
            }
            window_line(plane + y * s_.width, left, row);
          }
        }
      }
  }

  // line[q] = row[left + q * dilation], 0 outside the row.
  void window_line(const float* row, int64_t left, float* line) const {
    int64_t dilation = s_.dilation[1], kw = s_.kernel_w;
    int64_t first = left >= 0 ? 0 : std::min(kw, (-left + dilation - 1) / dilation);
    int64_t end =
        left >= s_.width ? first : std::clamp<int64_t>((s_.width - left + dilation - 1) / dilation, first, kw);
    std::fill(line, line + first, 0.0f);
    if (dilation == 1)
      std::copy(row + left + first, row + left + end, line + first);
    else
      for (int64_t q = first; q < end; ++q) line[q] = row[left + q * dilation];
    std::fill(line + end, line + kw, 0.0f);
  }

  // Each filter reads one input channel (depthwise, as MobileNet's): a
  // product of one row by the unfolded matrix would be an sgemm of M = 1 per
  // channel, so the window is summed directly instead, output row by output
  // row, each tap a contiguous (vectorised, at stride 1) multiply-add.
  void run_depthwise(const Memory& memory) {
    const float* x = memory.f32(x_);
    const float* w = memory.f32(w_);
    float* out = memory.f32(out_);
    auto filters = [&](int64_t first, int64_t end) {
      for (int64_t at = first; at < end; ++at) {
        int64_t image = at / s_.filters, f = at % s_.filters, channel = f / s_.group_filters();
        const float* input = x + (image * s_.channels + channel) * s_.height * s_.width;
        const float* taps = w + f * s_.kernel_h * s_.kernel_w;
        float* result = out + at * s_.positions();
        std::fill(result, result + s_.positions(), 0.0f);
        for (int64_t i = 0; i < s_.out_h; ++i)
          for (int64_t p = 0; p < s_.kernel_h; ++p) {
            int64_t y = i * s_.stride[0] - s_.pad[0] + p * s_.dilation[0];
            if (y < 0 || y >= s_.height) continue;
            for (int64_t q = 0; q < s_.kernel_w; ++q)
              accumulate_row(input + y * s_.width, taps[p * s_.kernel_w + q], q * s_.dilation[1] - s_.pad[1],
                             result + i * s_.out_w);
          }
      }
    };
    if (arena_)
      parallel_chunks(*arena_, 0, s_.images * s_.filters, 1, filters);
    else
      filters(0, s_.images * s_.filters);
  }

  // line[j] += tap * row[j * stride + shift] for every j whose column is in
  // the row.
  void accumulate_row(const float* row, float tap, int64_t shift, float* line) const {
    int64_t stride = s_.stride[1];
    int64_t first = shift >= 0 ? 0 : (-shift + stride - 1) / stride;
    int64_t end = s_.width - shift <= 0 ? 0 : std::min(s_.out_w, (s_.width - shift - 1) / stride + 1);
    if (stride == 1) {
      const float* source = row + shift;
      for (int64_t j = first; j < end; ++j) line[j] += tap * source[j];
    } else {
      for (int64_t j = first; j < end; ++j) line[j] += tap * row[j * stride + shift];
    }
  }

  // One product per image and group: [filters, taps] x [taps, positions].
  // Small ones run a product per thread at once, each unfolding into its
  // own columns (OpenBLAS's threads would only synchronise on them: a
  // ResNet-18 at 32x32 ran its convolutions at 35-50 GFLOP/s).
  void run_unfolded(const Memory& memory) {
    int64_t products = s_.images * s_.groups;
    if (!products_in_parallel_) {
      for (int64_t at = 0; at < products; ++at) run_product(memory, at, columns_.data(), arena_);
      return;
    }
    blas_.set_num_threads(1);
    int64_t per_thread = (products + threads_ - 1) / threads_;
    parallel_chunks(*arena_, 0, threads_, 1, [&](int64_t first, int64_t end) {
      for (int64_t t = first; t < end; ++t) {
        float* columns = columns_.empty() ? nullptr : columns_.data() + t * s_.taps() * s_.positions();
        for (int64_t at = t * per_thread; at < std::min(products, (t + 1) * per_thread); ++at)
          run_product(memory, at, columns, nullptr);
      }
    });
    blas_.set_num_threads(threads_);
  }

  void run_product(const Memory& memory, int64_t at, float* columns, tbb::task_arena* unfold_arena) {
    int64_t image = at / s_.groups, g = at % s_.groups;
    int64_t plane = s_.height * s_.width, positions = s_.positions();
    const float* input = memory.f32(x_) + (image * s_.channels + g * s_.group_channels()) * plane;
    const float* unfolded = input;
    if (!s_.pointwise()) {
      unfold(input, columns, unfold_arena);
      unfolded = columns;
    }
    const float* filters = memory.f32(w_) + g * s_.group_filters() * s_.taps();
    float* result = memory.f32(out_) + (image * s_.filters + g * s_.group_filters()) * positions;
    blas_.sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s_.group_filters(), positions, s_.taps(), 1.0f, filters,
                s_.taps(), unfolded, positions, 0.0f, result, positions);
  }

  // Row (c, p, q) of the unfolded matrix holds tap (p, q) of channel c at
  // every output position; positions outside the input read 0.
  void unfold(const float* input, float* columns, tbb::task_arena* arena) {
    auto rows = [&](int64_t first, int64_t end) {
      for (int64_t row = first; row < end; ++row) {
        int64_t c = row / (s_.kernel_h * s_.kernel_w), p = row / s_.kernel_w % s_.kernel_h, q = row % s_.kernel_w;
        const float* channel = input + c * s_.height * s_.width;
        float* column = columns + row * s_.positions();
        for (int64_t i = 0; i < s_.out_h; ++i) {
          int64_t y = i * s_.stride[0] - s_.pad[0] + p * s_.dilation[0];
          float* line = column + i * s_.out_w;
          if (y < 0 || y >= s_.height) {
            std::fill(line, line + s_.out_w, 0.0f);
            continue;
          }
          for (int64_t j = 0; j < s_.out_w; ++j) {
            int64_t xx = j * s_.stride[1] - s_.pad[1] + q * s_.dilation[1];
            line[j] = xx >= 0 && xx < s_.width ? channel[y * s_.width + xx] : 0.0f;
          }
        }
      }
    };
    if (arena)
      parallel_chunks(*arena, 0, s_.taps(), 1, rows);
    else
      rows(0, s_.taps());
  }

  // Channels a chunk: as many as keep a thread's packed rows within
  // kPackedFloats.
  void prepare_packing() {
    int64_t window = s_.kernel_h * s_.kernel_w;
    packing_threads_ = arena_ && threads_ > 1 ? std::min<int64_t>(threads_, s_.images) : 1;
    int64_t rows = (s_.images + packing_threads_ - 1) / packing_threads_ * s_.positions();
    chunk_channels_ =
        std::clamp<int64_t>(kPackedFloats / std::max<int64_t>(1, rows * window), 1, std::max<int64_t>(1, s_.channels));
    packed_per_thread_ = rows * chunk_channels_ * window;
    packed_.resize(static_cast<size_t>(packing_threads_ * packed_per_thread_));
    sums_.resize(static_cast<size_t>(s_.images * s_.positions() * s_.filters));
  }

  // 16 filters x 1024 positions x 144 taps (a ResNet stage at 32x32) is
  // small; a 224x224 image's stem is not.
  static constexpr int64_t kSmallProduct = int64_t{1} << 23;
  static constexpr int64_t kFewPositions = 16, kLargeKernel = 16;
  static constexpr int64_t kPackedFloats = int64_t{1} << 18;  // 1 MiB of packed rows a thread (L2)

  ConvShape s_;
  uint32_t x_, w_, out_;
  std::unique_ptr<RowKernelPlan> epilogue_;
  std::vector<float> columns_;  // one unfolded matrix per thread running products at once
  std::vector<float> packed_;   // run_packed_windows: a chunk's rows per thread
  std::vector<float> sums_;     // ... and the products, [image, position, filter]
  int64_t packing_threads_ = 1, chunk_channels_ = 1, packed_per_thread_ = 0;
  tbb::task_arena* arena_;
  int threads_ = 1;
  bool products_in_parallel_ = false;
  const openblas::Runtime& blas_;
};

}  // namespace

std::unique_ptr<KernelPlan> make_conv_plan(const lazylab_kernel& kernel, const std::vector<ValueInfo>& values,
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
  if (!conv || values[conv->result].kind == LAZYLAB_VALUE_KERNEL_LOCAL) return nullptr;
  const lazylab_op& op = *conv;
  const ValueInfo &x = values[op.operands[0]], &w = values[op.operands[1]], &out = values[op.result];
  if (x.dtype != LAZYLAB_F32 || out.size() == 0) return nullptr;
  ConvShape s{x.shape[0],   x.shape[1],   x.shape[2],    x.shape[3], w.shape[0], w.shape[2], w.shape[3],
              out.shape[2], out.shape[3], op.attrs[3].i, {},         {},         {}};
  for (int d = 0; d < 2; ++d) {
    s.stride[d] = op.attrs[0].ints[d];
    s.dilation[d] = op.attrs[2].ints[d];
  }
  for (int d = 0; d < 4; ++d) s.pad[d] = op.attrs[1].ints[d];
  std::unique_ptr<RowKernelPlan> epilogue_plan;
  if (!epilogue.empty()) {
    lazylab_kernel part = kernel;  // the same description: the convolution's [N * O, OH * OW]
    part.num_ops = static_cast<uint32_t>(epilogue.size());
    part.ops = epilogue.data();
    epilogue_plan = make_row_plan(part, values, options);
    if (!epilogue_plan) return nullptr;
  }
  return std::make_unique<ConvPlan>(s, op.operands[0], op.operands[1], op.result, std::move(epilogue_plan), options,
                                    blas);
}

}  // namespace lazylab::cpu
