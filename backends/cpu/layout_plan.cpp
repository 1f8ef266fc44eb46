#include "layout_plan.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "lazylab/dtype_table.hpp"
#include "parallel.h"
#include "register_transpose.h"

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
    coalesce();
    inner_ = shape_.back();
    rows_ = 1;
    for (size_t d = 0; d + 1 < shape_.size(); ++d) rows_ *= shape_[d];
  }

  void run(const Memory& memory) override {
    auto* in = static_cast<const char*>(memory.address(in_));
    auto* out = static_cast<char*>(memory.address(out_));
    if (auto tiles = tiling())
      return run_tiles(*tiles, reinterpret_cast<const uint32_t*>(in), reinterpret_cast<uint32_t*>(out));
    auto body = [&](int64_t begin, int64_t end) {
      std::vector<int64_t> index(shape_.size() - 1);
      int64_t source = source_of(begin, index);
      for (int64_t row = begin; row < end; ++row) {
        copy_row(in + source * static_cast<int64_t>(element_), out + row * inner_ * static_cast<int64_t>(element_));
        source = next_row(index, source);
      }
    };
    if (rows_ * inner_ < 65536 || !arena_) return body(0, rows_);
    parallel_chunks(*arena_, 0, rows_, std::max<int64_t>(1, 16384 / inner_), body);
  }

 private:
  // Two output dims [.., A, B] swapped in the source (4-byte elements), in
  // units of `unit` contiguous elements: A's source stride is one unit, B's
  // is not. Each output row would read a column, a cache line (or two) per
  // unit; tiles of kTile x kTile units read and write whole lines instead.
  // Units of one element are a plain transpose of the last two dims ([256,
  // 256]: 6 GB/s row by row); units of a kernel's 9 taps are a weight's
  // in/out channels swapped ([128, 128, 3, 3]: 2.4 GB/s in rows of 9, each
  // row a stride of 4.6 KB from the last).
  static constexpr int64_t kTile = 16;
  static constexpr int64_t kLargestUnit = 16;

  struct Tiling {
    size_t a;  // the dim whose source stride is one unit; B is a + 1
    int64_t unit;
  };

  std::optional<Tiling> tiling() const {
    size_t rank = shape_.size();
    if (element_ != 4) return std::nullopt;
    auto swapped = [&](size_t a, int64_t unit) {
      return strides_[a] == unit && strides_[a + 1] != unit && shape_[a] >= kTile && shape_[a + 1] >= kTile;
    };
    if (rank >= 2 && swapped(rank - 2, 1)) return Tiling{rank - 2, 1};
    if (rank >= 3 && strides_[rank - 1] == 1 && inner_ > 1 && inner_ <= kLargestUnit && swapped(rank - 3, inner_))
      return Tiling{rank - 3, inner_};
    return std::nullopt;
  }

  void run_tiles(const Tiling& tiling, const uint32_t* in, uint32_t* out) const {
    size_t a = tiling.a;
    int64_t unit = tiling.unit, height = shape_[a], width = shape_[a + 1], column_stride = strides_[a + 1];
    int64_t planes = 1, bands = (height + kTile - 1) / kTile;
    for (size_t d = 0; d < a; ++d) planes *= shape_[d];
    auto body = [&](int64_t begin, int64_t end) {
      for (int64_t at = begin; at < end; ++at) {
        int64_t plane = at / bands, r0 = (at % bands) * kTile, r1 = std::min(height, r0 + kTile);
        int64_t source = offset_;
        for (size_t d = a, rest = plane; d-- > 0;) {
          source += static_cast<int64_t>(rest % shape_[d]) * strides_[d];
          rest /= shape_[d];
        }
        uint32_t* target = out + plane * height * width * unit;
        if (unit == 1 && turn_in_registers(in + source, r0, r1, column_stride, width, target)) continue;
        for (int64_t c0 = 0; c0 < width; c0 += kTile)
          for (int64_t r = r0, c1 = std::min(width, c0 + kTile); r < r1; ++r)
            for (int64_t c = c0; c < c1; ++c) {
              const uint32_t* from = in + source + r * unit + c * column_stride;
              uint32_t* to = target + (r * width + c) * unit;
              for (int64_t k = 0; k < unit; ++k) to[k] = from[k];
            }
      }
    };
    if (rows_ * inner_ < 65536 || !arena_) return body(0, planes * bands);
    parallel_chunks(*arena_, 0, planes * bands, 1, body);
  }

  // Output rows [r0, r1) of a plane (width elements each, column c read
  // from source + c * column_stride), 16 x 16 blocks turned over in AVX-512
  // registers: element by element, a 1280 x 320 weight's transpose ran at
  // 3 GB/s on a 2-core EPYC. False where the build has no AVX-512.
  static bool turn_in_registers(const uint32_t* source, int64_t r0, int64_t r1, int64_t column_stride, int64_t width,
                                uint32_t* target) {
#if defined(__AVX512F__)
    __mmask16 row_mask = first_lanes(r1 - r0);
    auto* from = reinterpret_cast<const float*>(source);
    auto* to = reinterpret_cast<float*>(target);
    for (int64_t c0 = 0; c0 < width; c0 += kTile) {
      int64_t columns = std::min(kTile, width - c0);
      __m512 block[kTile];
      for (int64_t c = 0; c < kTile; ++c)
        block[c] =
            c < columns ? _mm512_maskz_loadu_ps(row_mask, from + r0 + (c0 + c) * column_stride) : _mm512_setzero_ps();
      transpose_16x16(block);
      for (int64_t r = 0; r < r1 - r0; ++r)
        _mm512_mask_storeu_ps(to + (r0 + r) * width + c0, first_lanes(columns), block[r]);
    }
    return true;
#else
    (void)source, (void)r0, (void)r1, (void)column_stride, (void)width, (void)target;
    return false;
#endif
  }

  // Adjacent dims that the source walks contiguously (the inner one's
  // extent times its stride is the outer one's stride) are one dim: a
  // transpose of [.., 3, 3] kernels then copies rows of 9, not of 3.
  void coalesce() {
    std::vector<int64_t> shape{shape_.back()}, strides{strides_.back()};
    for (size_t d = shape_.size() - 1; d-- > 0;) {
      if (shape_[d] == 1) continue;
      if (shape.front() == 1 || strides_[d] == strides.front() * shape.front()) {
        strides.front() = shape.front() == 1 ? strides_[d] : strides.front();
        shape.front() *= shape_[d];
        continue;
      }
      shape.insert(shape.begin(), shape_[d]);
      strides.insert(strides.begin(), strides_[d]);
    }
    shape_ = std::move(shape);
    strides_ = std::move(strides);
  }

  // The source element where output row `row` starts, and its index.
  int64_t source_of(int64_t row, std::vector<int64_t>& index) const {
    int64_t source = offset_;
    for (size_t d = index.size(); d-- > 0;) {
      index[d] = row % shape_[d];
      source += index[d] * strides_[d];
      row /= shape_[d];
    }
    return source;
  }

  // The next row's source, stepping the index like an odometer.
  int64_t next_row(std::vector<int64_t>& index, int64_t source) const {
    for (size_t d = index.size(); d-- > 0;) {
      source += strides_[d];
      if (++index[d] < shape_[d]) return source;
      source -= shape_[d] * strides_[d];
      index[d] = 0;
    }
    return source;
  }

  void copy_row(const char* src, char* dst) const {
    int64_t step = strides_.back();
    if (step == 1) {
      std::memcpy(dst, src, inner_ * element_);
    } else if (element_ == 4) {
      auto* d32 = reinterpret_cast<uint32_t*>(dst);
      auto* s32 = reinterpret_cast<const uint32_t*>(src);
      for (int64_t i = 0; i < inner_; ++i) d32[i] = s32[i * step];
    } else {
      for (int64_t i = 0; i < inner_; ++i) std::memcpy(dst + i * element_, src + i * step * element_, element_);
    }
  }

  uint32_t in_, out_;
  std::vector<int64_t> shape_, strides_;
  int64_t offset_;
  size_t element_;
  tbb::task_arena* arena_;
  int64_t inner_ = 1, rows_ = 1;
};

