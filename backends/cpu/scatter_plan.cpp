#include "scatter_plan.h"

#include <cstring>
#include <vector>

#include "gather_plan.h"
#include "narrow_floats.h"
#include "parallel.h"

namespace lazylab::cpu {
namespace {

class ScatterAdd : public KernelPlan {
 public:
  ScatterAdd(uint32_t data, uint32_t indices, uint32_t updates, uint32_t out, int64_t outer, int64_t extent,
             int64_t inner, uint32_t dtype, tbb::task_arena* arena)
      : data_(data),
        indices_(indices),
        updates_(updates),
        out_(out),
        outer_(outer),
        extent_(extent),
        inner_(inner),
        dtype_(dtype),
        arena_(arena) {}

  void run(const Memory& memory) override {
    const std::vector<int64_t> rows = checked_indices(memory, indices_, extent_, "scatter_add");  // before any write
    if (dtype_ == LAZYLAB_F32)
      add_rows<float>(memory, rows, [](float& sum, float add) { sum += add; });
    else
      add_narrow_rows(memory, rows);
  }

 private:
  template <class T, class Add>
  void add_rows(const Memory& memory, const std::vector<int64_t>& rows, const Add& add_to) const {
    auto* data = static_cast<const T*>(memory.address(data_));
    auto* updates = static_cast<const T*>(memory.address(updates_));
    auto* out = static_cast<T*>(memory.address(out_));
    int64_t count = static_cast<int64_t>(rows.size());
    // Each outer slice is its own: threads split the slices, and within one
    // the blocks add in index order, so repeated indices sum as the
    // reference orders them.
    auto body = [&](int64_t begin, int64_t end) {
      for (int64_t o = begin; o < end; ++o) {
        T* slice = out + o * extent_ * inner_;
        if (slice != data + o * extent_ * inner_)
          std::memcpy(slice, data + o * extent_ * inner_, static_cast<size_t>(extent_ * inner_) * sizeof(T));
        for (int64_t i = 0; i < count; ++i) {
          T* block = slice + rows[i] * inner_;
          const T* add = updates + (o * count + i) * inner_;
          for (int64_t in = 0; in < inner_; ++in) add_to(block[in], add[in]);
        }
      }
    };
    if (!arena_ || outer_ == 1 || outer_ * (extent_ + count) * inner_ < (64 << 10)) return body(0, outer_);
    parallel_chunks(*arena_, 0, outer_, 1, body);
  }

  // bf16 and f16: each slice's sums taken wide and rounded once, as the
  // reference sums (in f64; a rounding per addition was up to 11 f16
  // steps off where the fuzzer found it).
  void add_narrow_rows(const Memory& memory, const std::vector<int64_t>& rows) const {
    auto* data = static_cast<const uint16_t*>(memory.address(data_));
    auto* updates = static_cast<const uint16_t*>(memory.address(updates_));
    auto* out = static_cast<uint16_t*>(memory.address(out_));
    const int64_t count = static_cast<int64_t>(rows.size()), size = extent_ * inner_;
    auto body = [&](int64_t begin, int64_t end) {
      std::vector<double> sums(static_cast<size_t>(size));
      for (int64_t o = begin; o < end; ++o) {
        for (int64_t k = 0; k < size; ++k) sums[k] = widen_one(dtype_, data[o * size + k]);
        for (int64_t i = 0; i < count; ++i) {
          const uint16_t* add = updates + (o * count + i) * inner_;
          for (int64_t in = 0; in < inner_; ++in) sums[rows[i] * inner_ + in] += widen_one(dtype_, add[in]);
        }
        for (int64_t k = 0; k < size; ++k) out[o * size + k] = narrow_one(dtype_, static_cast<float>(sums[k]));
      }
    };
    if (!arena_ || outer_ == 1 || outer_ * (extent_ + count) * inner_ < (64 << 10)) return body(0, outer_);
    parallel_chunks(*arena_, 0, outer_, 1, body);
  }

  uint32_t data_, indices_, updates_, out_;
  int64_t outer_, extent_, inner_;
  uint32_t dtype_;  // f32, bf16 or f16
  tbb::task_arena* arena_;
};

}  // namespace

Planned<KernelPlan> make_scatter_plan(const lazylab_kernel& kernel, const std::vector<ValueInfo>& values,
                                      tbb::task_arena* arena) {
  if (kernel.num_ops != 1 || kernel.ops[0].op != LAZYLAB_OP_ScatterAdd) return nullptr;
  const lazylab_op& op = kernel.ops[0];
  const ValueInfo &data = values[op.operands[0]], &indices = values[op.operands[1]], &updates = values[op.operands[2]],
                  &out = values[op.result];
  for (const ValueInfo* v : {&data, &indices, &updates, &out})
    if (v->kind == LAZYLAB_VALUE_KERNEL_LOCAL) return decline("an operand or the result has no memory");
  if (!computes_in_f32(data.dtype)) return decline("data not f32, bf16 or f16");
  if (indices.dtype != LAZYLAB_I64 && indices.dtype != LAZYLAB_I32) return decline("indices not i64 or i32");
  int64_t axis = op.attrs[0].i, outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= data.shape[d];
  for (size_t d = axis + 1; d < data.shape.size(); ++d) inner *= data.shape[d];
  return std::make_unique<ScatterAdd>(op.operands[0], op.operands[1], op.operands[2], op.result, outer,
                                      data.shape[axis], inner, data.dtype, arena);
}

}  // namespace lazylab::cpu
