// Pipeline sweeps: an option value written as a brace list in a pipeline's
// text ("plan-memory{algo={naive,linear-scan}}") is one pipeline per value,
// named "NAME[algo=naive]"; several lists give every combination, the first
// list varying slowest.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/expected.h"

namespace lazylab {

// The most pipelines one sweep may expand to: beyond it, a typo (or a fuzzer)
// would have the loader build millions of entries.
inline constexpr int64_t kMaxSweepEntries = 10'000;

struct ExpandedPipeline {
  std::string name, text;
};

// Errors: an empty brace list, more than kMaxSweepEntries combinations.
Expected<std::vector<ExpandedPipeline>> expand_pipeline_sweep(const std::string& name, const std::string& text);

}  // namespace lazylab
