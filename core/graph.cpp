#include "core/graph.h"

#include <algorithm>
#include <bit>
#include <memory>
#include <unordered_map>

#include "core/hash.h"

namespace lazylab {

NodeId Graph::add(OpId op, TensorType type, Operands operands, Attrs attrs) {
  return emplace(op, std::move(type), std::move(operands), std::move(attrs));
}

NodeId Graph::emplace(OpId op, TensorType&& type, Operands&& operands, Attrs&& attrs) {
  Node* node;
  if (size_ < nodes_.size()) {
    node = &nodes_[size_];
    std::destroy_at(node);
    std::construct_at(node, op, std::move(type), std::move(operands), std::move(attrs));
    unchanged_ = std::min(unchanged_, size_);
  } else {
    node = &nodes_.emplace_back(op, std::move(type), std::move(operands), std::move(attrs));
  }
  node->hash = hash_node(*node, nodes());
  return static_cast<NodeId>(size_++);
}

namespace {

// Only the op's own attributes count, as in its hash.
bool same_attrs(const Attrs& a, const Attrs& b, int count) {
  for (int i = 0; i < count; ++i)
    if (a[i].i != b[i].i || std::bit_cast<uint64_t>(a[i].f) != std::bit_cast<uint64_t>(b[i].f) ||
        a[i].ints != b[i].ints)
      return false;
  return true;
}

}  // namespace

NodeId Graph::reuse(OpId op, std::span<const NodeId> operands, const Attrs& attrs, const TensorType* type) {
  if (size_ >= unchanged_) return kNoNode;
  const Node& kept = nodes_[size_];
  if (kept.op != op || kept.operands.size() != operands.size() || (type && kept.type != *type)) return kNoNode;
  // Operands precede the node, so they are in the unchanged prefix too.
  for (size_t i = 0; i < operands.size(); ++i)
    if (kept.operands[i] != operands[i]) return kNoNode;
  if (!same_attrs(kept.attrs, attrs, op_info(op).num_attrs)) return kNoNode;
  return static_cast<NodeId>(size_++);
}

uint64_t Graph::hash() const {
  boost::container::small_vector<uint64_t, 8> root_hashes;
  for (NodeId root : roots_) root_hashes.push_back(nodes_[root].hash);
  return hash_roots(std::span(root_hashes.data(), root_hashes.size()));
}

std::vector<NodeId> Graph::parameters() const {
  std::vector<std::pair<int64_t, NodeId>> by_ordinal;
  for (NodeId id = 0; id < size_; ++id)
    if (nodes_[id].op == OpId::Parameter) by_ordinal.emplace_back(nodes_[id].attrs[0].i, id);
  std::sort(by_ordinal.begin(), by_ordinal.end());
  std::vector<NodeId> ids;
  for (auto& [ordinal, id] : by_ordinal) ids.push_back(id);
  return ids;
}

void Graph::clear() {
  unchanged_ = size_;
  size_ = 0;
  roots_.clear();
}

std::vector<bool> live_nodes(const Graph& graph, std::span<const NodeId> roots) {
  std::vector<bool> live(graph.size());
  for (NodeId root : roots) live[root] = true;
  for (NodeId id = static_cast<NodeId>(graph.size()); id-- > 0;)
    if (live[id])
      for (NodeId operand : graph.node(id).operands) live[operand] = true;
  return live;
}

namespace {

bool same_node_shape(const Node& a, const Node& b) {
  return a.op == b.op && a.type == b.type && a.attrs == b.attrs && a.operands.size() == b.operands.size();
}

// Walks both graphs from matching roots, pairing nodes; a node of `a` must
// always pair with the same node of `b`.
bool match(const Graph& a, const Graph& b, NodeId x, NodeId y, std::unordered_map<NodeId, NodeId>& pairing) {
  std::vector<std::pair<NodeId, NodeId>> stack{{x, y}};
  while (!stack.empty()) {
    auto [u, v] = stack.back();
    stack.pop_back();
    auto [it, inserted] = pairing.emplace(u, v);
    if (!inserted) {
      if (it->second != v) return false;
      continue;
    }
    const Node &nu = a.node(u), &nv = b.node(v);
    if (!same_node_shape(nu, nv)) return false;
    for (size_t i = 0; i < nu.operands.size(); ++i) stack.emplace_back(nu.operands[i], nv.operands[i]);
  }
  return true;
}

}  // namespace

bool structurally_equal(const Graph& a, const Graph& b) {
  if (a.roots().size() != b.roots().size()) return false;
  std::unordered_map<NodeId, NodeId> pairing;
  for (size_t i = 0; i < a.roots().size(); ++i)
    if (!match(a, b, a.roots()[i], b.roots()[i], pairing)) return false;
  // Pairing must be one-to-one: x+x and x+y differ.
  std::unordered_map<NodeId, NodeId> reverse;
  for (auto [u, v] : pairing)
    if (!reverse.emplace(v, u).second) return false;
  return true;
}

}  // namespace lazylab
