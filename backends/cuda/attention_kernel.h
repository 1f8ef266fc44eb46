// The attention kernel (ABI 3.4's LAZYLAB_KERNEL_ATTENTION) as CUDA:
// FlashAttention's tiling in f32 on the CUDA cores. A block takes 128 query
// rows of one batch and walks the keys 64 at a time: the scores of the tile
// in registers, the online softmax (a running max and sum per row, the
// accumulated output rescaled when the max grows), the probabilities through
// shared memory into the second product. The scores never reach memory; a
// causal mask skips the tiles above the diagonal.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "codegen.h"

namespace lazylab::cuda {

// The device template every attention launch instantiates (once per
// translation unit).
extern const char* const kAttentionTemplate;

// A mask read from memory (ABI 3.15), as both attention templates take it:
// `kind` is their MASK (0 none, 1 kept where true, 2 where false); the
// generated function's parameter and the argument it passes on.
struct AttentionMask {
  uint32_t value = kNoValue;
  int kind = 0;
  std::string parameter, argument = "nullptr";
};
AttentionMask attention_mask(const lazylab_kernel& kernel);

// Where an attention kernel's q, k, v and output (0 to 3) lie in memory:
// ABI 3.16's views, or from an older host the values' row-major layouts.
struct OperandView {
  int64_t offset = 0, row = 0;
  std::vector<int64_t> batch;  // a stride for each batch dim
};
struct AttentionViews {
  std::vector<int64_t> batch_shape;
  OperandView operands[4];
  // Whether operand i's offset and strides are multiples of `elements`.
  bool aligned(int i, int64_t elements) const;
};
AttentionViews attention_views(const lazylab_kernel& kernel);

// The generated __global__ function's local struct `Views` that the
// attention templates take: at(operand, batch), the operand's first element
// of that batch, and row(operand), between its rows (dims of one batch
// dropped, the batch index split into the others with constants).
std::string views_struct(const AttentionViews& views);

// The launch the attention kernels make: a block per (batch, `rows` query
// rows), 256 threads (a kernel of other blocks sets its own after),
// `shared_bytes` of dynamic shared memory, the values q, k, v, the mask
// where there is one, and the output, in their functions' order. Returns
// the mask.
AttentionMask attention_launch(const lazylab_kernel& kernel, const std::string& name, int64_t shared_bytes,
                               Launch& launch, int64_t rows = 128);

// The __global__ function for `kernel`'s attention, named `name`, and its
// launch: a block per (batch, 128 rows), 256 threads, its tiles in dynamic
// shared memory.
std::string attention_function(const lazylab_kernel& kernel, const std::string& name, Launch& launch);

}  // namespace lazylab::cuda
