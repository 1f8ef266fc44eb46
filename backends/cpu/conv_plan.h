// 2-D convolution through OpenBLAS: for each image and group, the input's
// windows are unfolded into columns (im2col, skipped for 1x1 kernels at
// stride 1 without padding, where the input already is that matrix) and one
// sgemm multiplies the group's filters by them, writing the output plane in
// place. The unfolded matrix is KH*KW times the input: memory traded for
// sgemm's blocking, which a direct loop nest would have to reproduce.
#pragma once

#include <memory>

#include "openblas_runtime.h"
#include "row_plan.h"
#include "values.h"

namespace lazylab::cpu {

// nullptr unless the kernel is one f32 conv2d.
std::unique_ptr<KernelPlan> make_conv_plan(const lazylab_kernel& kernel, const std::vector<ValueInfo>& values,
                                           const RowPlanOptions& options, const openblas::Runtime& blas);

}  // namespace lazylab::cpu
