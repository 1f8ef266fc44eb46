#include "pool_plan.h"

#include <tbb/enumerable_thread_specific.h>

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "direct_kernel.h"
#include "lazylab/window_shape.hpp"
#include "narrow_floats.h"
#include "parallel.h"
#include "phase_planes.h"
#include "vector_lanes.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace lazylab::cpu {
namespace {

using windows::WindowShape;

// out[plane, i, j] = the largest of the window's values inside the image
// (padding takes no part; -inf where none is inside), NaN if one is NaN: the
// reference's semantics.
class MaxPool : public KernelPlan {
 public:
  MaxPool(uint32_t in, uint32_t out, const ValueInfo& x, const ValueInfo& y, const WindowShape& window,
          tbb::task_arena* arena)
      : phases_(plane_shape(window)),
        in_(in),
        out_(out),
        planes_(x.shape[0] * x.shape[1]),
        height_(x.shape[2]),
        width_(x.shape[3]),
        out_h_(y.shape[2]),
        out_w_(y.shape[3]),
        w_(window),
        dtype_(x.dtype),
        arena_(arena) {}

  void run(const Memory& memory) override {
#if defined(__AVX512F__)
    if (dtype_ == LAZYLAB_F32) return run_phases(memory);
#endif
    if (dtype_ == LAZYLAB_F32)
      run_as<float>(memory);
    else
      run_as<uint16_t>(memory);
  }

 private:
  // Each plane alone, as a convolution of one channel's.
  static DirectShape plane_shape(WindowShape window) {
    window.images *= window.channels;
    window.channels = window.filters = 1;
    return direct_shape(window);
  }

#if defined(__AVX512F__)
  // At any stride, each plane dealt into phase planes (phase_planes.h)
  // whose padding is -inf, which no maximum takes but where no input is
  // inside the window (the reference's -inf) and which a NaN still
  // replaces: the taps are then 16 contiguous outputs' loads each, in the
  // reference's order. (Its stem pool's columns read every other float: in
  // ResNet-18 at 224x224, 0.32 ms for 4 MB.)
  void run_phases(const Memory& memory) {
    const float* x = memory.f32(in_);
    float* y = memory.f32(out_);
    const size_t floats = static_cast<size_t>(phases_.channel_floats() + phases_.width() + 16);
    auto planes = [&](int64_t first, int64_t end) {
      std::vector<float>& dealt = dealt_.local();
      if (dealt.size() != floats) dealt.assign(floats, -INFINITY);
      for (int64_t plane = first; plane < end; ++plane) {
        phases_.deal(x + plane * height_ * width_, dealt.data());
        pool_phases(dealt.data(), y + plane * out_h_ * out_w_);
      }
    };
    if (!arena_ || planes_ * out_h_ * out_w_ < 16384) return planes(0, planes_);
    parallel_chunks(*arena_, 0, planes_, 1, planes);
  }

  // An output row 16 columns at a time, the taps in order: a value replaces
  // the best so far where it is greater or NaN and the best is not NaN.
  void pool_phases(const float* dealt, float* out) const {
    const std::vector<int64_t>& window = phases_.window();
    for (int64_t i = 0; i < out_h_; ++i)
      for (int64_t j = 0; j < out_w_; j += 16) {
        const float* at = dealt + i * phases_.width() + j;
        __m512 best = _mm512_set1_ps(-INFINITY);
        for (int64_t offset : window) {
          __m512 v = _mm512_loadu_ps(at + offset);
          __mmask16 takes = _mm512_cmp_ps_mask(v, best, _CMP_NLE_UQ) & _mm512_cmp_ps_mask(best, best, _CMP_ORD_Q);
          best = _mm512_mask_mov_ps(best, takes, v);
        }
        _mm512_mask_storeu_ps(out + i * out_w_ + j, first_lanes(out_w_ - j), best);
      }
  }
#endif

