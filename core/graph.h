// A graph is a list of immutable nodes in topological order (operands always
// precede their users) plus the ordered roots it computes.
#pragma once

#include <boost/container/small_vector.hpp>
#include <cstdint>
#include <span>
#include <vector>

#include "op_info.h"

namespace lazylab {

using NodeId = uint32_t;
using Operands = boost::container::small_vector<NodeId, 3>;

struct Node {
  // A constructor (not aggregate initialisation) so emplacing a node does not
  // zero-fill it first: that was a measurable part of tracing cost.
  Node(OpId op, TensorType&& type, Operands&& operands, Attrs&& attrs)
      : op(op), type(std::move(type)), operands(std::move(operands)), attrs(std::move(attrs)) {}

  OpId op;
  TensorType type;
  Operands operands;
  Attrs attrs;
  // Structural hash computed once at creation from op, attributes, result
  // type and operand hashes (see core/hash.h).
  uint64_t hash = 0;
};

class Graph {
 public:
  // Appends a node and hashes it; the caller has inferred `type` and checked
  // that every operand id precedes the new node.
  NodeId add(OpId op, TensorType type, Operands operands = {}, Attrs attrs = {});
  // The same, moving from the caller's values: the tracer's path, where
  // each extra move of a type was measurable.
  NodeId emplace(OpId op, TensorType&& type, Operands&& operands, Attrs&& attrs);

  const Node& node(NodeId id) const { return nodes_[id]; }
  const std::vector<Node>& nodes() const { return nodes_; }
  size_t size() const { return nodes_.size(); }

  const std::vector<NodeId>& roots() const { return roots_; }
  void set_roots(std::vector<NodeId> roots) { roots_ = std::move(roots); }
  void add_root(NodeId id) { roots_.push_back(id); }

  // Hash of the computation: the root hashes in order.
  uint64_t hash() const;

  // Parameter node ids indexed by ordinal.
  std::vector<NodeId> parameters() const;

  // Forgets every node but keeps the storage, so a training loop's trace
  // re-fills the same memory.
  void clear();
  void reserve(size_t nodes) { nodes_.reserve(nodes); }

 private:
  std::vector<Node> nodes_;
  std::vector<NodeId> roots_;
};

// Same computation: equal ops, types, attributes and operand structure
// reachable from the roots, in root order (node numbering may differ).
bool structurally_equal(const Graph& a, const Graph& b);

// Nodes reachable from `roots` (by default the graph's own).
std::vector<bool> live_nodes(const Graph& graph, std::span<const NodeId> roots);
inline std::vector<bool> live_nodes(const Graph& graph) { return live_nodes(graph, graph.roots()); }

}  // namespace lazylab
