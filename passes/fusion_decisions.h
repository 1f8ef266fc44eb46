// Pair decisions shared by the strategies that build on each other:
// producer-consumer's row-space fusion, and gemm-epilogue's (which adds
// matmuls with transposed operands and elementwise epilogues). The dominator
// strategy asks gemm-epilogue's whether a group it chose can be one kernel.
#pragma once

#include "core/fusion_strategy.h"

namespace lazylab {

// Ops reading `id`, and the graph's output if it is one (a folded transpose
// or a chained layout op is never written: found by lazylab fuzz, an output
// transpose folded into its matmul came back unwritten).
size_t user_count(const Graph& graph, NodeId id);

// A reshape that keeps the last dimension: a view inside a kernel, where the
// backend runs those (ABI 3.3's fuses_layout_views); nullopt for other ops.
std::optional<FusionDecision> row_reshape_decision(const Module& module, const Node& node);

FusionDecision decide_row_space(Module& module, KernelGroups& groups, NodeId producer, NodeId consumer);
FusionDecision decide_gemm_epilogue(Module& module, KernelGroups& groups, NodeId producer, NodeId consumer);

}  // namespace lazylab
