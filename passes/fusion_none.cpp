// Fusion strategy `none`: one kernel per op, the eager baseline.
// Legality: trivially legal (no kernel holds two ops, so none can form a
// cycle). Profitability: never fuses.
#include "core/fusion_strategy.h"

namespace lazylab {
namespace {

class NoFusion : public FusionStrategy {
 public:
  Status partition(Module& module) override {
    module.kernel_of = KernelGroups(module.graph).kernel_of();
    return {};
  }
};

const FusionStrategyRegistrar kRegistrar{{"none", "One kernel per op (the eager baseline)", "nothing is fused",
                                          "never fuses",
                                          [](const PassOptions&) { return std::make_unique<NoFusion>(); }}};

}  // namespace
}  // namespace lazylab
