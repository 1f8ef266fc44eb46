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
    if (!s_.pointwise() && s_.group_channels() > 1) columns_.resize(static_cast<size_t>(s_.taps() * s_.positions()));
  }

  void run(const Memory& memory) override {
    if (s_.group_channels() == 1)
      run_depthwise(memory);
    else
      run_unfolded(memory);
    if (epilogue_) epilogue_->run(memory);
  }

 private:
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

  void run_unfolded(const Memory& memory) {
    const float* x = memory.f32(x_);
    const float* w = memory.f32(w_);
    float* out = memory.f32(out_);
    int64_t plane = s_.height * s_.width, positions = s_.positions();
    for (int64_t image = 0; image < s_.images; ++image)
      for (int64_t g = 0; g < s_.groups; ++g) {
        const float* input = x + (image * s_.channels + g * s_.group_channels()) * plane;
        const float* columns = input;
        if (!s_.pointwise()) {
          unfold(input);
          columns = columns_.data();
        }
        const float* filters = w + g * s_.group_filters() * s_.taps();
        float* result = out + (image * s_.filters + g * s_.group_filters()) * positions;
        blas_.sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s_.group_filters(), positions, s_.taps(), 1.0f, filters,
                    s_.taps(), columns, positions, 0.0f, result, positions);
      }
  }

  // Row (c, p, q) of the unfolded matrix holds tap (p, q) of channel c at
  // every output position; positions outside the input read 0.
  void unfold(const float* input) {
    auto rows = [&](int64_t first, int64_t end) {
      for (int64_t row = first; row < end; ++row) {
        int64_t c = row / (s_.kernel_h * s_.kernel_w), p = row / s_.kernel_w % s_.kernel_h, q = row % s_.kernel_w;
        const float* channel = input + c * s_.height * s_.width;
        float* column = columns_.data() + row * s_.positions();
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
    if (arena_)
      parallel_chunks(*arena_, 0, s_.taps(), 1, rows);
    else
      rows(0, s_.taps());
  }

  ConvShape s_;
  uint32_t x_, w_, out_;
  std::unique_ptr<RowKernelPlan> epilogue_;
  std::vector<float> columns_;
  tbb::task_arena* arena_;
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
