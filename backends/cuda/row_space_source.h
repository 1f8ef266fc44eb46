// A row-space kernel (lazylab/row_space.hpp: an elementwise kernel, a row
// reduction, a product's epilogue) rendered as one CUDA C++ function: the
// lowering says what each value is and where it lives, this maps ops and
// types to source text and chooses the threads (four elements a thread
// with 128-bit accesses where the sizes allow; a warp or a block a row).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "codegen.h"
#include "lazylab/row_space.hpp"

namespace lazylab::cuda {

// A value an elementwise kernel computes where it reads it instead of
// loading it: its element i is `function`(p<operands[0]>, ..., i), a device
// function of the same source (a direct convolution's element, so that its
// window kernel's epilogue is one launch with it). Read in full only.
struct ComputedValue {
  uint32_t value;
  std::string function;
  std::vector<uint32_t> operands;
};

// A grid-stride loop over the row space's elements; `from_the_end`: the
// last first (a product's epilogue, whose last tiles are still in L2).
std::string elementwise_function(const lazylab_program& program, rows::RowSpace space, const std::string& name,
                                 Launch& launch, bool from_the_end = false, const ComputedValue* computed = nullptr);

// A row per warp (rows up to 1,024 columns) or per block of
// `block_threads` (0: the fewest that hold the row in registers).
std::string row_reduction_function(const lazylab_program& program, rows::RowSpace space, const std::string& name,
                                   Launch& launch, int block_threads);

}  // namespace lazylab::cuda
