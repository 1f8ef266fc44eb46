// Fusion strategy `greedy-elementwise`: vertical producer->consumer chains
// of elementwise and broadcast ops.
//
// Legality: producer and consumer are elementwise ops, broadcasts or
// constants with the same result shape (one iteration space; a broadcast's
// smaller operand stays outside and is read through index mapping); the
// backend runs both and fuses elementwise kernels; the merged kernel stays
// under the backend's size limit; the merge creates no cycle between kernels.
// Profitability: fuse whenever legal, since each fused edge saves writing
// and re-reading an intermediate. Constants are duplicated into each consumer
// first: a splat costs nothing to recompute.
#include <fmt/format.h>

#include "core/fusion_strategy.h"

namespace lazylab {
namespace {

bool is_fusible(OpId op) { return fuses_as_elementwise(op); }

FusionDecision decide(Module& module, KernelGroups& groups, NodeId producer, NodeId consumer) {
  const Node &p = module.graph.node(producer), &c = module.graph.node(consumer);
  if (!is_fusible(p.op))
    return FusionDecision::no(RefusalCode::OpKind, fmt::format("producer {} is not elementwise", op_name(p.op)));
  if (!is_fusible(c.op))
    return FusionDecision::no(RefusalCode::OpKind, fmt::format("consumer {} is not elementwise", op_name(c.op)));
  if (p.type.shape != c.type.shape)
    return FusionDecision::no(
        RefusalCode::IterationSpace,
        fmt::format("different iteration spaces: {} vs {}", to_string(p.type.shape), to_string(c.type.shape)));
  if (FusionDecision backend = check_backend(module, groups, producer, consumer); !backend) return backend;
  if (groups.would_create_cycle(producer, consumer))
    return FusionDecision::no(RefusalCode::Cycle, "would create a cycle between kernels");
  return FusionDecision::yes();
}

class GreedyElementwise : public FusionStrategy {
 public:
  Status partition(Module& module) override {
    partition_pairwise(module, decide);
    return {};
  }
};

const FusionStrategyRegistrar kRegistrar{
    {"greedy-elementwise",
     "Vertical chains of elementwise and broadcast ops with one shape; constants duplicated into consumers",
     "elementwise ops, broadcasts and constants with one result shape; backend runs both and fuses elementwise "
     "kernels; size limit; no cycle between kernels",
     "whenever legal: each fused edge saves writing and re-reading an intermediate",
     [](const PassOptions&) { return std::make_unique<GreedyElementwise>(); }}};

}  // namespace
}  // namespace lazylab
