// Contractions through OpenBLAS. A kernel holding one f32 matmul, optionally
// with transposes of its operands' last two dimensions (folded into sgemm's
// transpose flags) and an elementwise epilogue over its output (run right
// after the product, as row loops over the result while it is warm in cache).
#pragma once

#include <memory>

#include "row_plan.h"
#include "values.h"

namespace lazylab::cpu {

// nullptr if the kernel is not such a contraction. The matmul's result must
// have memory (CpuExecutable gives kernel-local products arena space).
std::unique_ptr<KernelPlan> make_gemm_plan(const lazylab_kernel& kernel, const std::vector<ValueInfo>& values,
                                           const RowPlanOptions& options);

}  // namespace lazylab::cpu
