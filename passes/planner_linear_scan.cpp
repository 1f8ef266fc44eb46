// Memory planner `linear-scan`: values in order of definition, each at the
// lowest offset free of the values live with it (first fit).
#include "core/memory_planner.h"

namespace lazylab {
namespace {

class LinearScan : public MemoryPlanner {
 public:
  Status place(Program& program) override {
    place_first_fit(program, arena_live_ranges(program));
    return {};
  }
};

const MemoryPlannerRegistrar kRegistrar{{"linear-scan", "first fit in order of definition",
                                         [](const PassOptions&) { return std::make_unique<LinearScan>(); }}};

}  // namespace
}  // namespace lazylab
