// Reverse-mode differentiation as a graph transformation (JAX's grad,
// AOTAutograd's joint graph): from a graph and one of its roots, a scalar
// loss, the joint forward-backward graph that also returns the loss's
// gradient with respect to chosen parameters. Each op's vector-Jacobian
// rule is in autodiff.cpp, the elementwise ones written from op_formulas.hpp's
// derivatives beside each op's formula. Every op has a rule but
// layernorm (differentiated through its decomposition, so `decompose` runs
// first; softmax and gelu, whose rules are fused, may stay whole:
// `decompose{keep=fused-gradient}`), conv2d and avg_pool2d padded
// past their window, and comparisons and integer values (no gradient flows
// through them); the ones without are an error naming the op. The `grad`
// pass (passes/grad.cpp) runs it in a pipeline.
#pragma once

#include <cstdint>
#include <vector>

#include "expected.h"
#include "graph.h"

namespace lazylab {

struct GradRequest {
  size_t of = 0;  // the root to differentiate: a float value of one element
  // Parameter ordinals; empty: every float parameter, by ordinal.
  std::vector<int64_t> wrt;
};

// `graph` with, after its roots, d(root `of`)/d(parameter) for each
// parameter of `request.wrt` in order, each of its parameter's type (zeros
// where the loss does not depend on it). The forward values the rules read
// are the graph's own nodes: what is kept for the backward is decided later.
Expected<Graph> differentiate(const Graph& graph, const GradRequest& request);

// The composites differentiated whole, by a fused rule, rather than through
// their decompositions: softmax (p (g - sum(g p)): the decomposition's max
// would keep the input for a gradient that cancels) and gelu (its
// derivative from x: the decomposition's would keep its intermediates).
bool has_fused_gradient(OpId op);

}  // namespace lazylab
