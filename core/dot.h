#pragma once

#include <string>

#include "graph.h"

namespace lazylab {

// Graphviz DOT of the nodes reachable from the roots, written through
// Boost.Graph. `kernel_of` (optional, by node id) clusters nodes by kernel.
std::string to_dot(const Graph& graph, const std::vector<int>* kernel_of = nullptr);

}  // namespace lazylab
