// Max pooling of f32 images, plane by plane in parallel: ResNet's stem pool
// on the reference kernels took 1.4 ms of a 32x32 training step.
#pragma once

#include <tbb/task_arena.h>

#include <memory>

#include "planned.h"
#include "values.h"

namespace lazylab::cpu {

// A plan (planned.h) only if the kernel is one max_pool2d of f32 values with memory.
Planned<KernelPlan> make_pool_plan(const lazylab_kernel& kernel, const std::vector<ValueInfo>& values,
                                   tbb::task_arena* arena);

}  // namespace lazylab::cpu
