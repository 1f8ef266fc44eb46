#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/text_format.h"

namespace lazylab {

std::string print_attr(AttrKind kind, const AttrValue& value, DType dtype) {
  switch (kind) {
    case AttrKind::Int: return fmt::format("{}", value.i);
    case AttrKind::Bool: return value.i ? "true" : "false";
    case AttrKind::Float: return fmt::format("{}", value.f);  // shortest round-trip form
    case AttrKind::Ints: return fmt::format("[{}]", fmt::join(value.ints, ", "));
    case AttrKind::Scalar: return is_float(dtype) ? fmt::format("{}", value.f) : fmt::format("{}", value.i);
  }
  return "?";
}

std::string print_attrs(const Node& node) {
  const OpInfo& info = op_info(node.op);
  if (info.num_attrs == 0) return "";
  std::string out = " {";
  for (int a = 0; a < info.num_attrs; ++a) {
    if (a) out += ", ";
    out += fmt::format("{} = {}", info.attrs[a].name, print_attr(info.attrs[a].kind, node.attrs[a], node.type.dtype));
  }
  return out + "}";
}

std::string print_node(const Graph& graph, NodeId id) {
  const Node& node = graph.node(id);
  std::string out(op_name(node.op));
  if (!node.operands.empty()) {
    out += "(";
    for (size_t i = 0; i < node.operands.size(); ++i) out += fmt::format("{}%{}", i ? ", " : "", node.operands[i]);
    out += ")";
  }
  return out + print_attrs(node) + " : " + to_string(node.type);
}

std::string print_graph(const Graph& graph, std::string_view name) {
  std::string out = fmt::format("graph @{} {{\n", name);
  for (NodeId id = 0; id < graph.size(); ++id) out += fmt::format("  %{} = {}\n", id, print_node(graph, id));
  out += "  return";
  for (size_t i = 0; i < graph.roots().size(); ++i) out += fmt::format("{} %{}", i ? "," : "", graph.roots()[i]);
  return out + "\n}\n";
}

}  // namespace lazylab
