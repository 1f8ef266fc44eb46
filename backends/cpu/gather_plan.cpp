#include "gather_plan.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "parallel.h"

namespace lazylab::cpu {
namespace {

class GatherCopy : public KernelPlan {
 public:
  GatherCopy(uint32_t data, uint32_t indices, uint32_t out, int64_t outer, int64_t extent, int64_t block_bytes,
             tbb::task_arena* arena)
      : data_(data),
        indices_(indices),
        out_(out),
        outer_(outer),
        extent_(extent),
        block_bytes_(block_bytes),
        arena_(arena) {}

  void run(const Memory& memory) override {
    const std::vector<int64_t> rows = checked_indices(memory, indices_, extent_, "gather");
    auto* data = static_cast<const std::byte*>(memory.address(data_));
    auto* out = static_cast<std::byte*>(memory.address(out_));
    int64_t count = static_cast<int64_t>(rows.size());
    auto body = [&](int64_t begin, int64_t end) {
      switch (block_bytes_) {  // a block of one element: a load and a store, not a call to memcpy
        case 4: return copy_elements<uint32_t>(data, out, rows, begin, end);
        case 8: return copy_elements<uint64_t>(data, out, rows, begin, end);
        default:
          for (int64_t o = begin; o < end; ++o)
            for (int64_t i = 0; i < count; ++i)
              std::memcpy(out + (o * count + i) * block_bytes_, data + (o * extent_ + rows[i]) * block_bytes_,
                          static_cast<size_t>(block_bytes_));
      }
    };
    if (outer_ * count * block_bytes_ < (256 << 10) || !arena_ || outer_ == 1) return body(0, outer_);
    parallel_chunks(*arena_, 0, outer_, 1, body);
  }

 private:
  // Blocks of one element of type T (a gather along the last axis: a
  // kernel's flipped taps ran at 1-7 GB/s through a memcpy call each).
  template <typename T>
  void copy_elements(const std::byte* data, std::byte* out, const std::vector<int64_t>& rows, int64_t begin,
                     int64_t end) const {
    const T* from = reinterpret_cast<const T*>(data);
    T* to = reinterpret_cast<T*>(out);
    auto count = static_cast<int64_t>(rows.size());
    for (int64_t o = begin; o < end; ++o)
      for (int64_t i = 0; i < count; ++i) to[o * count + i] = from[o * extent_ + rows[i]];
  }

  uint32_t data_, indices_, out_;
  int64_t outer_, extent_, block_bytes_;
  tbb::task_arena* arena_;
};

}  // namespace

std::vector<int64_t> checked_indices(const Memory& memory, uint32_t indices, int64_t extent, const char* op) {
  const ValueInfo& info = (*memory.values)[indices];
  const void* raw = memory.address(indices);
  std::vector<int64_t> rows(static_cast<size_t>(info.size()));
  for (size_t i = 0; i < rows.size(); ++i) {
    int64_t index =
        info.dtype == LAZYLAB_I64 ? static_cast<const int64_t*>(raw)[i] : static_cast<const int32_t*>(raw)[i];
    if (index < -extent || index >= extent)
      throw std::runtime_error(std::string(op) + ": index " + std::to_string(index) +
                               " is out of range for a dimension of " + std::to_string(extent));
    rows[i] = index < 0 ? index + extent : index;
  }
  return rows;
}

Planned<KernelPlan> make_gather_plan(const lazylab_kernel& kernel, const std::vector<ValueInfo>& values,
                                     tbb::task_arena* arena) {
  if (kernel.num_ops != 1 || kernel.ops[0].op != LAZYLAB_OP_Gather || kernel.ops[0].num_attrs < 1) return nullptr;
  const lazylab_op& op = kernel.ops[0];
  const ValueInfo &data = values[op.operands[0]], &indices = values[op.operands[1]], &out = values[op.result];
  bool has_memory = data.kind != LAZYLAB_VALUE_KERNEL_LOCAL && indices.kind != LAZYLAB_VALUE_KERNEL_LOCAL &&
                    out.kind != LAZYLAB_VALUE_KERNEL_LOCAL;
  if (!has_memory) return decline("the gather's data, indices or result has no memory");
  if (indices.dtype != LAZYLAB_I64 && indices.dtype != LAZYLAB_I32) return decline("indices not i64 or i32");
  if (data.size() == 0) return decline("a gather from no elements");
  int64_t axis = op.attrs[0].i;
  if (axis < 0 || axis >= static_cast<int64_t>(data.shape.size())) return decline("the axis is out of range");
  int64_t outer = 1, inner = 1, element = static_cast<int64_t>(data.bytes) / data.size();
  for (int64_t d = 0; d < axis; ++d) outer *= data.shape[d];
  for (size_t d = axis + 1; d < data.shape.size(); ++d) inner *= data.shape[d];
  return std::make_unique<GatherCopy>(op.operands[0], op.operands[1], op.result, outer, data.shape[axis],
                                      inner * element, arena);
}

}  // namespace lazylab::cpu
