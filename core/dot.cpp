#include "core/dot.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/graphviz.hpp>
#include <set>
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

std::string kernel_label(const Kernel& kernel, const Graph& graph) {
  std::vector<std::string> names;
  for (NodeId id : kernel.ops) {
    std::string name(op_name(graph.node(id).op));
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  std::string shown;
  for (size_t i = 0; i < names.size() && i < 4; ++i) shown += (i ? ", " : "") + names[i];
  if (names.size() > 4) shown += ", ...";
  return kernel.ops.size() > 1 ? fmt::format("{} ({} ops)", shown, kernel.ops.size()) : shown;
}

std::string kernel_graph_dot(const Program& program, const Graph& graph, const std::vector<uint64_t>& kernel_bytes) {
  std::ostringstream out;
  out << "digraph kernels {\n  rankdir=TB;\n  node [shape=box, style=filled, fontname=\"Helvetica\", fontsize=10];\n";
  for (size_t i = 0; i < program.parameters.size(); ++i)
    out << fmt::format("  p{} [label=\"param {}\\n{}\", shape=ellipse, fillcolor=white];\n", program.parameters[i], i,
                       to_string(graph.node(program.parameters[i]).type));
  for (size_t k = 0; k < program.kernels.size(); ++k) {
    double megabytes = k < kernel_bytes.size() ? static_cast<double>(kernel_bytes[k]) / 1e6 : 0;
    std::string ops = kernel_label(program.kernels[k], graph);
    out << fmt::format(
        "  k{0} [label=\"k{0}: {1}\\n{2:.3f} MB\", tooltip=\"kernel {0}: {1}; reads and writes {2:.3f} MB\", "
        "fillcolor={3}];\n",
        k, ops, megabytes, kernel_color(static_cast<int>(k)));
  }
  std::set<std::pair<std::string, std::string>> edges;
  auto source_of = [&](NodeId value) {
    int producer = program.values[value].kernel;
    return producer >= 0 ? fmt::format("k{}", producer) : fmt::format("p{}", value);
  };
  for (size_t k = 0; k < program.kernels.size(); ++k)
    for (NodeId input : program.kernels[k].inputs) edges.insert({source_of(input), fmt::format("k{}", k)});
  for (size_t i = 0; i < program.outputs.size(); ++i) {
    out << fmt::format("  o{} [label=\"output {}\", shape=ellipse, fillcolor=white];\n", i, i);
    edges.insert({source_of(program.outputs[i]), fmt::format("o{}", i)});
  }
  for (const auto& [from, to] : edges) out << fmt::format("  {} -> {};\n", from, to);
  out << "}\n";
  return out.str();
}

}  // namespace lazylab
