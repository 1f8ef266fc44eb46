// 2-D convolution. On AVX-512 builds (the backend's direct-conv option on)
// a convolution in groups of 1 is computed directly over its input's phase
// planes (phase_conv.h) and a depthwise 3x3 one at stride 1 or 2 in tiles
// of rows (depthwise_conv.h), each handing its blocks of outputs to the
// epilogue while they are in L1; the weight gradients' shapes below keep
// their own kernels. Otherwise, mostly through OpenBLAS: the input's windows are
// unfolded into columns (im2col, skipped for 1x1 kernels at stride 1
// without padding, where the input already is that matrix) and sgemm
// multiplies the filters by them: one product per image and group where an
// image has many output positions; for few positions (a small image's late
// stages) the images' columns side by side in one product, which OpenBLAS
// blocks far better than a product a few columns wide per image; and for a
// weight gradient's image-sized kernel, every window packed as a row. The
// unfolded matrix is KH*KW times the input: memory traded for sgemm's
// blocking. Small products at stride 1 whose output rows fill AVX registers
// are computed directly instead (direct_conv.h), where the unfolding and
// OpenBLAS's packing of it cost more than the product, and so are stride-1
// weight gradients, each output a dot product (large_kernel_conv.h). Depthwise
// convolutions (one input channel per filter) are summed directly: there
// each product would be an sgemm with one row.
#pragma once

#include <memory>

#include "openblas_runtime.h"
#include "planned.h"
#include "row_plan.h"
#include "values.h"

namespace lazylab::cpu {

// A plan (planned.h) only if the kernel is one f32 conv2d, alone or with its epilogue (a
// window kernel: the epilogue runs over the output once all its products
// are written). The conv2d's result must have memory
// (CpuExecutable gives a kernel-local one arena space).
Planned<KernelPlan> make_conv_plan(const lazylab_kernel& kernel, const std::vector<ValueInfo>& values,
                                   const RowPlanOptions& options, const openblas::Runtime& blas);

}  // namespace lazylab::cpu
