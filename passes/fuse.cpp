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
  explicit Fuse(std::string strategy) : strategy_(std::move(strategy)) {}

  Expected<bool> run(Module& module) override {
    const FusionStrategyInfo* info = FusionStrategyRegistry::global().find(strategy_);
    if (!info) return make_error(fmt::format("unknown fusion strategy '{}'", strategy_));
    std::vector<int> before = module.kernel_of;
    LAZYLAB_TRY(info->create()->partition(module));
    module.program.reset();
    return module.kernel_of != before;
  }

 private:
  std::string strategy_;
};

LAZYLAB_REGISTER_PASS(PassInfo{
    "fuse",
    "Partition the graph into kernels with a fusion strategy",
    {{"strategy",
      OptionKind::Enum,
      "none",
      "the fusion strategy",
      {},
      [] { return FusionStrategyRegistry::global().names(); }}},
    [](const PassOptions& options) { return std::make_unique<Fuse>(options.get("strategy")); }});

}  // namespace
}  // namespace lazylab
