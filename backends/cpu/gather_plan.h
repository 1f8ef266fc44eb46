// A gather along one axis as block copies: for each row of the dims before
// the axis, each index picks one block (the dims after it) of the data.
// Embedding lookups and the kernel flips of a convolution's input gradient
// (38 of them in ResNet-18's training step, 4-6 ms on the reference
// kernels).
#pragma once

#include <tbb/task_arena.h>

#include <memory>

#include "values.h"

namespace lazylab::cpu {

// nullptr unless the kernel is one gather of data with memory by i64 or i32
// indices with memory.
std::unique_ptr<KernelPlan> make_gather_plan(const lazylab_kernel& kernel, const std::vector<ValueInfo>& values,
                                             tbb::task_arena* arena);

}  // namespace lazylab::cpu
