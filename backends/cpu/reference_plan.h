// Kernels the cpu backend does not accelerate (layout ops, other dtypes,
// shapes the fused loops cannot index) run op by op on the reference
// kernels, with scratch storage for values local to the kernel.
#pragma once

#include <memory>

#include "values.h"

namespace lazylab::cpu {

std::unique_ptr<KernelPlan> make_reference_plan(const lazylab_kernel& kernel, const std::vector<ValueInfo>& values);

}  // namespace lazylab::cpu
