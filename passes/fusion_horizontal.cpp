// Fusion strategy `horizontal`: producer-consumer's vertical fusion, then
// independent kernels over the same iteration space merged when they read a
// common value, so the merged kernel reads it once (and launches once).
//
// Legality of a horizontal merge: both kernels hold only ops
// producer-consumer fuses and share one row space; the backend fuses them;
// the size limit holds; neither kernel reaches the other (through any path),
// so the merge creates no cycle. Profitability: the two kernels read at
// least one common value; logged pairs name one node of each kernel.
#include <fmt/format.h>

#include "core/fusion_strategy.h"
#include "fusion_decisions.h"

namespace lazylab {
namespace {

// Each value's users, in program order (built once: scanning the graph for
// each value's readers made this strategy quadratic in graph size).
std::vector<std::vector<NodeId>> users_of(const Graph& graph) {
  std::vector<std::vector<NodeId>> users(graph.size());
  for (NodeId id = 0; id < graph.size(); ++id)
    for (NodeId operand : graph.node(id).operands)
      if (users[operand].empty() || users[operand].back() != id) users[operand].push_back(id);
  return users;
}

// Every kernel reading `value`, as one node from each, in program order.
std::vector<NodeId> readers_by_kernel(KernelGroups& groups, NodeId value, const std::vector<NodeId>& users) {
  std::vector<NodeId> readers;
  std::vector<int> seen;
  for (NodeId id : users) {
    if (!groups.in_kernel(id)) continue;
    int group = groups.group_of(id);
    if (groups.group_of(value) != group && std::find(seen.begin(), seen.end(), group) == seen.end()) {
      seen.push_back(group);
      readers.push_back(id);
    }
  }
  return readers;
}

void merge_horizontally(Module& module, KernelGroups& groups) {
  const Graph& graph = module.graph;
  std::vector<std::vector<NodeId>> users = users_of(graph);
  for (NodeId value = 0; value < graph.size(); ++value) {
    std::vector<NodeId> readers = readers_by_kernel(groups, value, users[value]);
    for (size_t i = 1; i < readers.size(); ++i) {
      NodeId a = readers[0], b = readers[i];
      if (groups.group_of(a) == groups.group_of(b)) continue;
      // decide_row_space checks both ops, the shared row space, the backend
      // and cycles; it also refuses pairs where one node broadcasts the other.
      FusionDecision decision = decide_row_space(module, groups, a, b);
      if (decision) groups.merge(a, b);
      module.fusion_log.push_back({a, b, std::move(decision)});
    }
  }
}

class Horizontal : public FusionStrategy {
 public:
  Status partition(Module& module) override {
    partition_pairwise(module, decide_row_space);
    KernelGroups groups(module.graph);
    std::vector<NodeId> first_of_kernel(module.graph.size(), ~NodeId{0});  // rebuild the vertical groups
    for (NodeId id = 0; id < module.graph.size(); ++id) {
      int kernel = module.kernel_of[id];
      if (kernel < 0) continue;
      if (first_of_kernel[kernel] == ~NodeId{0})
        first_of_kernel[kernel] = id;
      else
        groups.merge(first_of_kernel[kernel], id);
    }
    merge_horizontally(module, groups);
    module.kernel_of = groups.kernel_of();
    return {};
  }
};

const FusionStrategyRegistrar kRegistrar{
    {"horizontal", "producer-consumer, then independent kernels in one row space that read a common value merged",
     "producer-consumer, then two kernels that read a common value, neither reaching the other, in one row space; "
     "backend, size limit, no cycle",
     "whenever legal: the shared value is read once",
     [](const PassOptions&) { return std::make_unique<Horizontal>(); }}};

}  // namespace
}  // namespace lazylab
