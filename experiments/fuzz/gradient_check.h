// `lazylab fuzz`'s gradient check: a random graph made f64 (every float
// value; integers and bools as they were), a loss of its float roots (each
// summed against uneven weights), differentiated by core/autodiff.h with
// respect to its float parameters after `decompose`, and the gradient at a
// few elements drawn from the seed against central differences of the loss
// on the interpreter. An element where differences at h and 2h disagree (a
// kink, a jump of a cast or a comparison nearby), or a graph with a value
// that is not finite, says nothing and is passed over.
#pragma once

#include <cstdint>
#include <string>

#include "core/backend.h"
#include "core/expected.h"
#include "core/graph.h"

namespace lazylab {

struct GradientCheck {
  bool differentiated = false;  // false: nothing to check (no float path to a root, an op without a rule)
  int64_t elements = 0;         // gradient elements compared with central differences
  std::string problem;          // "" when every compared element agrees
};

// `graph` as an f64 function of its float parameters with one scalar root,
// the loss; empty where no float root depends on a float parameter.
Expected<Graph> f64_loss_graph(const Graph& graph);

GradientCheck check_gradient(const Graph& graph, uint64_t seed, Backend& interp);

}  // namespace lazylab
