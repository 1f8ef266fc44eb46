// A convolution as a product on cuBLASLt: each image's windows unfolded into
// columns [C KH KW, OH OW] (im2col; a pointwise convolution's input is that
// matrix already), multiplied by the weights [O, C KH KW], which every image
// reads, into [O, OH OW]: the result in NCHW. A generated function unfolds;
// cuBLASLt multiplies on the tensor cores in bf16 and f16 (and f32 on TF32
// where the backend's option says), in f32 on the CUDA cores otherwise.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "codegen.h"

namespace lazylab::cuda {

// The most bytes the unfolded windows may take: past it, the convolution
// runs as the generated direct kernel.
inline constexpr uint64_t kMaxColumnsBytes = uint64_t{256} << 20;

// Why convolution `op` is not a product here (groups, a dtype cuBLASLt does
// not multiply, no elements, too many unfolded windows); nullopt if it is.
std::optional<std::string> convolution_product_refusal(const lazylab_program& program, const lazylab_op& op);

struct ConvolutionProduct {
  lazylab_contraction contraction{};  // batch = images, m = filters, n = positions, k = taps; lhs shared
  uint64_t columns_bytes = 0;         // 0: pointwise, the input read as it is
};

// The product of convolution `op`, its windows unfolded into value
// `columns` (a pointwise one reads its input instead).
ConvolutionProduct convolution_product(const lazylab_program& program, const lazylab_op& op, uint32_t columns);

// The function unfolding convolution `op`'s windows into `columns` (a thread
// per element, zeros where a tap falls in the padding), and its launch.
std::string unfold_function(const lazylab_program& program, const lazylab_op& op, uint32_t columns,
                            const std::string& name, Launch& launch);

}  // namespace lazylab::cuda
