#include "remat_strategy.h"

#include <fmt/format.h>

#include <algorithm>

#include "graph_builder.h"
#include "op_info.h"

namespace lazylab {

Expected<JointSplit> split_joint(const Graph& graph, size_t of) {
  if (of >= graph.roots().size())
    return make_error(fmt::format("the loss is root {}, but the graph has {} root{}", of, graph.roots().size(),
                                  graph.roots().size() == 1 ? "" : "s"));
  JointSplit split;
  split.live = live_nodes(graph);
  NodeId loss = graph.roots()[of];
  split.forward = live_nodes(graph, std::span<const NodeId>(&loss, 1));
  for (NodeId id = 0; id < graph.size(); ++id) {
    if (!split.live[id] || split.forward[id]) continue;
    for (NodeId operand : graph.node(id).operands)
      if (split.forward[operand] && graph.node(operand).op != OpId::Parameter) split.saved.push_back(operand);
  }
  std::sort(split.saved.begin(), split.saved.end());
  split.saved.erase(std::unique(split.saved.begin(), split.saved.end()), split.saved.end());
  return split;
}

bool cheap_to_recompute(const Node& node) {
  switch (op_info(node.op).category) {
    case OpCategory::Elementwise: return true;
    case OpCategory::Layout: return node.op != OpId::Gather && node.op != OpId::ScatterAdd;
    default: return node.op == OpId::Constant || node.op == OpId::Iota;
  }
}

namespace {

class Rematerializer {
 public:
  Rematerializer(const Graph& graph, const JointSplit& split, const std::vector<bool>& recompute)
      : graph_(graph),
        split_(split),
        recompute_(recompute),
        mapped_(graph.size(), kNoNode),
        copy_(graph.size(), kNoNode) {}

  Graph run() {
    for (NodeId id = 0; id < graph_.size(); ++id) {
      const Node& node = graph_.node(id);
      if (!split_.live[id] && node.op != OpId::Parameter) continue;  // parameters keep their ordinals
      bool backward = !split_.forward[id];
      Operands operands;
      for (NodeId operand : node.operands) operands.push_back(backward ? read(operand) : mapped_[operand]);
      mapped_[id] = builder_.add_typed(node.op, node.type, operands, node.attrs);
    }
    std::vector<NodeId> roots;
    for (NodeId root : graph_.roots()) roots.push_back(mapped_[root]);
    builder_.graph().set_roots(std::move(roots));
    return std::move(builder_.graph());
  }

 private:
  bool recomputed(NodeId id) const { return split_.forward[id] && recompute_[id]; }

  // What a backward node reads for `id`: its copy where recomputed (made
  // now, its recomputed operands first, without recursion), else the node.
  NodeId read(NodeId id) {
    if (!recomputed(id)) return mapped_[id];
    std::vector<std::pair<NodeId, bool>> stack{{id, false}};
    while (!stack.empty()) {
      auto [at, expanded] = stack.back();
      stack.pop_back();
      if (copy_[at] != kNoNode) continue;
      const Node& node = graph_.node(at);
      if (!expanded) {
        stack.push_back({at, true});
        for (NodeId operand : node.operands)
          if (recomputed(operand) && copy_[operand] == kNoNode) stack.push_back({operand, false});
        continue;
      }
      Operands operands;
      for (NodeId operand : node.operands) operands.push_back(recomputed(operand) ? copy_[operand] : mapped_[operand]);
      copy_[at] = builder_.add_typed(node.op, node.type, operands, node.attrs);
    }
    return copy_[id];
  }

  const Graph& graph_;
  const JointSplit& split_;
  const std::vector<bool>& recompute_;
  GraphBuilder builder_;
  std::vector<NodeId> mapped_, copy_;
};

}  // namespace

Graph rematerialize(const Graph& graph, const JointSplit& split, const std::vector<bool>& recompute) {
  return Rematerializer(graph, split, recompute).run();
}

}  // namespace lazylab
