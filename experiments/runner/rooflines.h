// Each cell's floor: the least time its workload could take on the
// ceilings of the machine it ran on (rooflines.cpp says how).
#pragma once

#include "runner.h"

namespace lazylab {

// Fills every cell's floor and its fraction of it.
void compute_rooflines(ExperimentResult& result);

}  // namespace lazylab
