// Buffer donation: which parameter's buffer each output of a Program may be
// written into, when the caller gives that parameter up with the execution
// (a training step's old weights and optimizer state, replaced by its
// outputs). Decided once per Program from its kernel order; whether a
// parameter is given up is the caller's to say at each execution (ABI 3.8).
#pragma once

#include <cstdint>
#include <vector>

#include "graph.h"
#include "program.h"

namespace lazylab {

// Per output ordinal, the parameter ordinal whose buffer it may take, or -1.
// A parameter qualifies for an output of its dtype and shape when nothing
// reads it once the output is being written: every kernel reading it runs
// before the output's, or the output's kernel is elementwise, reads it only
// element for element (Full access, elementwise ops) and only in ops at or
// before the one making the output. A parameter that is itself an output
// never qualifies (its copy is made after the kernels), and each parameter
// goes to one output at most, a same-kernel update (w' = w - lr g) first.
std::vector<int64_t> plan_output_donors(const Program& program, const Graph& graph);

}  // namespace lazylab
