// fuse{strategy=NAME}: partitions the graph into kernels with a fusion
// strategy from the registry (core/fusion_strategy.h). The partition is
// recorded on the module; `lower` turns it into a Program.
#include <fmt/format.h>

#include "core/fusion_strategy.h"
#include "core/pass.h"

namespace lazylab {
namespace {

class Fuse : public Pass {
 public:
  explicit Fuse(PassOptions options) : options_(std::move(options)) {}

  Expected<bool> run(Module& module) override {
    const std::string& strategy = options_.get("strategy");
    const FusionStrategyInfo* info = FusionStrategyRegistry::global().find(strategy);
    if (!info) return make_error(fmt::format("unknown fusion strategy '{}'", strategy));
    std::vector<int> before = module.kernel_of;
    LAZYLAB_TRY(info->create(options_)->partition(module));
    module.program.reset();
    return module.kernel_of != before;
  }

 private:
  PassOptions options_;
};

LAZYLAB_REGISTER_PASS(PassInfo{"fuse",
                               "Partition the graph into kernels with a fusion strategy",
                               {registry_option<FusionStrategyInfo>("strategy", "none", "the fusion strategy")},
                               [](const PassOptions& options) { return std::make_unique<Fuse>(options); },
                               PassStage::Graph,
                               registry_extension<FusionStrategyInfo>("strategy")});

}  // namespace
}  // namespace lazylab
