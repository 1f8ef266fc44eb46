// Pair decisions shared by the strategies that build on each other:
// producer-consumer's row-space fusion, and gemm-epilogue's (which adds
// matmuls with transposed operands and elementwise epilogues). The dominator
// strategy asks gemm-epilogue's whether a group it chose can be one kernel.
#pragma once

#include "core/fusion_strategy.h"

namespace lazylab {

FusionDecision decide_row_space(Module& module, KernelGroups& groups, NodeId producer, NodeId consumer);
FusionDecision decide_gemm_epilogue(Module& module, KernelGroups& groups, NodeId producer, NodeId consumer);

}  // namespace lazylab
