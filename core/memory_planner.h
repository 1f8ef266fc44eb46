// Memory planners: where each arena value of a Program lives, selected by
// name with plan-memory{algo=NAME} (passes/plan_memory.cpp) and registered
// like fusion strategies (built in, or from a plugin), with options of
// their own.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "expected.h"
#include "memory_plan.h"
#include "pass.h"

namespace lazylab {

class MemoryPlanner {
 public:
  virtual ~MemoryPlanner() = default;
  // Sets the offset of every arena value (arena_live_ranges); the pass then
  // sizes the arena to the end of the highest value.
  virtual Status place(Program& program) = 0;
};

struct MemoryPlannerInfo {
  std::string name;
  std::string summary;  // one line: how it places values
  std::function<std::unique_ptr<MemoryPlanner>(const PassOptions&)> create;
  std::vector<PassOptionSpec> options = {};
  std::string provenance = {};  // "plugin NAME VERSION"; empty for built-ins
};

using MemoryPlannerRegistry = Registry<MemoryPlannerInfo>;
extern template class Registry<MemoryPlannerInfo>;
using MemoryPlannerRegistrar = Registrar<MemoryPlannerInfo>;

// Places `ranges` in the order given, each at the lowest offset free of the
// values already placed that are live with it (first fit).
void place_first_fit(Program& program, const std::vector<LiveRange>& ranges);

}  // namespace lazylab
