#include "core/fixed_point.h"

namespace lazylab {

Expected<bool> FixedPoint::run(Module& module) {
  bool changed = false;
  for (int64_t round = 0; round < max_rounds_; ++round) {
    bool round_changed = false;
    for (const std::unique_ptr<Pass>& pass : passes_) {
      Expected<bool> pass_changed = pass->run(module);
      if (!pass_changed) return pass_changed.error();
      round_changed = round_changed || *pass_changed;
    }
    if (!round_changed) break;
    changed = true;
  }
  return changed;
}

}  // namespace lazylab
