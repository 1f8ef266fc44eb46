// Fusion strategy `dominator` (TVM's FuseOps): each op is grouped with its
// immediate post-dominator when every path between them runs through ops of
// patterns that can be fused, so a value read by several consumers is fused
// only when all of them land in the same kernel and nothing is written out
// twice. The post-dominator tree comes from Boost.Graph's Lengauer-Tarjan
// dominator algorithm on the reversed graph, from a virtual exit that every
// output and every unused value flows into.
//
// Patterns, from most to least fusible: elementwise (and constants),
// broadcast, injective (layout ops), reduction, matmul (fusible outputs),
// opaque. A group's pattern is the least fusible of its ops. Rules, in
// TVM's two phases, for a node N with immediate post-dominator D and the
// nodes P strictly between them:
//   phase 0, N's group is a matmul: D is elementwise and all of P and D are
//     elementwise or broadcast (an epilogue);
//   phase 0, N's group is elementwise or broadcast: P are at most injective,
//     D at most injective or a reduction or a matmul (a prologue);
//   phase 1, N's group is injective: P and D are at most injective.
// Reductions and opaque ops start no fusion. Legality, which TVM leaves to
// its code generator: the merged group must be one kernel this backend runs,
// checked edge by edge with gemm-epilogue's pair decision (one row space, or
// one matmul with transposed operands and an elementwise epilogue; backend
// capabilities and size limit; no cycle between kernels). The whole path is
// fused or none of it. Profitability: fuse whenever the rules and legality
// allow. Constants are duplicated into each consumer first.
#include <fmt/format.h>

#include <algorithm>
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/dominator_tree.hpp>
#include <set>

#include "core/fusion_strategy.h"
#include "fusion_decisions.h"

namespace lazylab {
namespace {

enum class Pattern { Elementwise, Broadcast, Injective, Reduction, Matmul, Opaque };

const char* pattern_name(Pattern p) {
  static const char* names[] = {"elementwise", "broadcast", "injective", "reduction", "matmul", "opaque"};
  return names[static_cast<int>(p)];
}

Pattern pattern_of(const Node& node) {
  if (node.op == OpId::Broadcast) return Pattern::Broadcast;
  if (node.op == OpId::Conv2d) return Pattern::Matmul;  // a contraction: it takes an elementwise epilogue
  if (node.op == OpId::Constant) return Pattern::Elementwise;
  switch (op_info(node.op).category) {
    case OpCategory::Elementwise: return Pattern::Elementwise;
    case OpCategory::Layout: return Pattern::Injective;
    case OpCategory::Reduction: return Pattern::Reduction;
    case OpCategory::Contraction: return Pattern::Matmul;
    default: return Pattern::Opaque;
  }
}

constexpr NodeId kExit = ~NodeId{0};

// Immediate post-dominator of every node in a kernel; kExit when only the
// virtual exit post-dominates it (an output, or paths that never rejoin).
std::vector<NodeId> immediate_post_dominators(const Graph& graph, KernelGroups& groups,
                                              const std::vector<std::vector<NodeId>>& users) {
  using Reversed = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS>;
  using Vertex = boost::graph_traits<Reversed>::vertex_descriptor;
  const size_t exit = graph.size();
  Reversed reversed(graph.size() + 1);
  std::vector<bool> is_root(graph.size(), false);
  for (NodeId root : graph.roots()) is_root[root] = true;
  for (NodeId id = 0; id < graph.size(); ++id) {
    if (!groups.in_kernel(id)) continue;
    if (is_root[id] || users[id].empty()) boost::add_edge(exit, id, reversed);
    for (NodeId user : users[id]) boost::add_edge(user, id, reversed);
  }
  std::vector<Vertex> idom(graph.size() + 1, boost::graph_traits<Reversed>::null_vertex());
  boost::lengauer_tarjan_dominator_tree(
      reversed, exit, boost::make_iterator_property_map(idom.begin(), boost::get(boost::vertex_index, reversed)));
  std::vector<NodeId> ipdom(graph.size(), kExit);
  for (NodeId id = 0; id < graph.size(); ++id)
    if (idom[id] != boost::graph_traits<Reversed>::null_vertex() && idom[id] != exit) ipdom[id] = idom[id];
  return ipdom;
}

class Dominator : public FusionStrategy {
 public:
  Status partition(Module& module) override {
    duplicate_constants(module);
    const Graph& graph = module.graph;
    KernelGroups groups(graph);
    users_.assign(graph.size(), {});
    for (NodeId id = 0; id < graph.size(); ++id)
      if (groups.in_kernel(id))
        for (NodeId operand : graph.node(id).operands)
          if (groups.in_kernel(operand)) users_[operand].push_back(id);
    ipdom_ = immediate_post_dominators(graph, groups, users_);
    group_pattern_.assign(graph.size(), Pattern::Opaque);
    for (NodeId id = 0; id < graph.size(); ++id) group_pattern_[id] = pattern_of(graph.node(id));
    for (int phase : {0, 1})
      for (NodeId id = 0; id < graph.size(); ++id)
        if (groups.in_kernel(id) && ipdom_[id] != kExit) consider(module, groups, id, phase);
    module.kernel_of = groups.kernel_of();
    return {};
  }

