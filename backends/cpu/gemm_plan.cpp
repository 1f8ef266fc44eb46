#include "gemm_plan.h"

#include "parallel.h"

namespace lazylab::cpu {
namespace {

struct Operand {
  uint32_t value;
  bool transposed = false;
};

class GemmPlan : public KernelPlan {
 public:
  GemmPlan(Operand a, Operand b, uint32_t out, const ValueInfo& out_info, int64_t k,
           std::unique_ptr<RowKernelPlan> epilogue, const RowPlanOptions& options, const openblas::Runtime& blas)
      : a_(a), b_(b), out_(out), k_(k), epilogue_(std::move(epilogue)), arena_(options.arena), blas_(blas) {
    size_t r = out_info.shape.size();
    m_ = out_info.shape[r - 2];
    n_ = out_info.shape[r - 1];
    batches_ = out_info.size() / (m_ * n_);
    epilogue_per_batch_ = epilogue_ && epilogue_->rows() == batches_ * m_ && epilogue_->cols() == n_;
    threads_ = arena_ ? arena_->max_concurrency() : 1;
    batches_in_parallel_ = threads_ > 1 && batches_ >= threads_ && m_ * n_ * k_ <= kSmallProduct;
  }

  void run(const Memory& memory) override {
    if (batches_in_parallel_) {
      // Small products keep one thread busy each; OpenBLAS's own threads would
      // only synchronise. One thread per sgemm, so calls do not contend.
      blas_.set_num_threads(1);
      parallel_chunks(*arena_, 0, batches_, 1, [&](int64_t first, int64_t end) {
        for (int64_t batch = first; batch < end; ++batch) run_batch(memory, batch);
      });
      blas_.set_num_threads(threads_);
    } else {
      for (int64_t batch = 0; batch < batches_; ++batch) run_batch(memory, batch);
    }
    if (epilogue_ && !epilogue_per_batch_) epilogue_->run(memory);
  }

 private:
  // 256 x 256 x 64 (one attention head's Q K^T) is small; a 256 x 3072 x 768
  // projection is not.
  static constexpr int64_t kSmallProduct = int64_t{1} << 23;

  void run_batch(const Memory& memory, int64_t batch) {
    const float* a = memory.f32(a_.value) + batch * m_ * k_;
    const float* b = memory.f32(b_.value) + batch * k_ * n_;
    float* c = memory.f32(out_) + batch * m_ * n_;
    auto trans_a = a_.transposed ? CblasTrans : CblasNoTrans, trans_b = b_.transposed ? CblasTrans : CblasNoTrans;
    int64_t lda = a_.transposed ? m_ : k_, ldb = b_.transposed ? k_ : n_;
    blas_.sgemm(CblasRowMajor, trans_a, trans_b, m_, n_, k_, 1.0f, a, lda, b, ldb, 0.0f, c, n_);
    if (epilogue_per_batch_) epilogue_->run_rows(memory, batch * m_, (batch + 1) * m_);
  }

  Operand a_, b_;
  uint32_t out_;
  int64_t m_ = 0, n_ = 0, k_, batches_ = 0;
  std::unique_ptr<RowKernelPlan> epilogue_;
  bool epilogue_per_batch_ = false, batches_in_parallel_ = false;
  tbb::task_arena* arena_;
  int threads_ = 1;
  const openblas::Runtime& blas_;
};

bool swaps_last_two(const lazylab_op& op) {
  const lazylab_attr& perm = op.attrs[0];
  uint32_t rank = perm.num_ints;
  if (rank < 2 || perm.ints[rank - 1] != rank - 2 || perm.ints[rank - 2] != rank - 1) return false;
  for (uint32_t d = 0; d + 2 < rank; ++d)
    if (perm.ints[d] != d) return false;
  return true;
}

}  // namespace

std::unique_ptr<KernelPlan> make_gemm_plan(const lazylab_kernel& kernel, const std::vector<ValueInfo>& values,
                                           const RowPlanOptions& options, const openblas::Runtime& blas) {
  const lazylab_op* matmul = nullptr;
  std::vector<const lazylab_op*> transposes;
  std::vector<lazylab_op> epilogue;
  for (uint32_t i = 0; i < kernel.num_ops; ++i) {
    const lazylab_op& op = kernel.ops[i];
    if (op.op == LAZYLAB_OP_Matmul) {
      if (matmul) return nullptr;
      matmul = &op;
    } else if (op.op == LAZYLAB_OP_Transpose && swaps_last_two(op) &&
               values[op.result].kind == LAZYLAB_VALUE_KERNEL_LOCAL) {
      transposes.push_back(&op);
    } else {
      epilogue.push_back(op);
    }
  }
  if (!matmul || values[matmul->operands[0]].dtype != LAZYLAB_F32) return nullptr;
  // A transpose folds into the product only as one of its operands.
  auto operand = [&](uint32_t value) {
    for (const lazylab_op* t : transposes)
      if (t->result == value) return Operand{t->operands[0], true};
    return Operand{value, false};
  };
  Operand a = operand(matmul->operands[0]), b = operand(matmul->operands[1]);
  if (transposes.size() != static_cast<size_t>(a.transposed + b.transposed)) return nullptr;
  if (values[matmul->result].kind == LAZYLAB_VALUE_KERNEL_LOCAL) return nullptr;  // needs memory
  std::unique_ptr<RowKernelPlan> epilogue_plan;
  if (!epilogue.empty()) {
    lazylab_kernel part{
        sizeof(lazylab_kernel), static_cast<uint32_t>(epilogue.size()), epilogue.data(), 0, nullptr, 0, nullptr};
    epilogue_plan = make_row_plan(part, values, options);
    if (!epilogue_plan) return nullptr;
  }
  int64_t k = values[matmul->operands[0]].shape.back();
  return std::make_unique<GemmPlan>(a, b, matmul->result, values[matmul->result], k, std::move(epilogue_plan), options,
                                    blas);
}

}  // namespace lazylab::cpu
