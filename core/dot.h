#pragma once

#include <string>

#include "graph.h"
#include "program.h"

namespace lazylab {

// Graphviz DOT of the nodes reachable from the roots, written through
// Boost.Graph. `kernel_of` (optional, by node id) clusters nodes by kernel.
std::string to_dot(const Graph& graph, const std::vector<int>* kernel_of = nullptr);

// A kernel's ops, short enough for a box or a table cell: "exp, sub, div"
// or "exp, sub, ... (12 ops)".
std::string kernel_label(const Kernel& kernel, const Graph& graph);

// Graphviz DOT of a Program's kernels: one box per kernel (its ops and the
// bytes it reads and writes, `kernel_bytes` by kernel), an edge where a
// kernel reads what another wrote, and the parameters and outputs.
std::string kernel_graph_dot(const Program& program, const Graph& graph, const std::vector<uint64_t>& kernel_bytes);

}  // namespace lazylab
