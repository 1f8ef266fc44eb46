#include "layout_plan.h"

#include <cstring>

#include "parallel.h"

namespace lazylab::cpu {
namespace {

// out[i0, ..., ik] = in[offset + sum_d i_d * in_stride[d]], in bytes.
class StridedCopy : public KernelPlan {
 public:
  StridedCopy(uint32_t in, uint32_t out, std::vector<int64_t> out_shape, std::vector<int64_t> in_strides,
              int64_t offset, size_t element, tbb::task_arena* arena)
      : in_(in),
        out_(out),
        shape_(std::move(out_shape)),
        strides_(std::move(in_strides)),
        offset_(offset),
        element_(element),
        arena_(arena) {
    if (shape_.empty()) shape_ = {1}, strides_ = {0};
    inner_ = shape_.back();
    rows_ = 1;
    for (size_t d = 0; d + 1 < shape_.size(); ++d) rows_ *= shape_[d];
  }

  void run(const Memory& memory) override {
    auto* in = static_cast<const char*>(memory.address(in_));
    auto* out = static_cast<char*>(memory.address(out_));
    auto body = [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) copy_row(in, out, row);
    };
    if (rows_ * inner_ < 65536 || !arena_) return body(0, rows_);
    parallel_chunks(*arena_, 0, rows_, std::max<int64_t>(1, 16384 / inner_), body);
  }

 private:
  void copy_row(const char* in, char* out, int64_t row) const {
    int64_t source = offset_;
    for (size_t d = shape_.size() - 1, rest = row; d-- > 0;) {
      source += static_cast<int64_t>(rest % shape_[d]) * strides_[d];
      rest /= shape_[d];
    }
    char* dst = out + row * inner_ * element_;
    int64_t step = strides_.back();
    if (step == 1) {
      std::memcpy(dst, in + source * element_, inner_ * element_);
    } else if (element_ == 4) {
      auto* d32 = reinterpret_cast<uint32_t*>(dst);
      auto* s32 = reinterpret_cast<const uint32_t*>(in) + source;
      for (int64_t i = 0; i < inner_; ++i) d32[i] = s32[i * step];
    } else {
      for (int64_t i = 0; i < inner_; ++i)
        std::memcpy(dst + i * element_, in + (source + i * step) * element_, element_);
    }
  }

  uint32_t in_, out_;
  std::vector<int64_t> shape_, strides_;
  int64_t offset_;
  size_t element_;
  tbb::task_arena* arena_;
  int64_t inner_ = 1, rows_ = 1;
};

}  // namespace

std::unique_ptr<KernelPlan> make_layout_plan(const lazylab_kernel& kernel, const std::vector<ValueInfo>& values,
                                             tbb::task_arena* arena) {
  if (!lazylab_kernel_described(&kernel) || kernel.kind != LAZYLAB_KERNEL_LAYOUT) return nullptr;
  // A view of the first op's operand, written to the last op's result (a
  // chain of layout ops, ABI 3.3).
  uint32_t source = kernel.ops[0].operands[0], result = kernel.ops[kernel.num_ops - 1].result;
  const ValueInfo &in = values[source], &out = values[result];
  if (out.kind == LAZYLAB_VALUE_KERNEL_LOCAL) return nullptr;
  const lazylab_layout& layout = kernel.layout;
  size_t element = in.size() ? in.bytes / in.size() : 1;
  return std::make_unique<StridedCopy>(source, result, std::vector<int64_t>(layout.shape, layout.shape + layout.rank),
                                       std::vector<int64_t>(layout.strides, layout.strides + layout.rank),
                                       layout.offset, element, arena);
}

}  // namespace lazylab::cpu
