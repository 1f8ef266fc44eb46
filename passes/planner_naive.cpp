// Memory planner `naive`: every arena value in a slot of its own, in order
// of definition; the baseline reports compare the other planners with.
#include "core/memory_planner.h"

namespace lazylab {
namespace {

class Naive : public MemoryPlanner {
 public:
  Status place(Program& program) override {
    uint64_t offset = 0;
    for (const LiveRange& range : arena_live_ranges(program)) {
      program.values[range.value].offset = offset;
      offset += range.bytes;
    }
    return {};
  }
};

const MemoryPlannerRegistrar kRegistrar{{"naive", "every value in its own slot: no reuse (the baseline)",
                                         [](const PassOptions&) { return std::make_unique<Naive>(); }}};

}  // namespace
}  // namespace lazylab
