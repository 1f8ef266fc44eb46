// Random well-typed graphs for `lazylab fuzz`, in the spirit of NNSmith:
// every op of the op table, chosen by its type rule (so a new op row is
// fuzzed without touching this file), over float, integer and bool values
// of small shapes, with broadcasts, reductions over any axes, layout ops,
// matmuls and special constants (NaN, infinities, signed zeros). The same
// seed gives the same graph.
#pragma once

#include <cstdint>

#include "core/graph.h"

namespace lazylab {

struct GeneratorOptions {
  int min_ops = 4, max_ops = 20;  // ops besides parameters and constants
  int max_rank = 3;
  int64_t max_dim = 5;
};

Graph random_graph(uint64_t seed, const GeneratorOptions& options = {});

}  // namespace lazylab
