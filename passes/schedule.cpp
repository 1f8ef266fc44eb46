// schedule{order=NAME}: orders the Program's kernels with a scheduler from
// the registry (core/scheduler.h): `program` (what lower emits) or `memory`
// (list scheduling for a lower peak of live bytes), or one a plugin adds.
// Run plan-memory after it: the placement depends on the order.
#include <fmt/format.h>

#include <numeric>

#include "core/scheduler.h"

namespace lazylab {
namespace {

class Schedule : public Pass {
 public:
  explicit Schedule(PassOptions options) : options_(std::move(options)) {}

  Expected<bool> run(Module& module) override {
    if (!module.program) return make_error("schedule needs a Program: run 'lower' first");
    const std::string& name = options_.get("order");
    const SchedulerInfo* info = SchedulerRegistry::global().find(name);
    if (!info) return make_error(fmt::format("unknown scheduler '{}'", name));
    auto order = info->create(options_)->order(*module.program);
    if (!order) return make_error(fmt::format("scheduler '{}': {}", name, order.error().message));
    std::vector<int> identity(order->size());
    std::iota(identity.begin(), identity.end(), 0);
    if (*order == identity) return false;
    if (Status applied = apply_kernel_order(*module.program, *order); !applied)
      return make_error(fmt::format("scheduler '{}': {}", name, applied.error().message));
    return true;
  }

 private:
  PassOptions options_;
};

LAZYLAB_REGISTER_PASS(PassInfo{"schedule",
                               "Order the Program's kernels with a scheduler: program order, or one that lowers peak "
                               "live memory",
                               {registry_option<SchedulerInfo>("order", "program", "the scheduler")},
                               [](const PassOptions& options) { return std::make_unique<Schedule>(options); },
                               PassStage::Program,
                               registry_extension<SchedulerInfo>("order")});

}  // namespace
}  // namespace lazylab
