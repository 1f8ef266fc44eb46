// Fusion strategy `none`: one kernel per op, the eager baseline.
// Legality: trivially legal (no kernel holds two ops, so none can form a
// cycle). Profitability: never fuses.
#include "core/fusion_strategy.h"

namespace lazylab {
namespace {

class NoFusion : public FusionStrategy {
 public:
  Expected<std::vector<int>> partition(const Module& module) override {
    const Graph& graph = module.graph;
    std::vector<bool> live = live_nodes(graph);
    std::vector<int> kernel_of(graph.size(), -1);
    int next = 0;
    for (NodeId id = 0; id < graph.size(); ++id)
      if (live[id] && graph.node(id).op != OpId::Parameter) kernel_of[id] = next++;
    return kernel_of;
  }
};

const FusionStrategyRegistrar kRegistrar{
    {"none", "One kernel per op (the eager baseline)", [] { return std::make_unique<NoFusion>(); }}};

}  // namespace
}  // namespace lazylab
