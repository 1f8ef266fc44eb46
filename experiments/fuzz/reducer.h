// Delta debugging over a graph's nodes: a failing graph shrunk to one that
// still fails, by keeping fewer roots and cutting nodes into parameters
// (their producers then fall away), until no single step keeps it failing.
#pragma once

#include <functional>
#include <vector>

#include "core/graph.h"

namespace lazylab {

// The live part of `graph` for `roots`, with each node marked in
// `as_parameter` turned into a parameter of its type; parameters are
// numbered densely in program order.
Graph compact_graph(const Graph& graph, const std::vector<NodeId>& roots, const std::vector<bool>& as_parameter);

Graph reduce_graph(const Graph& graph, const std::function<bool(const Graph&)>& still_fails);

}  // namespace lazylab
