// Layout kernels (a transpose, slice, reshape or broadcast) of any dtype as
// the strided copies their descriptions give: the innermost output dimension
// is one run, contiguous in the source when the op keeps the last dimension
// in place.
#pragma once

#include <tbb/task_arena.h>

#include <memory>

#include "planned.h"
#include "values.h"

namespace lazylab::cpu {

// A plan (planned.h) only if the kernel's description is a layout copy.
Planned<KernelPlan> make_layout_plan(const lazylab_kernel& kernel, const std::vector<ValueInfo>& values,
                                     tbb::task_arena* arena);

}  // namespace lazylab::cpu