 private:
  Pattern group_pattern(KernelGroups& groups, NodeId id) { return group_pattern_[groups.group_of(id)]; }

  // The nodes on paths from `source` to `sink`, both excluded.
  std::vector<NodeId> between(NodeId source, NodeId sink) const {
    std::set<NodeId> seen;
    std::vector<NodeId> stack(users_[source].begin(), users_[source].end());
    while (!stack.empty()) {
      NodeId at = stack.back();
      stack.pop_back();
      if (at == sink || !seen.insert(at).second) continue;
      stack.insert(stack.end(), users_[at].begin(), users_[at].end());
    }
    return {seen.begin(), seen.end()};
  }

  // TVM's rule for this node and phase; nullopt when it does not apply.
  std::optional<FusionDecision> rule(const Module& module, KernelGroups& groups, NodeId id, NodeId sink,
                                     const std::vector<NodeId>& path, int phase) {
    Pattern own = group_pattern(groups, id);
    Pattern path_pattern = pattern_of(module.graph.node(sink));
    for (NodeId at : path) path_pattern = std::max(path_pattern, pattern_of(module.graph.node(at)));
    auto all_between = [&](auto allowed, const char* what) -> FusionDecision {
      for (NodeId at : path)
        if (!allowed(group_pattern(groups, at), false))
          return FusionDecision::no(RefusalCode::OpKind, fmt::format("a {} op between it and its post-dominator ({})",
                                                                     pattern_name(group_pattern(groups, at)), what));
      if (!allowed(group_pattern(groups, sink), true))
        return FusionDecision::no(RefusalCode::OpKind, fmt::format("its post-dominator is a {} kernel ({})",
                                                                   pattern_name(group_pattern(groups, sink)), what));
      return FusionDecision::yes();
    };
    if (own == Pattern::Matmul && phase == 0) {
      if (path_pattern != Pattern::Elementwise)
        return FusionDecision::no(
            RefusalCode::OpKind,
            fmt::format("the path to its post-dominator is {}, not elementwise", pattern_name(path_pattern)));
      return all_between([](Pattern p, bool) { return p <= Pattern::Broadcast; }, "an epilogue is elementwise");
    }
    if (own <= Pattern::Broadcast && phase == 0) {
      if (path_pattern > Pattern::Injective && path_pattern != Pattern::Reduction)
        return FusionDecision::no(RefusalCode::OpKind,
                                  fmt::format("the path to its post-dominator is {}", pattern_name(path_pattern)));
      return all_between([](Pattern p, bool sink) { return sink ? p != Pattern::Opaque : p <= Pattern::Injective; },
                         "a prologue runs through injective ops only");
    }
    if (own == Pattern::Injective && phase == 1) {
      if (path_pattern > Pattern::Injective)
        return FusionDecision::no(RefusalCode::OpKind,
                                  fmt::format("the path to its post-dominator is {}", pattern_name(path_pattern)));
      return all_between([](Pattern p, bool) { return p <= Pattern::Injective; }, "injective ops fuse with injective");
    }
    if (own >= Pattern::Reduction && phase == 0)
      return FusionDecision::no(RefusalCode::OpKind,
                                fmt::format("a {} kernel does not fuse into its consumers", pattern_name(own)));
    return std::nullopt;
  }

