// A gather along one axis as block copies: for each row of the dims before
// the axis, each index picks one block (the dims after it) of the data.
// Embedding lookups and the kernel flips of a convolution's input gradient
// (38 of them in ResNet-18's training step, 4-6 ms on the reference
// kernels).
#pragma once

#include <tbb/task_arena.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "planned.h"
#include "values.h"

namespace lazylab::cpu {

// Each index of value `indices` (i64 or i32) as a row of an axis of
// `extent` (negative ones count from its end), or the reference's error for
// one out of range, naming `op` (gather, scatter_add).
std::vector<int64_t> checked_indices(const Memory& memory, uint32_t indices, int64_t extent, const char* op);

// A plan (planned.h) only if the kernel is one gather of data with memory by i64 or i32
// indices with memory.
Planned<KernelPlan> make_gather_plan(const lazylab_kernel& kernel, const std::vector<ValueInfo>& values,
                                     tbb::task_arena* arena);

}  // namespace lazylab::cpu
