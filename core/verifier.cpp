#include "core/verifier.h"

#include <fmt/format.h>

#include "core/hash.h"
#include "core/text_format.h"

namespace lazylab {
namespace {

Error node_error(const Graph& graph, NodeId id, const std::string& what) {
  return make_error(fmt::format("verifier: %{} = {}: {}", id, print_node(graph, id), what));
}

Status verify_node(const Graph& graph, NodeId id) {
  const Node& node = graph.node(id);
  if (static_cast<int>(node.op) >= kNumOps) return make_error(fmt::format("verifier: %{}: bad op id", id));
  boost::container::small_vector<const TensorType*, 3> operand_types;
  for (NodeId operand : node.operands) {
    // Operands must precede their user: this is what keeps the graph acyclic.
    if (operand >= id) return node_error(graph, id, fmt::format("operand %{} does not precede it", operand));
    operand_types.push_back(&graph.node(operand).type);
  }
  auto type = infer_type(node.op, std::span(operand_types.data(), operand_types.size()), node.attrs, &node.type);
  if (!type) return node_error(graph, id, type.error().message);
  const OpInfo& info = op_info(node.op);
  for (int a = 0; a < info.num_attrs; ++a)
    if (info.attrs[a].kind == AttrKind::Scalar)
      if (std::string problem = scalar_attr_problem(node.type.dtype, node.attrs[a]); !problem.empty())
        return node_error(graph, id, fmt::format("attribute '{}': {}", info.attrs[a].name, problem));
  if (node.hash != hash_node(node, graph.nodes())) return node_error(graph, id, "stale hash");
  return {};
}

Status verify_parameters(const Graph& graph) {
  std::vector<NodeId> params = graph.parameters();
  for (size_t i = 0; i < params.size(); ++i)
    if (graph.node(params[i]).attrs[0].i != static_cast<int64_t>(i))
      return node_error(graph, params[i],
                        fmt::format("parameter ordinals must be 0..{} without gaps or repeats", params.size() - 1));
  return {};
}

}  // namespace

Status verify(const Graph& graph) {
  for (NodeId id = 0; id < graph.size(); ++id) LAZYLAB_TRY(verify_node(graph, id));
  LAZYLAB_TRY(verify_parameters(graph));
  if (graph.roots().empty()) return make_error("verifier: graph has no roots");
  for (NodeId root : graph.roots())
    if (root >= graph.size()) return make_error(fmt::format("verifier: root %{} does not exist", root));
  return {};
}

}  // namespace lazylab