// out = in with low[d] and high[d] (never negative) elements of a fill value
// around each dim d: the whole output is filled, then each input row (the
// last dim) copied to its place, found by an odometer over the input's
// leading dims. Going output row by output row cost a division per dim per
// row and a call per filled element: the narrow rows of a small network's
// gradients (4 to 6 elements, or 1 where a stride's dilation interleaves
// zeros) ran at 1.5-3 GB/s.
class PadCopy : public KernelPlan {
 public:
  PadCopy(uint32_t in, uint32_t out, const std::vector<int64_t>& in_shape, const std::vector<int64_t>& out_shape,
          const std::vector<int64_t>& low, std::vector<std::byte> fill, tbb::task_arena* arena)
      : in_(in), out_(out), in_shape_(in_shape), fill_(std::move(fill)), arena_(arena) {
    size_t rank = out_shape.size();
    out_strides_.assign(rank, 1);
    for (size_t d = rank - 1; d-- > 0;) out_strides_[d] = out_strides_[d + 1] * out_shape[d + 1];
    for (size_t d = 0; d < rank; ++d) first_ += low[d] * out_strides_[d];
    out_elements_ = out_strides_[0] * out_shape[0];
    width_ = in_shape_.back();
    for (size_t d = 0; d + 1 < rank; ++d) rows_ *= in_shape_[d];
    zero_fill_ = std::all_of(fill_.begin(), fill_.end(), [](std::byte b) { return b == std::byte{0}; });
  }

