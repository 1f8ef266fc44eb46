// The producer-consumer strategy's decision for one pair, shared with the
// strategies that extend it (gemm-epilogue).
#pragma once

#include "core/fusion_strategy.h"

namespace lazylab {

FusionDecision decide_row_space(Module& module, KernelGroups& groups, NodeId producer, NodeId consumer);

}  // namespace lazylab
