#include "core/metrics.h"

#include <fmt/format.h>

namespace lazylab {

std::string Metrics::to_string() const {
  return fmt::format(
      "traces={} nodes_traced={} cache_hits={} cache_misses={} evictions={} compile_ms={:.3f} "
      "execute_ms={:.3f}",
      traces, nodes_traced, cache_hits, cache_misses, evictions, compile_ms, execute_ms);
}

}  // namespace lazylab
