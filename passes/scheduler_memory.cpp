// Scheduler `memory`: list scheduling for a lower peak of live arena bytes.
// Among the kernels whose inputs are ready, run the one that grows the live
// set least (bytes it writes minus bytes it lets go), ties in program order.
// Greedy choices can hoist producers and stretch their lifetimes, so the
// order is kept only if its peak is lower than program order's: never worse.
#include <limits>
#include <map>
#include <numeric>

#include "core/memory_plan.h"
#include "core/scheduler.h"

namespace lazylab {
namespace {

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

std::vector<int> memory_order(const Program& program) {
  size_t n = program.kernels.size();
  std::map<NodeId, int> readers_left;
  std::vector<int> waiting(n, 0);
  for (const Kernel& kernel : program.kernels)
    for (NodeId id : kernel.inputs) ++readers_left[id];
  for (size_t k = 0; k < n; ++k)
    for (NodeId id : program.kernels[k].inputs)
      if (program.values[id].kernel >= 0) ++waiting[k];
  std::vector<bool> done(n);
  std::vector<int> order;
  while (order.size() < n) {
    size_t best = n;
    int64_t best_growth = std::numeric_limits<int64_t>::max();
    for (size_t k = 0; k < n; ++k)
      if (!done[k] && waiting[k] == 0) {
        int64_t g = growth(program, program.kernels[k], readers_left);
        if (g < best_growth) best = k, best_growth = g;
      }
    done[best] = true;
    order.push_back(static_cast<int>(best));
    for (NodeId id : program.kernels[best].inputs) --readers_left[id];
    for (size_t k = 0; k < n; ++k)
      for (NodeId id : program.kernels[k].inputs)
        if (program.values[id].kernel == static_cast<int>(best)) --waiting[k];
  }
  return order;
}

class MemoryScheduler : public Scheduler {
 public:
  Expected<std::vector<int>> order(const Program& program) override {
    std::vector<int> identity(program.kernels.size());
    std::iota(identity.begin(), identity.end(), 0);
    std::vector<int> candidate = memory_order(program);
    Program reordered = program;
    LAZYLAB_TRY(apply_kernel_order(reordered, candidate));
    return peak_live_bytes(reordered) < peak_live_bytes(program) ? candidate : identity;
  }
};

const SchedulerRegistrar kRegistrar{{"memory", "list scheduling for a lower peak of live bytes; kept only if lower",
                                     [](const PassOptions&) { return std::make_unique<MemoryScheduler>(); }}};

}  // namespace
}  // namespace lazylab
