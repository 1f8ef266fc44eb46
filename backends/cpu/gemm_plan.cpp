#include "gemm_plan.h"

#include <cblas.h>

namespace lazylab::cpu {
namespace {

struct Operand {
  uint32_t value;
  bool transposed = false;
};

class GemmPlan : public KernelPlan {
 public:
  GemmPlan(Operand a, Operand b, uint32_t out, const ValueInfo& out_info, int64_t k,
           std::unique_ptr<KernelPlan> epilogue)
      : a_(a), b_(b), out_(out), k_(k), epilogue_(std::move(epilogue)) {
    size_t r = out_info.shape.size();
    m_ = out_info.shape[r - 2];
    n_ = out_info.shape[r - 1];
    batches_ = out_info.size() / (m_ * n_);
  }

  void run(const Memory& memory) override {
    const float* a = memory.f32(a_.value);
    const float* b = memory.f32(b_.value);
    float* c = memory.f32(out_);
    auto trans_a = a_.transposed ? CblasTrans : CblasNoTrans, trans_b = b_.transposed ? CblasTrans : CblasNoTrans;
    int64_t lda = a_.transposed ? m_ : k_, ldb = b_.transposed ? k_ : n_;
    for (int64_t batch = 0; batch < batches_; ++batch)
      cblas_sgemm(CblasRowMajor, trans_a, trans_b, m_, n_, k_, 1.0f, a + batch * m_ * k_, lda, b + batch * k_ * n_, ldb,
                  0.0f, c + batch * m_ * n_, n_);
    if (epilogue_) epilogue_->run(memory);
  }

 private:
  Operand a_, b_;
  uint32_t out_;
  int64_t m_ = 0, n_ = 0, k_, batches_ = 0;
  std::unique_ptr<KernelPlan> epilogue_;
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
                                           const RowPlanOptions& options) {
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
  std::unique_ptr<KernelPlan> epilogue_plan;
  if (!epilogue.empty()) {
    lazylab_kernel part{
        sizeof(lazylab_kernel), static_cast<uint32_t>(epilogue.size()), epilogue.data(), 0, nullptr, 0, nullptr};
    epilogue_plan = make_row_plan(part, values, options);
    if (!epilogue_plan) return nullptr;
  }
  int64_t k = values[matmul->operands[0]].shape.back();
  return std::make_unique<GemmPlan>(a, b, matmul->result, values[matmul->result], k, std::move(epilogue_plan));
}

}  // namespace lazylab::cpu
