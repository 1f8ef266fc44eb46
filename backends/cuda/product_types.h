// What cuBLASLt computes a product of each dtype in: the type of its
// operands and result, its compute type and the type of its scale (alpha).
// 16-bit products accumulate in f32 and round once into their dtype, as the
// interpreter's product rounds once; a dtype without an entry runs its
// products as generated code (codegen.cpp says so in the kernel's note).
#pragma once

#include <cublasLt.h>

#include <cstdint>
#include <optional>

#include "lazylab/backend_abi.h"

namespace lazylab::cuda {

struct ProductTypes {
  cudaDataType_t data;
  cublasComputeType_t compute;
  cudaDataType_t scale;
};

// `tf32`: f32 products on TF32 tensor cores (the backend's option).
inline std::optional<ProductTypes> product_types(uint32_t dtype, bool tf32) {
  switch (dtype) {
    case LAZYLAB_F32:
      return ProductTypes{CUDA_R_32F, tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUDA_R_32F};
    case LAZYLAB_BF16: return ProductTypes{CUDA_R_16BF, CUBLAS_COMPUTE_32F, CUDA_R_32F};
    case LAZYLAB_F16: return ProductTypes{CUDA_R_16F, CUBLAS_COMPUTE_32F, CUDA_R_32F};
    default: return std::nullopt;
  }
}

}  // namespace lazylab::cuda
