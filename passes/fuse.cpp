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
    auto partition = info->create()->partition(module);
    if (!partition) return partition.error();
    bool changed = *partition != module.kernel_of;
    module.kernel_of = std::move(*partition);
    module.program.reset();
    return changed;
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
