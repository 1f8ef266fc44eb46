#include "attention_plan.h"

#include <tbb/enumerable_thread_specific.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "attention_products.h"
#include "parallel.h"
#include "register_run.h"
#include "row_reductions.h"

namespace lazylab::cpu {
namespace {

class AttentionPlan : public KernelPlan {
 public:
  AttentionPlan(const lazylab_attention& a, const lazylab_attention_mask& mask, const RowPlanOptions& options,
                const openblas::Runtime& blas)
      : a_(a), mask_(mask), arena_(options.arena), blas_(blas) {
    threads_ = arena_ ? arena_->max_concurrency() : 1;
    block_rows_ = std::clamp<int64_t>(kScratchFloats / std::max<int64_t>(a_.n, 1), 1, std::max<int64_t>(a_.m, 1));
    blocks_ = (a_.m + block_rows_ - 1) / block_rows_;
  }

  void run(const Memory& memory) override {
    int64_t tasks = a_.batch * blocks_;
    if (tasks == 0) return;
    auto chunk = [&](int64_t first, int64_t end) {
      Scratch& scratch = scratch_.local();
      scratch.scores.resize(static_cast<size_t>(block_rows_ * a_.n));
      scratch.sums.resize(static_cast<size_t>(block_rows_));
      if (kHasAttentionProducts && a_.k_transposed)
        scratch.keys.resize(static_cast<size_t>(transposed_keys_floats(a_.n, a_.d)));
      for (int64_t task = first; task < end; ++task) run_block(memory, task, scratch);
    };
    if (threads_ > 1 && arena_) {
      // Each block is small: one thread each; OpenBLAS's own would only wait.
      blas_.set_num_threads(1);
      parallel_chunks(*arena_, 0, tasks, 1, chunk);
      blas_.set_num_threads(threads_);
    } else {
      chunk(0, tasks);
    }
  }

 private:
  // A block's scores, 256 KiB: in L2 between the two products.
  static constexpr int64_t kScratchFloats = 65536;

  // Kept per thread across chunks and steps: a chunk's own allocation of
  // the scores was a fresh mapping each time (past malloc's mmap threshold),
  // zeroed and faulted in page by page.
  struct Scratch {
    std::vector<float> scores, sums;
    std::vector<float> keys;  // k as [d][keys], where the graph gives it as [keys][d]
  };

  // What one block reads and writes.
  struct Block {
    int64_t r0, rows, keys;
    const float *q, *k, *v;
    float* out;
  };

  Block block(const Memory& memory, int64_t task) const {
    int64_t batch = task / blocks_, r0 = task % blocks_ * block_rows_;
    int64_t rows = std::min(block_rows_, a_.m - r0);
    // Causal: no row of the block sees a key past its last row.
    int64_t keys = a_.causal ? std::min(a_.n, r0 + rows) : a_.n;
    return {r0,
            rows,
            keys,
            memory.f32(a_.q) + (batch * a_.m + r0) * a_.d,
            memory.f32(a_.k) + batch * a_.n * a_.d,
            memory.f32(a_.v) + batch * a_.n * a_.dv,
            memory.f32(a_.output) + (batch * a_.m + r0) * a_.dv};
  }

  void run_block(const Memory& memory, int64_t task, Scratch& scratch) const {
    auto [r0, rows, keys, q, k, v, out] = block(memory, task);
    if (keys == 0) return;
    float *scores = scratch.scores.data(), *sums = scratch.sums.data();
    auto numerators = [&] {
      for (int64_t i = 0; i < rows; ++i) {
        int64_t seen = a_.causal ? std::min(keys, r0 + i + 1) : keys;
        if (mask_.value != LAZYLAB_NO_MASK) mask_row(memory, r0 + i, scores + i * keys, keys);
        sums[i] = softmax_numerators(scores + i * keys, seen, keys);
      }
    };
#if defined(__AVX512F__)
    KeysByDimension by_dimension = a_.k_transposed ? transpose_keys(k, keys, a_.d, a_.d, scratch.keys.data())
                                                   : KeysByDimension{k, a_.n, kKeyPanel};
    scaled_scores(q, rows, a_.d, a_.d, by_dimension, keys, static_cast<float>(a_.scale), scores);
    numerators();
    weighted_values(scores, rows, keys, v, a_.dv, sums, out);
#else
    blas_.sgemm(CblasRowMajor, CblasNoTrans, a_.k_transposed ? CblasTrans : CblasNoTrans, rows, keys, a_.d,
                static_cast<float>(a_.scale), q, a_.d, k, a_.k_transposed ? a_.d : a_.n, 0.0f, scores, keys);
    numerators();
    blas_.sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, a_.dv, keys, 1.0f, scores, keys, v, a_.dv, 0.0f, out,
                a_.dv);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t c = 0; c < a_.dv; ++c) out[i * a_.dv + c] /= sums[i];
#endif
  }

  // A mask read from memory (ABI 3.15): -inf where mask[row, j] is not
  // the value that keeps the score (a bool [m, n], the same for each batch).
  void mask_row(const Memory& memory, int64_t row, float* scores, int64_t keys) const {
    const auto* mask = static_cast<const uint8_t*>(memory.address(mask_.value)) + row * a_.n;
    bool keep = mask_.keep_where != 0;
    for (int64_t j = 0; j < keys; ++j)
      if ((mask[j] != 0) != keep) scores[j] = -std::numeric_limits<float>::infinity();
  }

  // row[j] = exp(row[j] - max) for the `seen` keys, 0 for the rest (masked:
  // exp(-inf) is 0); returns their sum. The scores come scaled from the
  // product (its alpha: one rounding of the sum times the scale, as the
  // graph's multiply). max propagates NaN, as the reference's.
  float softmax_numerators(float* row, int64_t seen, int64_t keys) const {
    float sum = 0;
    RunOperand peak[] = {{nullptr, reduce_row(LAZYLAB_OP_ReduceMax, row, seen)}, {}};
    execute_run(row, row, numerator_steps_, peak, seen, &sum);
    std::fill(row + seen, row + keys, 0.0f);
    return sum;
  }

  // x - the row's max, then exp: one register run, with the sum.
  const std::vector<RunStep> numerator_steps_ = {{LAZYLAB_OP_Sub, RunStep::Scalar, true}, {LAZYLAB_OP_Exp}};
  lazylab_attention a_;
  lazylab_attention_mask mask_;
  tbb::enumerable_thread_specific<Scratch> scratch_;
  int64_t block_rows_ = 1, blocks_ = 0;
  tbb::task_arena* arena_;
  int threads_ = 1;
  const openblas::Runtime& blas_;
};

}  // namespace

Planned<KernelPlan> make_attention_plan(const lazylab_kernel& kernel, const std::vector<ValueInfo>& values,
                                        const RowPlanOptions& options, const openblas::Runtime& blas) {
  if (kernel.kind != LAZYLAB_KERNEL_ATTENTION || !lazylab_kernel_has_attention(&kernel)) return nullptr;
  const lazylab_attention& a = kernel.attention;
  for (uint32_t v : {a.q, a.k, a.v, a.output})
    if (values[v].dtype != LAZYLAB_F32) return decline("the attention's values are not all f32");
  lazylab_attention_mask mask{lazylab_kernel_attention_mask(&kernel), 1};
  if (mask.value != LAZYLAB_NO_MASK) mask.keep_where = kernel.attention_mask.keep_where;
  return std::make_unique<AttentionPlan>(a, mask, options, blas);
}

}  // namespace lazylab::cpu
