// The attention kernel in 16 bits (ABI 3.15: bf16 or f16 q, k, v in
// autocast's form) on the tensor cores: FlashAttention-2's tiling with
// mma.sync. A block of eight warps takes 128 query rows of one batch, each
// warp 16 of them, and walks the keys 64 at a time, the next tile of K and V
// copied into shared memory (cp.async) while this one is used. Each warp
// keeps its rows of Q, the scores and the output in registers: the scores
// are an m16n8k16 product (bf16 or f16 operands, f32 sums) of Q against K,
// rounded, scaled and masked as the program does, then the online softmax
// (a running max and sum per row, the output rescaled when the max grows);
// the probabilities, rounded to 16 bits, are the next product's operand as
// they sit in the registers (the C fragment of two 8-column tiles is the A
// fragment of one 16-deep step), multiplied by V read with ldmatrix.trans.
// One difference from the program: it rounds the probabilities before
// dividing by their sum, not after (FlashAttention's order; the error is
// the dtype's rounding either way).
//
// On Hopper (sm_90a) the same tiles go to the warpgroup products (wgmma):
// four warps issue one product for their 64 rows, Q, K and V read from
// shared memory as core matrices, the probabilities from the registers the
// softmax left them in; the softmax and the output are the same functions.
// Up to head dim 64 two blocks of two warpgroups an SM, each product waited
// for; above, a block of three warpgroups issuing a tile's output product
// with the next tile's scores and computing that softmax while it runs.
#pragma once

#include <optional>
#include <string>

#include "codegen.h"

namespace lazylab::cuda {

// The device template every 16-bit attention launch instantiates (once per
// translation unit), and the warpgroup kernel's, which follows it in its
// units (it calls the first's softmax and output).
extern const char* const kAttention16Template;
extern const char* const kAttentionWgmmaTemplate;

// Why `kernel`'s 16-bit attention cannot run as kAttention16Template, or
// nothing: its head dims must be multiples of 8 (rows of 16-byte copies),
// and n too where k is given as [d, n].
std::optional<std::string> attention16_refusal(const lazylab_kernel& kernel);

// The __global__ function for `kernel`'s attention in `dtype` (bf16 or f16),
// named `name`, and its launch: a block per (batch, 128 rows), 256 threads,
// Q and two stages of K and V in dynamic shared memory.
std::string attention16_function(const lazylab_kernel& kernel, uint32_t dtype, const std::string& name, Launch& launch);

// Why `kernel`'s 16-bit attention (one attention16_refusal accepts) cannot
// run on the warpgroup kernel, or nothing: k must be given as [n, d], and
// the head dims at most 128 (its shared memory).
std::optional<std::string> attention_wgmma_refusal(const lazylab_kernel& kernel);

// attention16_function's kernel on the warpgroup products: its two product
// functions and the __global__ function; a block per (batch, 128, 192 or
// 256 rows), 128 threads for each 64 rows, Q and three stages of K and V in
// shared memory. `block_rows`: CodegenOptions::wgmma_attention_rows.
std::string attention_wgmma_function(const lazylab_kernel& kernel, uint32_t dtype, const std::string& name,
                                     Launch& launch, int block_rows);

}  // namespace lazylab::cuda
