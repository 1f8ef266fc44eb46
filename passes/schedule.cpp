// schedule{order=NAME}: orders the Program's kernels with a scheduler from
// the registry (core/scheduler.h): `program` (what lower emits) or `memory`
// (list scheduling for a lower peak of live bytes), or one a plugin adds.
// Run plan-memory after it: the placement depends on the order.
#include <numeric>

#include "core/scheduler.h"

namespace lazylab {
namespace {

Expected<bool> reorder(Module& module, Scheduler& scheduler) {
  if (!module.program) return make_error("needs a Program: run 'lower' first");
  auto order = scheduler.order(*module.program);
  if (!order) return order.error();
  std::vector<int> identity(order->size());
  std::iota(identity.begin(), identity.end(), 0);
  if (*order == identity) return false;
  LAZYLAB_TRY(apply_kernel_order(*module.program, *order));
  return true;
}

LAZYLAB_REGISTER_PASS(registry_pass<SchedulerInfo>(
    "schedule", "Order the Program's kernels with a scheduler: program order, or one that lowers peak live memory",
    PassStage::Program, "order", "program", "scheduler", reorder));

}  // namespace
}  // namespace lazylab
