// The producer-consumer strategy's decision for one pair, shared with the
// strategies that extend it (gemm-epilogue).
#pragma once

#include "core/fusion_strategy.h"

namespace lazylab {

FusionDecision decide_row_space(Module& module, KernelGroups& groups, NodeId producer, NodeId consumer);

// Runs `decide` over every producer/consumer pair in program order, merging
// on yes and logging every decision; sets module.kernel_of.
template <class Decide>
void partition_pairwise(Module& module, Decide decide) {
  duplicate_constants(module);
  KernelGroups groups(module.graph);
  for (NodeId consumer = 0; consumer < module.graph.size(); ++consumer) {
    if (!groups.in_kernel(consumer)) continue;
    for (NodeId producer : module.graph.node(consumer).operands) {
      if (!groups.in_kernel(producer) || groups.group_of(producer) == groups.group_of(consumer)) continue;
      FusionDecision decision = decide(module, groups, producer, consumer);
      if (decision) groups.merge(producer, consumer);
      module.fusion_log.push_back({producer, consumer, std::move(decision)});
    }
  }
  module.kernel_of = groups.kernel_of();
}

}  // namespace lazylab
