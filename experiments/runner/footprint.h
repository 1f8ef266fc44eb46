// What a workload's cells hold at once, learned before anything is
// allocated: one step traced on placeholder inputs (Context::placeholder)
// gives its outputs, and a trace past its limit stops there.
#pragma once

#include <cstdint>
#include <vector>

#include "core/engine.h"
#include "workload.h"

namespace lazylab {

struct Footprint {
  uint64_t input_bytes = 0;
  uint64_t output_bytes = 0;     // one step's outputs, in their dtypes
  uint64_t reference_bytes = 0;  // the reference's outputs as the runner keeps them (doubles)
  bool outputs_known = false;    // false: the step would not trace without data (the run will say why)
  uint64_t total() const { return input_bytes + output_bytes + reference_bytes; }
};

// Traces one step of `workload` with no data under `options`' trace limit;
// an error where the trace passes it.
Expected<Footprint> trace_footprint(const Workload& workload, const EngineOptions& options);

}  // namespace lazylab
