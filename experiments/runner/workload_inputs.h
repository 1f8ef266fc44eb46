// Seeded input generation shared by the built-in and file workloads.
#pragma once

#include <random>

#include "workload.h"

namespace lazylab {

// Uniform in [-scale, scale), Normal with deviation scale, Positive in
// [scale / 2, 3 scale / 2) (an optimizer's second moments), Constant: scale
// (a learning rate, a step count).
enum class Fill { Uniform, Normal, Positive, Constant };

// Each input gets its own stream (seed, index), so adding an input does not
// change the others. Uniform draws are in [-1, 1) and never exactly zero.
HostTensor make_random(const TensorType& type, uint64_t seed, uint64_t index, Fill fill = Fill::Uniform,
                       double scale = 1.0);

}  // namespace lazylab
