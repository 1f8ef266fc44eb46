// Memory planner `greedy-by-size`: first fit, largest values first
// (TFLite's greedy-by-size), which usually packs tighter than definition
// order; never above the naive plan's peak.
#include <algorithm>

#include "core/memory_planner.h"

namespace lazylab {
namespace {

class GreedyBySize : public MemoryPlanner {
 public:
  Status place(Program& program) override {
    std::vector<LiveRange> ranges = arena_live_ranges(program);
    std::stable_sort(ranges.begin(), ranges.end(),
                     [](const LiveRange& a, const LiveRange& b) { return a.bytes > b.bytes; });
    place_first_fit(program, ranges);
    return {};
  }
};

const MemoryPlannerRegistrar kRegistrar{{"greedy-by-size", "first fit, largest values first (TFLite's greedy-by-size)",
                                         [](const PassOptions&) { return std::make_unique<GreedyBySize>(); }}};

}  // namespace
}  // namespace lazylab
