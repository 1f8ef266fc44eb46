#include "core/dot.h"

#include <fmt/format.h>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/graphviz.hpp>
#include <sstream>

#include "core/text_format.h"

namespace lazylab {
namespace {

struct VertexLabel {
  std::string label;
  std::string color;
};

using DotGraph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS, VertexLabel>;

std::string kernel_color(int kernel) {
  static constexpr const char* kPalette[] = {"lightblue", "lightyellow", "palegreen", "pink",
                                             "lavender",  "wheat",       "lightcyan", "mistyrose"};
  return kernel < 0 ? "white" : kPalette[kernel % 8];
}

}  // namespace

std::string to_dot(const Graph& graph, const std::vector<int>* kernel_of) {
  DotGraph dot(graph.size());
  std::vector<bool> live = live_nodes(graph);
  for (NodeId id = 0; id < graph.size(); ++id) {
    const Node& node = graph.node(id);
    int kernel = kernel_of ? (*kernel_of)[id] : -1;
    std::string label = fmt::format("%{} {}{}\\n{}", id, op_name(node.op),
                                    kernel >= 0 ? fmt::format(" [k{}]", kernel) : "", to_string(node.type));
    dot[id] = VertexLabel{live[id] ? label : label + "\\n(dead)", kernel_color(kernel)};
    for (NodeId operand : node.operands) boost::add_edge(operand, id, dot);
  }
  std::ostringstream out;
  boost::write_graphviz(out, dot, [&](std::ostream& os, auto v) {
    os << fmt::format("[label=\"{}\", shape=box, style=filled, fillcolor={}]", dot[v].label, dot[v].color);
  });
  return out.str();
}

}  // namespace lazylab
