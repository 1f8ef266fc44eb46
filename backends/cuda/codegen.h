// CUDA C++ for a Program, from each kernel's description (ABI 2.1): one
// translation unit holding a __global__ function per launch. Elementwise
// kernels are grid-stride loops (four elements a thread, 128-bit loads and
// stores, where the sizes allow); row reductions run a block per row with
// their prologue and epilogue in the same function; layout kernels are
// index-mapped copies; a contraction's product goes to cuBLASLt and its
// epilogue is an elementwise launch; opaque kernels run op by op. The
// elementwise math is op_formulas.hpp's, emitted as source text. Row-space
// kernels are rendered from the shared lowering (row_space_source.h), op by
// op ones by op_source.h, both spelling values as source_text.h says.
//
// Needs no GPU: tests generate and compile (NVRTC) every workload's code in
// CI.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lazylab/backend_abi.h"

namespace lazylab::cuda {

// One launch of a generated function. Its arguments: the device address of
// each value in `values`, then `work` as a long long.
struct Launch {
  std::string function;
  std::vector<uint32_t> values;
  int64_t work = 0;             // elementwise: elements (or groups of four); row kernels: rows
  bool block_per_item = false;  // a block per work item (rows) instead of a thread per item
  int64_t items_per_block = 1;  // with block_per_item: rows a block takes at once (a warp each)
  uint32_t block = 256;
  // Where set, the grid as it is (blocks x blocks_y) instead of one sized
  // from `work`, and the dynamic shared memory each block takes.
  uint32_t blocks = 0, blocks_y = 1;
  uint32_t shared_bytes = 0;
  // Where set, the registers a thread the kernel must have been compiled
  // with: its warpgroups share out the block's (setmaxnreg), and with fewer
  // they would wait for registers that never come.
  uint32_t registers = 0;
};

inline constexpr uint32_t kNoValue = ~uint32_t{0};
// In Launch::values: the device's scratch memory instead of a value's (the
// cuBLASLt workspace: products and launches run one after another on the
// device's one stream, so a launch may leave partial results there for the
// next launch of its kernel), of kScratchBytes.
inline constexpr uint32_t kScratchValue = ~uint32_t{0} - 1;
inline constexpr uint64_t kScratchBytes = uint64_t{32} << 20;

struct KernelCode {
  // A cuBLASLt product runs after the first `launches_before_product`
  // launches and before the others: the kernel's contraction, or a
  // convolution's (its unfolded windows by its weights, which every image
  // reads: `shared_lhs`).
  bool product = false;
  lazylab_contraction contraction{};
  bool shared_lhs = false;
  size_t launches_before_product = 0;
  // cuBLASLt's bias epilogue: the product + this [n] vector along each row,
  // written to `product_out` (the matmul's value, or the add's it replaced).
  uint32_t bias = kNoValue;
  uint32_t product_out = kNoValue;
  bool gelu = false;   // with `bias`: cuBLASLt's GELU_BIAS epilogue (gelu_epilogue.h), the gelu of the biased product
  double alpha = 1.0;  // cuBLASLt's scale of the product (a constant factor the epilogue had)
  std::vector<Launch> launches;
  std::string source;  // this kernel's functions (part of ProgramCode::source)
  size_t unit = 0;     // the ProgramCode::units entry that holds the functions it launches
  // Why a kernel described as more than that runs op by op; empty otherwise.
  std::string op_by_op;
  // Why a kernel runs a slower form than the options asked for (mma.sync
  // where wgmma was); empty otherwise.
  std::string slower_path;
};

struct ProgramCode {
  std::string source;  // one translation unit for the whole Program
  // The same functions as translation units NVRTC compiles apart, at once:
  // each the prelude, the templates its functions instantiate and a share
  // of the kernels' functions. A kernel instantiating a template (attention)
  // has a unit of its own, its template the most work NVRTC does; the other
  // kernels' functions are dealt out in order, some kUnitBytes a unit.
  std::vector<std::string> units;
  std::string templates;            // the device templates its functions instantiate (part of source)
  std::vector<KernelCode> kernels;  // by kernel index
  // Kernels whose functions are another's, but for their names (a model's
  // layers): they launch that kernel's functions, compiled once.
  size_t kernels_sharing_functions = 0;
  std::vector<uint32_t> needs_memory;  // kernel-local values this code keeps in memory (arena extension)
  // Bytes of the convolutions' unfolded windows (the largest one's), at
  // value id `program.num_values` in the launches and products: past the
  // Program's values, kept after the arena (one at a time on the stream).
  uint64_t columns_bytes = 0;
};

inline constexpr size_t kUnitBytes = 4 << 10;

struct CodegenOptions {
  // A product + bias vector with nothing after it: cuBLASLt adds the bias
  // (its BIAS epilogue) instead of a generated kernel.
  bool bias_epilogue = true;
  // Autocast's bias and gelu after a 16-bit product: cuBLASLt's GELU_BIAS
  // epilogue on its f32 sums (gelu_epilogue.h says what differs, and why it
  // is not the default).
  bool gelu_epilogue = false;
  // Threads of the block that reduces a row past 1,024 columns (a block a
  // row); 0: the fewest that hold the row in registers (eight 128-bit groups
  // each at most), else 1,024.
  int row_block_threads = 0;
  // 16-bit attention on Hopper's warpgroup products (wgmma: sm_90a, which
  // the units are then compiled for), where attention_wgmma_refusal allows;
  // else mma.sync, the reason in KernelCode::slower_path.
  bool wgmma = false;
  // Rows a block of the warpgroup attention kernel takes at head dims up to
  // 64: 128 (two warpgroups, two blocks an SM) or 256 (four, one block); 0:
  // the rule in attention_tensor_core.cpp (256 where not causal and there
  // are at least 128 such blocks).
  int wgmma_attention_rows = 0;
};

// What the generated code runs, as the backend declares it (and the tests
// lower for): every op but parameters, every dtype, every kind of fusion,
// attention up to head dim 128 in f32 and 16 bits, with masks read from
// memory; `row_groups`: per-channel values read by their rows' groups (the
// backend's `row-groups` option). Writes into the host's supports_op and
// supports_dtype arrays.
void declare_capabilities(lazylab_capabilities& caps, bool row_groups);

// Throws std::invalid_argument naming the op it cannot generate.
ProgramCode generate(const lazylab_program& program, const CodegenOptions& options = {});

// The source as a reader wants it: the helpers, then each kernel's functions
// under a line saying what runs for it (the cuBLASLt product, each launch's
// work and block).
std::string annotated_source(const ProgramCode& code);

}  // namespace lazylab::cuda
