// memory-budget: keep everything, then recompute until the peak fits. The
// peak is remat_schedule's estimate of the arena's (values alive at once,
// nodes in order, before fusion and memory planning, what fusion keeps in
// registers aside); the budget is `bytes`, or `percent` of save-all's peak
// when `bytes` is 0. Each round recomputes one kept value from what is kept
// already (with the forward values between them that nothing keeps), the
// one that lowers the peak most per operation spent (core/program_cost.h's
// count, so a product or a reduction, many operations, comes after cheaper
// choices of like effect): Chen et al.'s checkpointing, greedily. A budget
// below the lowest peak it reaches is an error naming both; a graph with no
// backward is left as it is.
#include <fmt/format.h>

#include <optional>

#include "core/program_cost.h"
#include "core/remat_strategy.h"

namespace lazylab {
namespace {

class MemoryBudget : public RematStrategy {
 public:
  MemoryBudget(uint64_t bytes, int64_t percent) : bytes_(bytes), percent_(percent) {}

  Expected<std::vector<bool>> recompute(const Graph& graph, const JointSplit& split) override {
    std::vector<bool> again(graph.size(), false);
    if (split.saved.empty()) return again;  // no backward: nothing kept for it
    RematSchedule schedule = remat_schedule(graph, split, again);
    const uint64_t saving_all = schedule.peak_bytes;
    // A percentage of 100 or more asks for nothing (and would overflow the product).
    const uint64_t budget = bytes_ > 0        ? bytes_
                            : percent_ >= 100 ? saving_all
                                              : saving_all * static_cast<uint64_t>(percent_) / 100;
    while (schedule.peak_bytes > budget) {
      auto better = lower_peak(graph, split, again, schedule);
      if (!better)
        return make_error(fmt::format(
            "a budget of {} bytes is below the lowest peak it reaches, {} bytes (save-all's estimate: {} bytes)",
            budget, schedule.peak_bytes, saving_all));
      again = std::move(better->first);
      schedule = std::move(better->second);
    }
    return again;
  }

 private:
  // The forward values `kept` must be recomputed with: `value` and what lies
  // between it and the kept values, parameters and recomputed ones.
  static std::vector<NodeId> recomputed_with(const Graph& graph, NodeId value, const std::vector<bool>& again,
                                             const std::vector<bool>& kept) {
    std::vector<NodeId> members{value}, stack{value};
    std::vector<bool> member(graph.size(), false);
    member[value] = true;
    while (!stack.empty()) {
      NodeId at = stack.back();
      stack.pop_back();
      for (NodeId operand : graph.node(at).operands) {
        if (member[operand] || again[operand] || kept[operand] || graph.node(operand).op == OpId::Parameter) continue;
        member[operand] = true;
        members.push_back(operand);
        stack.push_back(operand);
      }
    }
    return members;
  }

  // The choice that lowers the peak most per operation, or none that lowers it.
  static std::optional<std::pair<std::vector<bool>, RematSchedule>> lower_peak(const Graph& graph,
                                                                               const JointSplit& split,
                                                                               const std::vector<bool>& again,
                                                                               const RematSchedule& now) {
    std::optional<std::pair<std::vector<bool>, RematSchedule>> best;
    double best_score = 0;
    for (NodeId value = 0; value < graph.size(); ++value) {
      if (!now.kept[value]) continue;
      std::vector<bool> candidate = again;
      uint64_t operations = 0;
      for (NodeId member : recomputed_with(graph, value, again, now.kept)) {
        candidate[member] = true;
        operations += node_operations(graph, graph.node(member)) +
                      static_cast<uint64_t>(graph.node(member).type.num_elements());  // each writes its result
      }
      RematSchedule schedule = remat_schedule(graph, split, candidate);
      if (schedule.peak_bytes >= now.peak_bytes) continue;
      double score = static_cast<double>(now.peak_bytes - schedule.peak_bytes) / static_cast<double>(operations + 1);
      if (best && score <= best_score) continue;
      best_score = score;
      best.emplace(std::move(candidate), std::move(schedule));
    }
    return best;
  }

  uint64_t bytes_;
  int64_t percent_;
};

const RematStrategyRegistrar kRegistrar{
    {"memory-budget",
     "Keep everything, then recompute what lowers the peak most per operation until it fits a budget",
     [](const PassOptions& options) {
       return std::make_unique<MemoryBudget>(static_cast<uint64_t>(options.get_int("bytes")),
                                             options.get_int("percent"));
     },
     {{"bytes",
       OptionKind::Int,
       "0",
       "the budget in bytes for the estimated peak; 0: `percent` of save-all's",
       {},
       {},
       0},
      {"percent", OptionKind::Int, "50", "the budget as a percentage of save-all's estimated peak", {}, {}, 1}}}};

}  // namespace
}  // namespace lazylab