  // A 16-bit value's bits, read as the float it is (the maximum of exact
  // values is one of them: written back exactly).
  float load(float v) const { return v; }
  float load(uint16_t v) const { return widen_one(dtype_, v); }

  template <class T>
  void run_as(const Memory& memory) {
    auto* x = static_cast<const T*>(memory.address(in_));
    auto* y = static_cast<T*>(memory.address(out_));
    auto planes = [&](int64_t first, int64_t end) {
      std::vector<float> lines(std::is_same_v<T, float> ? 0 : out_h_ * out_w_);
      for (int64_t plane = first; plane < end; ++plane) {
        T* out = y + plane * out_h_ * out_w_;
        if constexpr (std::is_same_v<T, float>) {
          pool_plane(x + plane * height_ * width_, out);
        } else {
          pool_plane(x + plane * height_ * width_, lines.data());
          narrow(dtype_, lines.data(), out, out_h_ * out_w_);
        }
      }
    };
    if (!arena_ || planes_ * out_h_ * out_w_ < 16384) return planes(0, planes_);
    parallel_chunks(*arena_, 0, planes_, 1, planes);
  }

  // An output row at a time, a tap at a time across the row (vectorisable):
  // each output still sees its taps in the reference's order, so the first
  // of equal values wins (+0 before -0) and a NaN read stays.
  template <class T>
  void pool_plane(const T* plane, float* out) const {
    int64_t stride = w_.stride[1];
    for (int64_t i = 0; i < out_h_; ++i) {
      float* line = out + i * out_w_;
      std::fill(line, line + out_w_, -INFINITY);
      for (int64_t p = 0; p < w_.kernel[0]; ++p) {
        int64_t y = i * w_.stride[0] - w_.pad[0] + p * w_.dilation[0];
        if (y < 0 || y >= height_) continue;
        const T* row = plane + y * width_;
        for (int64_t q = 0; q < w_.kernel[1]; ++q) {
          int64_t shift = q * w_.dilation[1] - w_.pad[1];  // column j reads row[j * stride + shift]
          int64_t first = shift >= 0 ? 0 : (-shift + stride - 1) / stride;
          int64_t end = width_ - shift <= 0 ? 0 : std::min(out_w_, (width_ - shift - 1) / stride + 1);
          for (int64_t j = first; j < end; ++j) {
            float best = line[j], v = load(row[j * stride + shift]);
            line[j] = best != best || v <= best ? best : v;
          }
        }
      }
    }
  }

  PhasePlanes phases_;
  tbb::enumerable_thread_specific<std::vector<float>> dealt_;  // a plane's phase planes, by thread
  uint32_t in_, out_;
  int64_t planes_, height_, width_, out_h_, out_w_;
  WindowShape w_;
  uint32_t dtype_;  // f32, bf16 or f16
  tbb::task_arena* arena_;
};

}  // namespace

Planned<KernelPlan> make_pool_plan(const lazylab_kernel& kernel, const std::vector<ValueInfo>& values,
                                   tbb::task_arena* arena) {
  if (kernel.num_ops != 1 || kernel.ops[0].op != LAZYLAB_OP_MaxPool2d) return nullptr;
  const lazylab_op& op = kernel.ops[0];
  const ValueInfo &x = values[op.operands[0]], &y = values[op.result];
  bool memory = x.kind != LAZYLAB_VALUE_KERNEL_LOCAL && y.kind != LAZYLAB_VALUE_KERNEL_LOCAL;
  if (!memory) return decline("the pool's input or result has no memory");
  if (!computes_in_f32(x.dtype)) return decline("a pool of values not f32, bf16 or f16");
  if (x.shape.size() != 4 || y.shape.size() != 4 || y.size() == 0) return decline("not a non-empty NCHW pool");
  WindowShape w = windows::window_shape(values, op);
  return std::make_unique<MaxPool>(op.operands[0], op.result, x, y, w, arena);
}

}  // namespace lazylab::cpu
