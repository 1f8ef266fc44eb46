// Passes repeated until a round changes nothing, as XLA's HloPassFix: the
// pipeline combinator fix(...) (passes/fix.cpp) and canonicalize, whose
// rewrite rules run to a fixed point, are this one loop.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "pass.h"

namespace lazylab {

class FixedPoint : public Pass {
 public:
  // At most `max_rounds` rounds: past them the module is left as the last
  // round made it (correct, only less simplified).
  FixedPoint(std::vector<std::unique_ptr<Pass>> passes, int64_t max_rounds)
      : passes_(std::move(passes)), max_rounds_(max_rounds) {}

  // Whether any round changed the module.
  Expected<bool> run(Module& module) override;

 private:
  std::vector<std::unique_ptr<Pass>> passes_;
  int64_t max_rounds_;
};

}  // namespace lazylab
