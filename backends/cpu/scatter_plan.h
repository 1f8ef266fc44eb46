// scatter_add (gather's adjoint: an embedding's gradient) as block adds:
// the data copied to the result, then each index's block of updates added to
// the block it names, in index order.
#pragma once

#include <tbb/task_arena.h>

#include <memory>

#include "planned.h"
#include "values.h"

namespace lazylab::cpu {

// A plan (planned.h) only if the kernel is one scatter_add of f32 values with memory by
// i64 or i32 indices with memory.
Planned<KernelPlan> make_scatter_plan(const lazylab_kernel& kernel, const std::vector<ValueInfo>& values,
                                      tbb::task_arena* arena);

}  // namespace lazylab::cpu
