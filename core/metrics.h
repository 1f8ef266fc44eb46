// Counters in the spirit of PyTorch/XLA's metrics report.
#pragma once

#include <cstdint>

namespace lazylab {

struct Metrics {
  uint64_t traces = 0;        // syncs that found pending work
  uint64_t nodes_traced = 0;  // nodes recorded by the tensor API
  uint64_t cache_hits = 0;
  uint64_t cache_misses = 0;  // each one a compilation (a new shape is a new graph)
  uint64_t evictions = 0;
  double compile_ms = 0;  // passes + backend compile, misses only
  double execute_ms = 0;  // backend execute
};

}  // namespace lazylab
