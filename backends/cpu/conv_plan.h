// 2-D convolution through OpenBLAS: for each image and group, the input's
// windows are unfolded into columns (im2col, skipped for 1x1 kernels at
// stride 1 without padding, where the input already is that matrix) and one
// sgemm multiplies the group's filters by them, writing the output plane in
// place. The unfolded matrix is KH*KW times the input: memory traded for
// sgemm's blocking, which a direct loop nest would have to reproduce.
// Depthwise convolutions (one input channel per filter) are summed directly:
// there each product would be an sgemm with one row.
#pragma once

#include <memory>

#include "openblas_runtime.h"
#include "row_plan.h"
#include "values.h"

namespace lazylab::cpu {

// nullptr unless the kernel is one f32 conv2d, alone or with its epilogue (a
// window kernel: the epilogue runs on each image's channels right after its
// products, while they are in cache). The conv2d's result must have memory
// (CpuExecutable gives a kernel-local one arena space).
std::unique_ptr<KernelPlan> make_conv_plan(const lazylab_kernel& kernel, const std::vector<ValueInfo>& values,
                                           const RowPlanOptions& options, const openblas::Runtime& blas);

}  // namespace lazylab::cpu
