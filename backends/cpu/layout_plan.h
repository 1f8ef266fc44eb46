// Layout ops (transpose/permute, slice, reshape) of any dtype as strided
// copies: the innermost output dimension is one run, contiguous in the
// source when the op keeps the last dimension in place.
#pragma once

#include <tbb/task_arena.h>

#include <memory>

#include "values.h"

namespace lazylab::cpu {

// nullptr unless the kernel is one transpose, slice or reshape.
std::unique_ptr<KernelPlan> make_layout_plan(const lazylab_kernel& kernel, const std::vector<ValueInfo>& values,
                                             tbb::task_arena* arena);

}  // namespace lazylab::cpu
