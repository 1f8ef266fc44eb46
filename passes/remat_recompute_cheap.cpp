// recompute-cheap: AOTAutograd's default heuristic. The backward computes
// elementwise and layout ops again (they fuse into its kernels: reading
// their inputs costs what reading them would); products, convolutions,
// reductions and gathers stay kept.
#include "core/remat_strategy.h"

namespace lazylab {
namespace {

class RecomputeCheap : public RematStrategy {
 public:
  Expected<std::vector<bool>> recompute(const Graph& graph, const JointSplit& split) override {
    std::vector<bool> again(graph.size(), false);
    for (NodeId id = 0; id < graph.size(); ++id) again[id] = split.forward[id] && cheap_to_recompute(graph.node(id));
    return again;
  }
};

const RematStrategyRegistrar kRegistrar{
    {"recompute-cheap", "Recompute elementwise and layout ops in the backward; keep products and reductions",
     [](const PassOptions&) { return std::make_unique<RecomputeCheap>(); }}};

}  // namespace
}  // namespace lazylab
