// plan-memory{algo=NAME}: places the Program's arena values with a memory
// planner from the registry (core/memory_planner.h), then sizes the arena to
// the end of the highest value. The built-in planners:
//   naive           every value in its own slot (the baseline for reports)
//   linear-scan     first fit in order of definition
//   greedy-by-size  first fit, largest values first
#include <algorithm>

#include "core/memory_planner.h"

namespace lazylab {
namespace {

Expected<bool> place(Module& module, MemoryPlanner& planner) {
  if (!module.program) return make_error("needs a Program: run 'lower' first");
  Program& program = *module.program;
  LAZYLAB_TRY(planner.place(program));
  uint64_t arena = 0;
  for (const LiveRange& range : arena_live_ranges(program))
    arena = std::max(arena, program.values[range.value].offset + range.bytes);
  bool changed = arena != program.arena_bytes;
  program.arena_bytes = arena;
  return changed;
}

LAZYLAB_REGISTER_PASS(registry_pass<MemoryPlannerInfo>(
    "plan-memory", "Place arena values with a memory planner, reusing space between values never live together",
    PassStage::Program, "algo", "greedy-by-size", "memory planner", place));

}  // namespace
}  // namespace lazylab
