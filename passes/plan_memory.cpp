// plan-memory{algo=naive|greedy-by-size|linear-scan}: places the Program's
// arena values, reusing space between values that are never live at the same
// time (live ranges over the kernel order, core/memory_plan.h).
//   naive           every value in its own slot (the baseline for reports)
//   linear-scan     values in order of definition, each at the lowest offset
//                   free of the values live with it (first fit)
//   greedy-by-size  the same placement, largest values first (TFLite's
//                   greedy-by-size), which usually packs tighter
// Peak arena bytes never exceed the naive plan's.
#include <algorithm>

#include "core/memory_plan.h"
#include "core/pass.h"

namespace lazylab {
namespace {

// Lowest offset where `range` fits beside the already placed values that
// are live with it.
uint64_t first_fit(const LiveRange& range, const std::vector<const LiveRange*>& placed, const Program& program) {
  std::vector<std::pair<uint64_t, uint64_t>> busy;  // [offset, end)
  for (const LiveRange* other : placed)
    if (other->first <= range.last && range.first <= other->last) {
      uint64_t at = program.values[other->value].offset;
      busy.emplace_back(at, at + other->bytes);
    }
  std::sort(busy.begin(), busy.end());
  uint64_t offset = 0;
  for (auto [begin, end] : busy) {
    if (begin >= offset + range.bytes) break;
    offset = std::max(offset, end);
  }
  return offset;
}

class PlanMemory : public Pass {
 public:
  explicit PlanMemory(std::string algo) : algo_(std::move(algo)) {}

  Expected<bool> run(Module& module) override {
    if (!module.program) return make_error("plan-memory needs a Program: run 'lower' first");
    Program& program = *module.program;
    std::vector<LiveRange> ranges = arena_live_ranges(program);
    if (algo_ == "greedy-by-size")
      std::stable_sort(ranges.begin(), ranges.end(),
                       [](const LiveRange& a, const LiveRange& b) { return a.bytes > b.bytes; });
    std::vector<const LiveRange*> placed;
    uint64_t arena = 0, naive = 0;
    for (const LiveRange& range : ranges) {
      uint64_t offset = algo_ == "naive" ? naive : first_fit(range, placed, program);
      program.values[range.value].offset = offset;
      placed.push_back(&range);
      arena = std::max(arena, offset + range.bytes);
      naive += range.bytes;
    }
    bool changed = arena != program.arena_bytes;
    program.arena_bytes = arena;
    return changed;
  }

 private:
  std::string algo_;
};

LAZYLAB_REGISTER_PASS(PassInfo{
    "plan-memory",
    "Place arena values, reusing space between values never live together",
    {{"algo",
      OptionKind::Enum,
      "greedy-by-size",
      "placement algorithm",
      {"naive", "greedy-by-size", "linear-scan"},
      {}}},
    [](const PassOptions& options) { return std::make_unique<PlanMemory>(options.get("algo")); },
    PassStage::Program});

}  // namespace
}  // namespace lazylab
