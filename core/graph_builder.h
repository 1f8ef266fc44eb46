// Building and rewriting graphs. Passes rebuild a graph node by node
// (Halide's IRMutator idea): each node is either copied with remapped
// operands or replaced by whatever the rewrite builds.
#pragma once

#include <functional>
#include <optional>

#include "graph.h"

namespace lazylab {

class GraphBuilder {
 public:
  // Infers and checks the result type; `declared` as for infer_type.
  Expected<NodeId> add(OpId op, Operands operands, const Attrs& attrs = {}, const TensorType* declared = nullptr);
  // For nodes already known to be well-typed (copies).
  NodeId add_typed(OpId op, TensorType type, Operands operands, Attrs attrs);
  // A splat of `value` as `type` stores it (an integer type truncates it).
  NodeId constant(double value, TensorType type);
  // A splat of a scalar attribute made for type's dtype (scalar_attr): exact
  // for every integer.
  NodeId constant(const AttrValue& value, TensorType type);
  // NumPy-style: `id`'s dims align right with `shape`; returns `id` when the
  // shape already matches.
  Expected<NodeId> broadcast_to(NodeId id, const Dims& shape);

  const Node& node(NodeId id) const { return graph_.node(id); }
  const TensorType& type(NodeId id) const { return graph_.node(id).type; }
  Graph& graph() { return graph_; }

 private:
  Graph graph_;
};

// A rewrite returns the id of a replacement built in `builder`, or nullopt to
// keep the node (copied with `operands`, the remapped operand ids).
using RewriteFn =
    std::function<Expected<std::optional<NodeId>>(GraphBuilder& builder, const Node& node, const Operands& operands)>;

struct Rebuilt {
  Graph graph;
  bool changed = false;
};

// Rebuilds `graph` through `rewrite`; `keep` (optional, by node id) drops
// nodes for which it is false. Roots are remapped.
Expected<Rebuilt> rebuild(const Graph& graph, const RewriteFn& rewrite, const std::vector<bool>* keep = nullptr);

}  // namespace lazylab