  void run(const Memory& memory) override {
    auto* in = static_cast<const std::byte*>(memory.address(in_));
    auto* out = static_cast<std::byte*>(memory.address(out_));
    bool parallel = arena_ && out_elements_ * static_cast<int64_t>(fill_.size()) >= (int64_t{1} << 20);
    int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(width_, 1));
    auto fill = [&](int64_t begin, int64_t end) { fill_elements(out, begin, end); };
    auto copy = [&](int64_t begin, int64_t end) { copy_rows(in, out, begin, end); };
    if (!parallel) return fill(0, out_elements_), copy(0, rows_);
    parallel_chunks(*arena_, 0, out_elements_, 65536, fill);
    parallel_chunks(*arena_, 0, rows_, grain, copy);
  }

 private:
  void fill_elements(std::byte* out, int64_t begin, int64_t end) const {
    size_t element = fill_.size();
    std::byte* at = out + begin * element;
    if (zero_fill_) return static_cast<void>(std::memset(at, 0, (end - begin) * element));
    if (begin == end) return;
    std::memcpy(at, fill_.data(), element);  // then doubling copies of what is filled
    for (int64_t done = 1, count = end - begin; done < count; done *= 2)
      std::memcpy(at + done * element, at, std::min(done, count - done) * element);
  }

  void copy_rows(const std::byte* in, std::byte* out, int64_t begin, int64_t end) const {
    size_t element = fill_.size(), leading = in_shape_.size() - 1;
    std::vector<int64_t> index(leading);
    int64_t target = first_;
    for (size_t d = leading, rest = begin; d-- > 0;) {  // row `begin`'s place
      index[d] = static_cast<int64_t>(rest % in_shape_[d]);
      rest /= in_shape_[d];
      target += index[d] * out_strides_[d];
    }
    size_t bytes = width_ * element;
    for (int64_t row = begin; row < end; ++row) {
      std::memcpy(out + target * element, in + row * bytes, bytes);
      for (size_t d = leading; d-- > 0;) {  // the next row's place
        target += out_strides_[d];
        if (++index[d] < in_shape_[d]) break;
        target -= index[d] * out_strides_[d];
        index[d] = 0;
      }
    }
  }

  uint32_t in_, out_;
  std::vector<int64_t> in_shape_, out_strides_;
  std::vector<std::byte> fill_;  // one element of the fill value, as stored
  tbb::task_arena* arena_;
  int64_t first_ = 0;  // the output element input element 0 goes to
  int64_t out_elements_ = 0, width_ = 0, rows_ = 1;
  bool zero_fill_ = false;
};

