// schedule{order=program|memory}: orders the Program's kernels.
//   program  a topological order that follows program order (what lower
//            produces)
//   memory   list scheduling for a lower peak of live arena bytes: among the
//            kernels whose inputs are ready, run the one that grows the live
//            set least (bytes it writes minus bytes it lets go), ties in
//            program order. Greedy choices can hoist producers and stretch
//            their lifetimes, so the order is kept only if its peak is lower
//            than program order's: never worse.
// Run plan-memory after it: the placement depends on the order.
#include <algorithm>
#include <limits>
#include <map>

#include "core/memory_plan.h"
#include "core/pass.h"

namespace lazylab {
namespace {

void renumber(Program& program) {
  for (size_t k = 0; k < program.kernels.size(); ++k)
    for (NodeId id : program.kernels[k].ops) program.values[id].kernel = static_cast<int>(k);
}

// Bytes the live set grows by when `kernel` runs, given how many unscheduled
// readers each value still has.
int64_t growth(const Program& program, const Kernel& kernel, const std::map<NodeId, int>& readers_left) {
  int64_t bytes = 0;
  for (NodeId id : kernel.outputs)
    if (program.values[id].kind == ValueKind::Arena) bytes += static_cast<int64_t>(program.values[id].bytes);
  for (NodeId id : kernel.inputs)
    if (program.values[id].kind == ValueKind::Arena && readers_left.at(id) == 1)
      bytes -= static_cast<int64_t>(program.values[id].bytes);
  return bytes;
}

std::vector<Kernel> memory_order(const Program& program) {
  size_t n = program.kernels.size();
  std::map<NodeId, int> readers_left;
  std::vector<int> waiting(n, 0);
  for (const Kernel& kernel : program.kernels)
    for (NodeId id : kernel.inputs) ++readers_left[id];
  for (size_t k = 0; k < n; ++k)
    for (NodeId id : program.kernels[k].inputs)
      if (program.values[id].kernel >= 0) ++waiting[k];
  std::vector<bool> done(n);
  std::vector<Kernel> order;
  while (order.size() < n) {
    size_t best = n;
    int64_t best_growth = std::numeric_limits<int64_t>::max();
    for (size_t k = 0; k < n; ++k)
      if (!done[k] && waiting[k] == 0) {
        int64_t g = growth(program, program.kernels[k], readers_left);
        if (g < best_growth) best = k, best_growth = g;
      }
    done[best] = true;
    order.push_back(program.kernels[best]);
    for (NodeId id : program.kernels[best].inputs) --readers_left[id];
    for (size_t k = 0; k < n; ++k)
      for (NodeId id : program.kernels[k].inputs)
        if (program.values[id].kernel == static_cast<int>(best)) --waiting[k];
  }
  return order;
}

// The largest sum of bytes live at one kernel: what any placement needs.
uint64_t peak_live_bytes(const Program& program) {
  std::vector<uint64_t> live(program.kernels.size() + 1, 0);
  for (const LiveRange& range : arena_live_ranges(program))
    for (int k = range.first; k <= range.last; ++k) live[k] += range.bytes;
  return *std::max_element(live.begin(), live.end());
}

class Schedule : public Pass {
 public:
  explicit Schedule(std::string order) : order_(std::move(order)) {}

  Expected<bool> run(Module& module) override {
    if (!module.program) return make_error("schedule needs a Program: run 'lower' first");
    if (order_ == "program") return false;  // lower already emits program order
    Program& program = *module.program;
    Program reordered = program;
    reordered.kernels = memory_order(program);
    renumber(reordered);
    if (peak_live_bytes(reordered) >= peak_live_bytes(program)) return false;
    program = std::move(reordered);
    return true;
  }

 private:
  std::string order_;
};

LAZYLAB_REGISTER_PASS(PassInfo{
    "schedule",
    "Order the Program's kernels: program order, or one that lowers peak live memory",
    {{"order", OptionKind::Enum, "program", "kernel order", {"program", "memory"}, {}}},
    [](const PassOptions& options) { return std::make_unique<Schedule>(options.get("order")); },
    PassStage::Program});

}  // namespace
}  // namespace lazylab
