// Contractions through OpenBLAS. A kernel holding one f32 matmul, optionally
// with transposes of its operands' last two dimensions (folded into sgemm's
// transpose flags) and an elementwise epilogue over its output.
//
// The epilogue runs as row loops (row_plan.h) on each batch matrix right
// after sgemm writes it, while it is in cache. A single large product keeps
// one sgemm call with the epilogue after it: splitting it into row bands
// would make OpenBLAS pack the whole right operand again for every band,
// which costs more than re-reading the product once (see gemm_plan.cpp).
#pragma once

#include <memory>

#include "openblas_runtime.h"
#include "planned.h"
#include "row_plan.h"
#include "values.h"

namespace lazylab::cpu {

// A plan (planned.h) for such a contraction. The matmul's result must
// have memory (CpuExecutable gives kernel-local products arena space).
Planned<KernelPlan> make_gemm_plan(const lazylab_kernel& kernel, const std::vector<ValueInfo>& values,
                                   const RowPlanOptions& options, const openblas::Runtime& blas);

}  // namespace lazylab::cpu
