#include "gemm_plan.h"

#include <cblas.h>

namespace lazylab::cpu {
namespace {

class GemmPlan : public KernelPlan {
 public:
  GemmPlan(uint32_t a, uint32_t b, uint32_t out, const ValueInfo& out_info, int64_t k)
      : a_(a), b_(b), out_(out), k_(k) {
    size_t r = out_info.shape.size();
    m_ = out_info.shape[r - 2];
    n_ = out_info.shape[r - 1];
    batches_ = out_info.size() / (m_ * n_);
  }

  void run(const Memory& memory) override {
    const float* a = memory.f32(a_);
    const float* b = memory.f32(b_);
    float* c = memory.f32(out_);
    for (int64_t batch = 0; batch < batches_; ++batch)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m_, n_, k_, 1.0f, a + batch * m_ * k_, k_,
                  b + batch * k_ * n_, n_, 0.0f, c + batch * m_ * n_, n_);
  }

 private:
  uint32_t a_, b_, out_;
  int64_t m_ = 0, n_ = 0, k_, batches_ = 0;
};

}  // namespace

std::unique_ptr<KernelPlan> make_gemm_plan(const lazylab_kernel& kernel, const std::vector<ValueInfo>& values) {
  if (kernel.num_ops != 1 || kernel.ops[0].op != LAZYLAB_OP_Matmul) return nullptr;
  const lazylab_op& op = kernel.ops[0];
  const ValueInfo& a = values[op.operands[0]];
  if (a.dtype != LAZYLAB_F32 || values[op.result].kind == LAZYLAB_VALUE_KERNEL_LOCAL) return nullptr;
  return std::make_unique<GemmPlan>(op.operands[0], op.operands[1], op.result, values[op.result], a.shape.back());
}

}  // namespace lazylab::cpu
