// fuse{strategy=NAME}: partitions the graph into kernels with a fusion
// strategy from the registry (core/fusion_strategy.h). The partition is
// recorded on the module; `lower` turns it into a Program.
#include "core/fusion_strategy.h"
#include "core/pass.h"

namespace lazylab {
namespace {

Expected<bool> partition(Module& module, FusionStrategy& strategy) {
  std::vector<int> before = module.kernel_of;
  LAZYLAB_TRY(strategy.partition(module));
  module.program.reset();
  return module.kernel_of != before;
}

LAZYLAB_REGISTER_PASS(registry_pass<FusionStrategyInfo>("fuse",
                                                        "Partition the graph into kernels with a fusion strategy",
                                                        PassStage::Graph, "strategy", "none", "fusion strategy",
                                                        partition));

}  // namespace
}  // namespace lazylab