  // Every edge among `members` merged, each checked by gemm-epilogue's
  // decision: all of them, or none. Two members need one merge, checked
  // before it is made; more are tried on a copy first.
  FusionDecision legal(Module& module, KernelGroups& groups, std::vector<NodeId> members) {
    std::sort(members.begin(), members.end());
    Pattern merged = Pattern::Elementwise;
    for (NodeId id : members) merged = std::max(merged, group_pattern(groups, id));
    std::vector<std::pair<NodeId, NodeId>> merges;
    if (members.size() == 2) {
      FusionDecision decision = merge_all(module, groups, members, merges);
      if (!decision) return decision;
    } else {
      KernelGroups trial = groups;
      FusionDecision decision = merge_all(module, trial, members, merges);
      if (!decision) return decision;
      for (auto [producer, consumer] : merges) groups.merge(producer, consumer);
    }
    group_pattern_[groups.group_of(members.front())] = merged;
    return FusionDecision::yes();
  }

  static FusionDecision merge_all(Module& module, KernelGroups& groups, const std::vector<NodeId>& members,
                                  std::vector<std::pair<NodeId, NodeId>>& merges) {
    for (NodeId consumer : members)
      for (NodeId producer : module.graph.node(consumer).operands) {
        if (!std::binary_search(members.begin(), members.end(), producer)) continue;
        if (groups.group_of(producer) == groups.group_of(consumer)) continue;
        FusionDecision decision = decide_gemm_epilogue(module, groups, producer, consumer);
        if (!decision)
          return FusionDecision::no(decision.code, fmt::format("%{} -> %{}: {}", producer, consumer, decision.reason));
        groups.merge(producer, consumer);
        merges.emplace_back(producer, consumer);
      }
    return FusionDecision::yes();
  }

  void consider(Module& module, KernelGroups& groups, NodeId id, int phase) {
    NodeId sink = ipdom_[id];
    if (groups.group_of(id) == groups.group_of(sink)) return;
    std::vector<NodeId> path = between(id, sink);
    std::optional<FusionDecision> decision = rule(module, groups, id, sink, path, phase);
    if (!decision) return;
    if (*decision) {
      path.push_back(id);
      path.push_back(sink);
      decision = legal(module, groups, std::move(path));
    }
    module.fusion_log.push_back({id, sink, std::move(*decision)});
  }

  std::vector<std::vector<NodeId>> users_;
  std::vector<NodeId> ipdom_;
  std::vector<Pattern> group_pattern_;  // by group root
};

const FusionStrategyRegistrar kRegistrar{
    {"dominator",
     "TVM-style: each op joins its immediate post-dominator when every path between them is fusible (Boost.Graph "
     "Lengauer-Tarjan)",
     "TVM's rules (matmul into an elementwise post-dominator; elementwise and broadcast into a post-dominator reached "
     "through injective ops; injective through injective), each merged kernel then checked edge by edge with "
     "gemm-epilogue's decision; the whole path or none",
     "whenever the rules and legality allow", [](const PassOptions&) { return std::make_unique<Dominator>(); }}};

}  // namespace
}  // namespace lazylab
