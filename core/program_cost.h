// What a Program must move and compute, for reports: bytes each kernel reads
// and writes across its boundary, the floor of bytes (each parameter read
// once, each output written once), contraction FLOPs and elementwise work.
#pragma once

#include <cstdint>
#include <vector>

#include "program.h"

namespace lazylab {

struct ProgramCost {
  std::vector<uint64_t> kernel_bytes;  // per kernel: inputs read + outputs written
  // Per kernel: its arithmetic for a roofline, the FLOPs of its matmuls plus
  // its elementwise work (counted as below).
  std::vector<uint64_t> kernel_operations;
  std::vector<uint64_t> kernel_flops;  // per kernel: its contractions' FLOPs alone
  uint64_t total_bytes = 0;            // sum of kernel_bytes
  uint64_t minimum_bytes = 0;          // parameters read once + roots written once
  // 2mnk per matmul, 2 x window size per conv2d result; an attention kernel
  // counts only the (query, key) pairs its causal mask keeps.
  uint64_t flops = 0;
  uint64_t minimum_flops = 0;  // what the graph needs: flops, a causal attention's masked half left out
  // One per element of each elementwise op's result and of each reduction's
  // input; constants (leaves), broadcasts and layout ops count nothing.
  uint64_t elementwise_ops = 0;
};

ProgramCost program_cost(const Program& program, const Graph& graph);

// One node's share of a kernel's operations, counted as above.
uint64_t node_operations(const Graph& graph, const Node& node);

}  // namespace lazylab