// The fill value of a pad op (a scalar attribute: a float's in `f`, an
// integer's or bool's exactly in `i`) as one stored element of `dtype`.
std::optional<std::vector<std::byte>> fill_element(const lazylab_attr& value, uint32_t dtype) {
  if (!dtypes::known(dtype)) return std::nullopt;
  return dtypes::visit(dtype, [&]<class T>(T) {
    T v = dtypes::is_float(dtype)                     ? static_cast<T>(value.f)
          : dtypes::kind(dtype) == dtypes::Kind::Bool ? static_cast<T>(value.i != 0)
                                                      : static_cast<T>(value.i);
    std::vector<std::byte> out(sizeof v);
    std::memcpy(out.data(), &v, sizeof v);
    return out;
  });
}

Planned<KernelPlan> make_pad_plan(const lazylab_kernel& kernel, const std::vector<ValueInfo>& values,
                                  tbb::task_arena* arena) {
  const lazylab_op& op = kernel.ops[0];
  const ValueInfo &in = values[op.operands[0]], &out = values[op.result];
  if (in.kind == LAZYLAB_VALUE_KERNEL_LOCAL || out.kind == LAZYLAB_VALUE_KERNEL_LOCAL)
    return decline("the pad's operand or result has no memory");
  if (out.shape.empty() || in.size() == 0 || op.num_attrs < 3 || op.attrs[0].num_ints != out.shape.size())
    return decline("a pad of a scalar or of no elements");
  auto fill = fill_element(op.attrs[2], out.dtype);
  if (!fill || static_cast<int64_t>(fill->size()) * out.size() != static_cast<int64_t>(out.bytes))
    return decline("no fill element for the result's dtype");
  return std::make_unique<PadCopy>(op.operands[0], op.result, in.shape, out.shape,
                                   std::vector<int64_t>(op.attrs[0].ints, op.attrs[0].ints + op.attrs[0].num_ints),
                                   std::move(*fill), arena);
}

}  // namespace

Planned<KernelPlan> make_layout_plan(const lazylab_kernel& kernel, const std::vector<ValueInfo>& values,
                                     tbb::task_arena* arena) {
  if (kernel.num_ops == 1 && kernel.ops[0].op == LAZYLAB_OP_Pad) return make_pad_plan(kernel, values, arena);
  if (!lazylab_kernel_described(&kernel) || kernel.kind != LAZYLAB_KERNEL_LAYOUT) return nullptr;
  // A view of the first op's operand, written to the last op's result (a
  // chain of layout ops, ABI 3.3).
  uint32_t source = kernel.ops[0].operands[0], result = kernel.ops[kernel.num_ops - 1].result;
  const ValueInfo &in = values[source], &out = values[result];
  if (out.kind == LAZYLAB_VALUE_KERNEL_LOCAL) return decline("the copy's result has no memory");
  const lazylab_layout& layout = kernel.layout;
  size_t element = in.size() ? in.bytes / in.size() : 1;
  return std::make_unique<StridedCopy>(source, result, std::vector<int64_t>(layout.shape, layout.shape + layout.rank),
                                       std::vector<int64_t>(layout.strides, layout.strides + layout.rank),
                                       layout.offset, element, arena);
}

}  // namespace lazylab::cpu
