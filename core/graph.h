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
inline constexpr NodeId kNoNode = ~NodeId{0};
using Operands = boost::container::small_vector<NodeId, 3>;

struct Node {
  // A constructor (not aggregate initialisation) so emplacing a node does not
  // zero-fill it first: that was a measurable part of tracing cost.
  Node(OpId op, TensorType&& type, Operands&& operands, Attrs&& attrs)
      : op(op), operands(std::move(operands)), type(std::move(type)), attrs(std::move(attrs)) {}

  // What Graph::reuse compares comes first, in one cache line: a repeated
  // trace reads little else of a node.
  OpId op;
  Operands operands;
  // Structural hash computed once at creation from op, attributes, result
  // type and operand hashes (see core/hash.h).
  uint64_t hash = 0;
  TensorType type;
  Attrs attrs;
};

class Graph {
 public:
  // Appends a node and hashes it; the caller has inferred `type` and checked
  // that every operand id precedes the new node.
  NodeId add(OpId op, TensorType type, Operands operands = {}, Attrs attrs = {});
  // The same, moving from the caller's values: the tracer's path, where
  // each extra move of a type was measurable.
  NodeId emplace(OpId op, TensorType&& type, Operands&& operands, Attrs&& attrs);
  // Takes back the node this graph held at the next position before clear(),
  // type and hash included, when every node before it was taken back too and
  // it is the node being added: the same op, operands and attributes, and
  // `type` when one is given. A training loop's trace repeats the last one,
  // so this skips type inference, hashing and construction per node.
  // The caller must pass `type` where the op's type is declared, not inferred.
  // Returns kNoNode when the kept node differs (a plain id, not an optional:
  // returning a std::optional<NodeId> stalled on store forwarding).
  NodeId reuse(OpId op, std::span<const NodeId> operands, const Attrs& attrs, const TensorType* type);
  // The node reuse() would take back next, or null when there is none.
  const Node* next_kept() const { return size_ < unchanged_ ? &nodes_[size_] : nullptr; }
  // Takes back next_kept(), which the caller has found to be the node being
  // added (as reuse() would have).
  NodeId take_next() { return static_cast<NodeId>(size_++); }

  const Node& node(NodeId id) const { return nodes_[id]; }
  std::span<const Node> nodes() const { return {nodes_.data(), size_}; }
  size_t size() const { return size_; }

  const std::vector<NodeId>& roots() const { return roots_; }
  void set_roots(std::vector<NodeId> roots) { roots_ = std::move(roots); }
  void add_root(NodeId id) { roots_.push_back(id); }

  // Hash of the computation: the root hashes in order.
  uint64_t hash() const;

  // Parameter node ids indexed by ordinal.
  std::vector<NodeId> parameters() const;

  // Forgets every node but keeps them for reuse(), so a training loop's
  // trace re-fills the same memory, mostly with the same nodes.
  void clear();
  void reserve(size_t nodes) { nodes_.reserve(nodes); }

 private:
  // Past size_: the nodes before the last clear(), kept for reuse().
  std::vector<Node> nodes_;
  size_t size_ = 0;
  // Positions below it hold what they held before the last clear(): the
  // prefix reuse() may take back.
  size_t unchanged_ = 0;
  std::vector<NodeId> roots_;
};

// Same computation: equal ops, types, attributes and operand structure
// reachable from the roots, in root order (node numbering may differ).
bool structurally_equal(const Graph& a, const Graph& b);

// Nodes reachable from `roots` (by default the graph's own).
std::vector<bool> live_nodes(const Graph& graph, std::span<const NodeId> roots);
inline std::vector<bool> live_nodes(const Graph& graph) { return live_nodes(graph, graph.roots()); }

}  // namespace lazylab
