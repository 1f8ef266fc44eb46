// An evaluator of graphs that shares no code with the interpreter but the
// scalar formulas (op_formulas.hpp) and the integer rules
// (reference_semantics.hpp), for `lazylab fuzz` to check the reference
// itself. Every element is gathered from its own index arithmetic (the
// interpreter scatters), in long double (the interpreter uses double), and
// rounded to its node's dtype as each op's result is. Composite ops are
// evaluated whole, by their definitions in ops.def. Each element is computed
// on its own (a softmax element re-reads its row), which suits the fuzzer's
// small graphs, not workloads.
#pragma once

#include <vector>

#include "core/expected.h"
#include "core/graph.h"
#include "runner/output_check.h"
#include "runner/workload.h"

namespace lazylab {

// The roots of `graph` on `inputs` (by parameter ordinal). Errors: integer
// division by zero, as the interpreter reports it.
Expected<ReferenceOutputs> evaluate_precisely(const Graph& graph, const std::vector<HostTensor>& inputs);

}  // namespace lazylab
