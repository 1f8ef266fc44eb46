// Contractions through OpenBLAS: a kernel holding one f32 matmul becomes
// one cblas_sgemm per batch entry.
#pragma once

#include <memory>

#include "values.h"

namespace lazylab::cpu {

// nullptr if the kernel is not a single f32 matmul.
std::unique_ptr<KernelPlan> make_gemm_plan(const lazylab_kernel& kernel, const std::vector<ValueInfo>& values);

}  // namespace lazylab::cpu
