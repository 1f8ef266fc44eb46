// The one instance of each registry, in liblazylab (see registry.h).
#include "core/registry.h"

#include "core/fusion_strategy.h"
#include "core/memory_planner.h"
#include "core/pass.h"
#include "core/precision_policy.h"
#include "core/remat_strategy.h"
#include "core/scheduler.h"

namespace lazylab {

template <class Info>
Registry<Info>& Registry<Info>::global() {
  static Registry registry;
  return registry;
}

template class Registry<PassInfo>;
template class Registry<FusionStrategyInfo>;
template class Registry<SchedulerInfo>;
template class Registry<MemoryPlannerInfo>;
template class Registry<PrecisionPolicyInfo>;
template class Registry<RematStrategyInfo>;

}  // namespace lazylab
