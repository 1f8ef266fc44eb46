// The .lzir text format:
//
//   graph @name {
//     %0 = parameter {ordinal = 0} : f32[64]
//     %1 = constant {value = 1} : f32[64]
//     %2 = add(%0, %1) : f32[64]
//     return %2
//   }
//
// `//` starts a comment. Value names are free-form after `%`; the printer
// numbers them. Every graph prints and parses back to an equal graph.
#pragma once

#include <string>
#include <string_view>

#include "expected.h"
#include "graph.h"

namespace lazylab {

struct NamedGraph {
  std::string name;
  Graph graph;
};

std::string print_graph(const Graph& graph, std::string_view name = "main");
// One node without its result name, e.g. "add(%0, %1) : f32[4]".
std::string print_node(const Graph& graph, NodeId id);
std::string print_attrs(const Node& node);
// One attribute's value as the text format spells it; a scalar as a value of
// `dtype` (an integer exactly, a float in its shortest round-trip form).
std::string print_attr(AttrKind kind, const AttrValue& value, DType dtype);

// `source` names the input in errors ("file.lzir:3:7: ...");
// `first_line` offsets line numbers when parsing a split of a larger file.
Expected<NamedGraph> parse_graph(std::string_view text, std::string_view source = "<input>", int first_line = 1);

}  // namespace lazylab
