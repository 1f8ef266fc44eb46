#include "reducer.h"

namespace lazylab {

Graph compact_graph(const Graph& graph, const std::vector<NodeId>& roots, const std::vector<bool>& as_parameter) {
  // Liveness with cut nodes reading nothing.
  std::vector<bool> live(graph.size(), false);
  for (NodeId root : roots) live[root] = true;
  for (NodeId id = static_cast<NodeId>(graph.size()); id-- > 0;)
    if (live[id] && !as_parameter[id])
      for (NodeId operand : graph.node(id).operands) live[operand] = true;
  Graph compact;
  std::vector<NodeId> renumbered(graph.size());
  int64_t ordinal = 0;
  for (NodeId id = 0; id < graph.size(); ++id) {
    if (!live[id]) continue;
    const Node& node = graph.node(id);
    if (as_parameter[id] || node.op == OpId::Parameter) {
      Attrs attrs;
      attrs[0].i = ordinal++;
      renumbered[id] = compact.add(OpId::Parameter, node.type, {}, attrs);
      continue;
    }
    Operands operands;
    for (NodeId operand : node.operands) operands.push_back(renumbered[operand]);
    renumbered[id] = compact.add(node.op, node.type, std::move(operands), node.attrs);
  }
  for (NodeId root : roots) compact.add_root(renumbered[root]);
  return compact;
}

Graph reduce_graph(const Graph& graph, const std::function<bool(const Graph&)>& still_fails) {
  Graph best = graph;
  for (bool progress = true; progress;) {
    progress = false;
    std::vector<bool> none(best.size(), false);
    // One root instead of several, latest nodes first (the smallest graphs).
    for (NodeId root = static_cast<NodeId>(best.size()); root-- > 0 && !progress;) {
      if (best.node(root).op == OpId::Parameter || (best.roots().size() == 1 && best.roots()[0] == root)) continue;
      Graph candidate = compact_graph(best, {root}, none);
      if (candidate.size() < best.size() && still_fails(candidate)) best = std::move(candidate), progress = true;
    }
    // A node cut into a parameter, its producers dropped.
    for (NodeId id = 0; id < best.size() && !progress; ++id) {
      if (best.node(id).op == OpId::Parameter || best.node(id).operands.empty()) continue;
      std::vector<bool> cut = none;
      cut[id] = true;
      Graph candidate = compact_graph(best, best.roots(), cut);
      if (candidate.size() < best.size() && still_fails(candidate)) best = std::move(candidate), progress = true;
    }
  }
  return best;
}

}  // namespace lazylab
