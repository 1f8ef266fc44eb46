#include "core/graph_builder.h"

#include <fmt/format.h>

namespace lazylab {

Expected<NodeId> GraphBuilder::add(OpId op, Operands operands, const Attrs& attrs, const TensorType* declared) {
  boost::container::small_vector<const TensorType*, 3> types;
  for (NodeId id : operands) types.push_back(&graph_.node(id).type);
  auto type = infer_type(op, std::span(types.data(), types.size()), attrs, declared);
  if (!type) return type.error();
  return graph_.add(op, std::move(*type), std::move(operands), attrs);
}

NodeId GraphBuilder::add_typed(OpId op, TensorType type, Operands operands, Attrs attrs) {
  return graph_.add(op, std::move(type), std::move(operands), std::move(attrs));
}

NodeId GraphBuilder::constant(double value, TensorType type) {
  AttrValue scalar = scalar_attr(type.dtype, value);
  return constant(scalar, std::move(type));
}

NodeId GraphBuilder::constant(const AttrValue& value, TensorType type) {
  Attrs attrs;
  attrs[0] = value;
  return graph_.add(OpId::Constant, std::move(type), {}, attrs);
}

Expected<NodeId> GraphBuilder::broadcast_to(NodeId id, const Dims& shape) {
  const TensorType& from = type(id);
  if (from.shape == shape) return id;
  if (from.shape.size() > shape.size())
    return make_error(fmt::format("cannot broadcast {} to {}", to_string(from), to_string(shape)));
  Attrs attrs;
  int64_t offset = static_cast<int64_t>(shape.size() - from.shape.size());
  for (int64_t d = 0; d < from.rank(); ++d) attrs[0].ints.push_back(d + offset);
  TensorType to{from.dtype, shape};
  return add(OpId::Broadcast, {id}, attrs, &to);
}

Expected<Rebuilt> rebuild(const Graph& graph, const RewriteFn& rewrite, const std::vector<bool>* keep) {
  Rebuilt result;
  GraphBuilder builder;
  std::vector<NodeId> mapped(graph.size(), ~NodeId{0});
  for (NodeId id = 0; id < graph.size(); ++id) {
    if (keep && !(*keep)[id]) {
      result.changed = true;
      continue;
    }
    const Node& node = graph.node(id);
    Operands operands;
    for (NodeId operand : node.operands) operands.push_back(mapped[operand]);
    auto replacement = rewrite(builder, node, operands);
    if (!replacement) return replacement.error();
    if (*replacement) {
      mapped[id] = **replacement;
      result.changed = true;
    } else {
      mapped[id] = builder.add_typed(node.op, node.type, std::move(operands), node.attrs);
    }
  }
  std::vector<NodeId> roots;
  for (NodeId root : graph.roots()) roots.push_back(mapped[root]);
  builder.graph().set_roots(std::move(roots));
  result.graph = std::move(builder.graph());
  return result;
}

}  // namespace lazylab
