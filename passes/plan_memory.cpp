// plan-memory{algo=NAME}: places the Program's arena values with a memory
// planner from the registry (core/memory_planner.h), then sizes the arena to
// the end of the highest value. The built-in planners:
//   naive           every value in its own slot (the baseline for reports)
//   linear-scan     first fit in order of definition
//   greedy-by-size  first fit, largest values first
#include <fmt/format.h>

#include <algorithm>

#include "core/memory_planner.h"

namespace lazylab {
namespace {

class PlanMemory : public Pass {
 public:
  explicit PlanMemory(PassOptions options) : options_(std::move(options)) {}

  Expected<bool> run(Module& module) override {
    if (!module.program) return make_error("plan-memory needs a Program: run 'lower' first");
    const std::string& algo = options_.get("algo");
    const MemoryPlannerInfo* info = MemoryPlannerRegistry::global().find(algo);
    if (!info) return make_error(fmt::format("unknown memory planner '{}'", algo));
    Program& program = *module.program;
    LAZYLAB_TRY(info->create(options_)->place(program));
    uint64_t arena = 0;
    for (const LiveRange& range : arena_live_ranges(program))
      arena = std::max(arena, program.values[range.value].offset + range.bytes);
    bool changed = arena != program.arena_bytes;
    program.arena_bytes = arena;
    return changed;
  }

 private:
  PassOptions options_;
};

LAZYLAB_REGISTER_PASS(PassInfo{
    "plan-memory",
    "Place arena values with a memory planner, reusing space between values never live together",
    {registry_option<MemoryPlannerInfo>("algo", "greedy-by-size", "the memory planner")},
    [](const PassOptions& options) { return std::make_unique<PlanMemory>(options); },
    PassStage::Program,
    registry_extension<MemoryPlannerInfo>("algo")});

}  // namespace
}  // namespace lazylab
