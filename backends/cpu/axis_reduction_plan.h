// Sums and means of f32 values over leading and trailing axes around a kept
// middle: a bias's gradient ([tokens, channels] summed over tokens) and batch
// norm's statistics ([N, C, H, W] over N, H and W). The fused row loops
// reduce only the last axis; these ran on the reference kernels (ResNet-18's
// training step: 11 ms of 79).
#pragma once

#include <tbb/task_arena.h>

#include <memory>

#include "planned.h"
#include "values.h"

namespace lazylab::cpu {

// A plan (planned.h) only if the kernel is one reduce_sum or reduce_mean of f32 values
// whose reduced axes are a leading and a trailing run (either may be empty).
Planned<KernelPlan> make_axis_reduction_plan(const lazylab_kernel& kernel, const std::vector<ValueInfo>& values,
                                             tbb::task_arena* arena);

}  // namespace lazylab::cpu
