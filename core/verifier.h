#pragma once

#include "expected.h"
#include "graph.h"

namespace lazylab {

// Checks operand order (acyclicity), types against the op table's inference,
// attribute ranges, parameter ordinals (dense, unique) and roots. The error
// names the offending node as it prints.
Status verify(const Graph& graph);

}  // namespace lazylab
