// An opaque kernel's ops, each as its own CUDA C++ function and launch,
// its operands and result in memory: layout ops as index-mapped copies,
// concat, gather, scatter-add, pad, windows (convolutions and pools), the
// composites, iota, reductions over any axes, matmuls, and elementwise ops
// through the row-space renderer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "codegen.h"

namespace lazylab::cuda {

// `op`'s functions, named `name` (and `name` + "_finish"), appending to
// `launches` how to run them (a reduction of many elements into few outputs
// takes two).
std::string op_function(const lazylab_program& program, const lazylab_op& op, const std::string& name,
                        std::vector<Launch>& launches);

// Whether a convolution of few outputs over many taps takes a block per
// output (its threads striding over the taps) rather than a thread.
bool convolution_takes_blocks(const lazylab_program& program, const lazylab_op& op);

// The direct convolution's element `element` (row-major in its [N, O, OH,
// OW] result) as a device function `name`(x, w, element) returning the
// result's storage type: the element's group of channels times the taps,
// summed in f32 (f64 for f64), as ops.def says. The direct kernel stores it;
// a window kernel's epilogue reads it in place of the result's memory.
std::string direct_convolution_element(const lazylab_program& program, const lazylab_op& op, const std::string& name);

// A strided copy: element t of `shape` reads operand element offset +
// sum_d coordinate_d * strides[d].
std::string strided_copy(const std::string& name, uint32_t in, uint32_t out, uint32_t dtype,
                         const std::vector<int64_t>& shape, const std::vector<int64_t>& strides, int64_t offset,
                         Launch& launch);

}  // namespace lazylab::cuda
