// Attention kernels (ABI 3.4's LAZYLAB_KERNEL_ATTENTION) through OpenBLAS:
// per batch and block of query rows, the scores of the block into a scratch
// buffer that stays in this core's L2 (one sgemm), the softmax over each row
// there (scale, causal mask, max, exp), the second product from it (one
// sgemm), and each output row divided by its sum. The scores never go to
// memory; blocks run one per TBB thread, OpenBLAS single-threaded. A causal
// mask shortens each block's products to the keys its last row sees.
#pragma once

#include <memory>

#include "openblas_runtime.h"
#include "planned.h"
#include "row_plan.h"
#include "values.h"

namespace lazylab::cpu {

// A plan (planned.h) for an attention kernel of f32 values.
Planned<KernelPlan> make_attention_plan(const lazylab_kernel& kernel, const std::vector<ValueInfo>& values,
                                        const RowPlanOptions& options, const openblas::Runtime& blas);

}  // namespace lazylab::cpu
