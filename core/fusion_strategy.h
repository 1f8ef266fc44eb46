// Fusion strategies: behind one interface so a researcher adds one file (or
// one plugin) and selects it with fuse{strategy=NAME}. Every candidate pair a
// strategy considers is logged with its decision, and every "no" carries its
// reason (XLA's FusionDecision), for `lazylab show --explain-fusion`.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "module.h"
#include "pass.h"

namespace lazylab {

class FusionStrategy {
 public:
  virtual ~FusionStrategy() = default;
  // Sets module.kernel_of: a kernel id for every node (-1 for parameters and
  // dead nodes), dense from 0. May first rewrite module.graph (to duplicate
  // cheap producers); appends what it considered to module.fusion_log.
  virtual Status partition(Module& module) = 0;
};

struct FusionStrategyInfo {
  std::string name;
  std::string summary;        // one line
  std::string legality;       // when it may fuse (lazylab passes prints these two)
  std::string profitability;  // when it chooses to
  // Given the fuse invocation's options (`strategy` and this strategy's own,
  // validated, defaults filled in).
  std::function<std::unique_ptr<FusionStrategy>(const PassOptions&)> create;
  // Its own options, set as fuse{strategy=NAME,OPTION=VALUE}.
  std::vector<PassOptionSpec> options = {};
  std::string provenance = {};  // "plugin NAME VERSION"; empty for built-ins
};

using FusionStrategyRegistry = Registry<FusionStrategyInfo>;
extern template class Registry<FusionStrategyInfo>;
using FusionStrategyRegistrar = Registrar<FusionStrategyInfo>;

// Nodes grouped into would-be kernels (union-find), with the checks every
// strategy needs before merging two groups. The graph between groups is kept
// up to date as groups merge, so a cycle check visits only what the merging
// groups reach, and each group knows its members.
class KernelGroups {
 public:
  // Every live non-parameter node starts in a group of its own.
  explicit KernelGroups(const Graph& graph);
  KernelGroups(const KernelGroups& other);
  KernelGroups& operator=(const KernelGroups&) = delete;
  ~KernelGroups();

  int group_of(NodeId id);
  size_t size_of(NodeId id) { return members_of(id).size(); }
  // The group's matmul (a group holds at most one), kept as groups merge so
  // strategies need not scan members.
  std::optional<NodeId> matmul_of(NodeId id);
  // The group's conv2d (a window kernel holds at most one), likewise.
  std::optional<NodeId> window_of(NodeId id);
  // Whether every op of the group is elementwise (or a constant) over one
  // shape, the shape of `other`'s group too: such a pair is one row space
  // without analysing it.
  bool plain_elementwise_pair(NodeId a, NodeId b);
  // The nodes in `id`'s group, in program order.
  const std::vector<NodeId>& members_of(NodeId id) { return members_[group_of(id)]; }
  bool in_kernel(NodeId id) const { return parent_[id] >= 0; }
  void merge(NodeId a, NodeId b);
  // Merging the groups of `a` and `b` would make kernels depend on each other
  // in a cycle: one reaches the other through a third group (checked on the
  // group graph with Boost.Graph's breadth-first search). Where one group
  // feeds the other directly, only that direction can hold such a path (the
  // other would already be a cycle), so only it is searched: a chain fused
  // in program order then costs a step per pair, not the rest of the chain.
  bool would_create_cycle(NodeId a, NodeId b);
  // Dense kernel ids in program order of each group's first node.
  std::vector<int> kernel_of();
  // Per node: whether it is root `loss_root`'s ancestor (the forward of a
  // joint graph; Module::loss_root), worked out once.
  const std::vector<bool>& forward_of(size_t loss_root);

 private:
  struct GroupGraph;
  const Graph& graph_;
  std::vector<int> parent_;                   // -1: in no kernel
  std::vector<std::vector<NodeId>> members_;  // by group root
  struct Summary {
    std::optional<NodeId> matmul, window;
    bool plain = false;  // elementwise ops and constants, all of the first member's shape
  };
  std::vector<Summary> summary_;  // by group root
  std::unique_ptr<GroupGraph> groups_;
  std::optional<std::vector<bool>> forward_;  // forward_of's, once asked
};

// Shared checks: the backend runs both ops and fuses this kind of kernel,
// the merged group stays under the backend's size limit, and (after remat)
// it does not join a joint graph's forward and backward.
FusionDecision check_backend(const Module& module, KernelGroups& groups, NodeId producer, NodeId consumer);

// Gives every constant one user, so fusing a splat into each consumer never
// sends it through memory (a duplicated producer that costs nothing).
void duplicate_constants(Module& module);

// Runs `decide` over every producer/consumer pair in program order, merging
// on yes and logging every decision, starting from `groups` (a strategy may
// have merged some already); sets module.kernel_of.
template <class Decide>
void partition_pairwise(Module& module, KernelGroups& groups, Decide decide) {
  for (NodeId consumer = 0; consumer < module.graph.size(); ++consumer) {
    if (!groups.in_kernel(consumer)) continue;
    for (NodeId producer : module.graph.node(consumer).operands) {
      if (!groups.in_kernel(producer) || groups.group_of(producer) == groups.group_of(consumer)) continue;
      FusionDecision decision = decide(module, groups, producer, consumer);
      if (decision) groups.merge(producer, consumer);
      module.fusion_log.push_back({producer, consumer, std::move(decision)});
    }
  }
  module.kernel_of = groups.kernel_of();
}

// The same from a node per group, constants duplicated first.
template <class Decide>
void partition_pairwise(Module& module, Decide decide) {
  duplicate_constants(module);
  KernelGroups groups(module.graph);
  partition_pairwise(module, groups, decide);
}

}  // namespace lazylab
