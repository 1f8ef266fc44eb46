// Layout kernels (a transpose, slice, reshape or broadcast) of any dtype as
// the strided copies their descriptions give: the innermost output dimension
// is one run, contiguous in the source when the op keeps the last dimension
// in place.
#pragma once

#include <tbb/task_arena.h>

#include <memory>

#include "values.h"

namespace lazylab::cpu {

// nullptr unless the kernel's description is a layout copy.
std::unique_ptr<KernelPlan> make_layout_plan(const lazylab_kernel& kernel, const std::vector<ValueInfo>& values,
                                             tbb::task_arena* arena);

}  // namespace lazylab::cpu
