#include "axis_reduction_plan.h"

#include <algorithm>
#include <vector>

#include "narrow_panels.h"
#include "parallel.h"
#include "row_reductions.h"

namespace lazylab::cpu {
namespace {

// The input as [outer, kept, inner]: out[k] = sum over o and i of
// x[(o * kept + k) * inner + i], in double like the reference (a bias's
// gradient sums thousands of rows), each contiguous inner run first in float.
class AxisReduction : public KernelPlan {
 public:
  AxisReduction(uint32_t in, uint32_t out, int64_t outer, int64_t kept, int64_t inner, bool mean,
                const std::vector<ValueInfo>& values, tbb::task_arena* arena)
      : in_(in),
        out_(out),
        outer_(outer),
        kept_(kept),
        inner_(inner),
        mean_(mean),
        in_dtype_(values[in].dtype),
        out_dtype_(values[out].dtype),
        arena_(arena) {}

  // A 16-bit input widened, and a 16-bit result's sums before their
  // rounding: Memory::panels.
  int64_t panel_floats() const override { return out_panel() + (is_narrow_float(out_dtype_) ? kept_ : 0); }

  void run(const Memory& memory) override {
    const float* x = memory.f32(in_);
    if (is_narrow_float(in_dtype_)) {
      widen_panel(arena_, in_dtype_, static_cast<const uint16_t*>(memory.address(in_)), memory.panels,
                  outer_ * kept_ * inner_);
      x = memory.panels;
    }
    if (!is_narrow_float(out_dtype_)) return reduce(x, memory.f32(out_));
    float* sums = memory.panels + out_panel();
    reduce(x, sums);
    narrow(out_dtype_, sums, static_cast<uint16_t*>(memory.address(out_)), kept_);  // once, as the reference rounds
  }

 private:
  int64_t out_panel() const { return is_narrow_float(in_dtype_) ? whole_lines(outer_ * kept_ * inner_) : 0; }

  void reduce(const float* x, float* out) {
    double count = static_cast<double>(outer_) * static_cast<double>(inner_);
    auto finish = [&](int64_t k, double total) { out[k] = static_cast<float>(mean_ ? total / count : total); };
    if (inner_ == 1) return sum_columns(x, finish);
    auto body = [&](int64_t first, int64_t end) {
      for (int64_t k = first; k < end; ++k) {
        double total = 0;
        for (int64_t o = 0; o < outer_; ++o)
          total += reduce_row(LAZYLAB_OP_ReduceSum, x + (o * kept_ + k) * inner_, inner_);
        finish(k, total);
      }
    };
    if (outer_ * kept_ * inner_ < kParallelMin || !arena_) return body(0, kept_);
    parallel_chunks(*arena_, 0, kept_, 1, body);
  }

  // Rows of `kept` added element by element, in blocks of columns that the
  // threads share out: each block's accumulators stay in L1.
  template <class Finish>
  void sum_columns(const float* x, Finish finish) const {
    auto body = [&](int64_t first_block, int64_t end_block) {
      double acc[kBlock];
      for (int64_t block = first_block; block < end_block; ++block) {
        int64_t k0 = block * kBlock, width = std::min(kBlock, kept_ - k0);
        std::fill(acc, acc + width, 0.0);
        for (int64_t o = 0; o < outer_; ++o) {
          const float* row = x + o * kept_ + k0;
          for (int64_t k = 0; k < width; ++k) acc[k] += row[k];
        }
        for (int64_t k = 0; k < width; ++k) finish(k0 + k, acc[k]);
      }
    };
    int64_t blocks = (kept_ + kBlock - 1) / kBlock;
    if (outer_ * kept_ < kParallelMin || !arena_ || blocks == 1) return body(0, blocks);
    parallel_chunks(*arena_, 0, blocks, 1, body);
  }

  static constexpr int64_t kBlock = 256;
  static constexpr int64_t kParallelMin = 65536;
  uint32_t in_, out_;
  int64_t outer_, kept_, inner_;
  bool mean_;
  uint32_t in_dtype_, out_dtype_;  // f32, bf16 or f16
  tbb::task_arena* arena_;
};

}  // namespace

Planned<KernelPlan> make_axis_reduction_plan(const lazylab_kernel& kernel, const std::vector<ValueInfo>& values,
                                             tbb::task_arena* arena) {
  if (kernel.num_ops != 1) return nullptr;
  const lazylab_op& op = kernel.ops[0];
  if ((op.op != LAZYLAB_OP_ReduceSum && op.op != LAZYLAB_OP_ReduceMean) || op.num_attrs < 1) return nullptr;
  const ValueInfo& x = values[op.operands[0]];
  if (!computes_in_f32(x.dtype) || !computes_in_f32(values[op.result].dtype))
    return decline("a sum of values not f32, bf16 or f16");
  if (x.size() == 0) return decline("a sum of no elements");
  std::vector<bool> reduced(x.shape.size(), false);
  const lazylab_attr& axes = op.attrs[0];
  for (uint32_t i = 0; i < axes.num_ints; ++i) {
    if (axes.ints[i] < 0 || axes.ints[i] >= static_cast<int64_t>(reduced.size()))
      return decline("an axis out of range");
    reduced[axes.ints[i]] = true;
  }
  // reduced* kept* reduced*, the kept run not empty
  size_t begin = 0, end = reduced.size();
  while (begin < end && reduced[begin]) ++begin;
  while (end > begin && reduced[end - 1]) --end;
  if (begin == end || std::any_of(reduced.begin() + begin, reduced.begin() + end, [](bool r) { return r; }))
    return nullptr;  // not a sum over leading or trailing axes: the row loops' kind
  int64_t outer = 1, kept = 1, inner = 1;
  for (size_t d = 0; d < x.shape.size(); ++d) (d < begin ? outer : d < end ? kept : inner) *= x.shape[d];
  return std::make_unique<AxisReduction>(op.operands[0], op.result, outer, kept, inner, op.op == LAZYLAB_OP_ReduceMean,
                                         values, arena);
}

}  // namespace lazylab::cpu
